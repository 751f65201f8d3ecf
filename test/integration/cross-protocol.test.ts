/**
 * Issue acceptance (d): protocols translated both ways.
 *   SCGI front end (raw client) → pool of FastCGI backends (php-cgi)
 *   FastCGI front end (nginx and a raw client) → pool of SCGI backends (Node echo fixture)
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { startScgiEcho, type ScgiEcho } from '../fixtures/scgi/echo-server.js';
import { startDaemon, type Daemon } from '../helpers/daemon.js';
import { FcgiClient, parseCgiOutput } from '../helpers/fcgi-client.js';
import { httpRequest, httpUpload } from '../helpers/http-client.js';
import { fastcgiParams, startNginx, type Nginx } from '../helpers/nginx.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { seededBytes, sha256 } from '../helpers/payload.js';
import { startPhpCgi } from '../helpers/php.js';
import { freePort } from '../helpers/ports.js';
import { scgiRequest } from '../helpers/scgi-client.js';
import { Cleanup } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';

describe('protocol translation', { timeout: 60_000 }, () => {
  const scope = new Cleanup();
  let dir: string;
  let fcgiPort: number;
  let daemon: Daemon;
  let ngx: Nginx;
  let echo: ScgiEcho;

  before(async () => {
    dir = makeTempDir(scope);
    await startPhpCgi(scope, join(dir, 'php.sock'));
    echo = await startScgiEcho(join(dir, 'echo.sock'));
    scope.after(() => echo.close());
    fcgiPort = await freePort();
    // Written as an operator would (YAML text), to cover that path of startDaemon too.
    daemon = await startDaemon(
      scope,
      `
listen:
  - { protocol: scgi, address: "unix:${dir}/front.sock", pool: php }
  - { protocol: fastcgi, address: "127.0.0.1:${fcgiPort}", pool: echo }
pools:
  php:
    backend: fastcgi
    backends: [ "unix:${dir}/php.sock" ]
    max_conns_per_backend: 1
  echo:
    backend: scgi
    backends: [ "unix:${dir}/echo.sock" ]
log: { level: info, access: true }
`,
    );
    ngx = await startNginx(scope, `location / { fastcgi_pass 127.0.0.1:${fcgiPort}; ${fastcgiParams()} }`);
  });
  after(() => scope.run());

  const phpVars = (script: string, query = '', extra: Record<string, string> = {}): Record<string, string> => ({
    REQUEST_METHOD: 'GET',
    SCRIPT_FILENAME: `${PHP_FIXTURES}/${script}`,
    SCRIPT_NAME: `/${script}`,
    REQUEST_URI: `/${script}${query ? '?' + query : ''}`,
    QUERY_STRING: query,
    DOCUMENT_ROOT: PHP_FIXTURES,
    SERVER_PROTOCOL: 'HTTP/1.1',
    GATEWAY_INTERFACE: 'CGI/1.1',
    REDIRECT_STATUS: '200',
    SERVER_NAME: 'localhost',
    SERVER_PORT: '80',
    REMOTE_ADDR: '127.0.0.1',
    ...extra,
  });

  it('SCGI front end → php-cgi: GET with query string and headers', async () => {
    const r = await scgiRequest({ path: `${dir}/front.sock` }, phpVars('echo.php', 'x=1&y=two', { HTTP_COOKIE: 'k=v', HTTP_X_A: 'b' }));
    assert.equal(r.status, 200, r.raw.toString('latin1').slice(0, 300));
    const j = JSON.parse(r.body.toString('utf8'));
    assert.equal(j.method, 'GET');
    assert.equal(j.query, 'x=1&y=two');
    assert.deepEqual(j.cookies, { k: 'v' });
    assert.equal(j.headers.HTTP_X_A, 'b');
  });

  it('SCGI front end → php-cgi: POST body of 1 MB (sha256)', async () => {
    const body = seededBytes(1048576, 3);
    const r = await scgiRequest(
      { path: `${dir}/front.sock` },
      phpVars('upload-hash.php', '', { REQUEST_METHOD: 'POST', CONTENT_TYPE: 'application/octet-stream' }),
      body,
    );
    assert.equal(r.status, 200, r.raw.toString('latin1').slice(0, 300));
    assert.deepEqual(JSON.parse(r.body.toString('utf8')), { sha256: sha256(body), bytes: body.length });
  });

  it('SCGI front end → php-cgi: status and Location set by PHP', async () => {
    const s = await scgiRequest({ path: `${dir}/front.sock` }, phpVars('status.php', 'code=404'));
    assert.equal(s.status, 404);
    const r = await scgiRequest({ path: `${dir}/front.sock` }, phpVars('redirect.php', 'to=/there'));
    assert.equal(r.status, 302);
    assert.equal(r.header('location'), '/there');
  });

  it('nginx FastCGI → SCGI backend: variables, status, headers', async () => {
    const r = await httpRequest(`${ngx.url}/some/path?status=201&z=9`, { headers: { 'x-hello': 'world', cookie: 'a=b' } });
    assert.equal(r.status, 201);
    assert.equal(r.headers['x-backend'], 'scgi-echo');
    const j = JSON.parse(r.text);
    assert.equal(j.params.REQUEST_URI, '/some/path?status=201&z=9');
    assert.equal(j.params.QUERY_STRING, 'status=201&z=9');
    assert.equal(j.params.REQUEST_METHOD, 'GET');
    assert.equal(j.params.HTTP_X_HELLO, 'world');
    assert.equal(j.params.HTTP_COOKIE, 'a=b');
    assert.equal(j.params.SCGI, '1');
    assert.equal(j.params.CONTENT_LENGTH, '0');
    assert.equal(j.body_length, 0);
  });

  it('nginx FastCGI → SCGI backend: 5 MB POST body (sha256)', async () => {
    const block = seededBytes(1048576, 11);
    const r = await httpUpload(`${ngx.url}/upload`, block, 5 * 1048576);
    assert.equal(r.status, 200, r.text.slice(0, 300));
    const j = JSON.parse(r.text);
    assert.equal(j.params.CONTENT_LENGTH, String(5 * 1048576));
    assert.equal(j.body_length, 5 * 1048576);
    assert.equal(j.body_sha256, sha256(Buffer.concat(Array.from({ length: 5 }, () => block))));
  });

  it('raw FastCGI client → SCGI backend: STDOUT carries the CGI response, END_REQUEST complete', async () => {
    const c = await FcgiClient.connect({ port: fcgiPort });
    try {
      const body = Buffer.from('ping-body');
      c.request(1, { REQUEST_METHOD: 'PUT', REQUEST_URI: '/raw?status=202', QUERY_STRING: 'status=202', CONTENT_LENGTH: String(body.length), HTTP_X_RAW: '1' }, body);
      const res = await c.response(1);
      assert.equal(res.protocolStatus, 0);
      const out = parseCgiOutput(res.stdout);
      assert.equal(out.status, 202);
      const j = JSON.parse(out.body.toString('utf8'));
      assert.equal(j.params.REQUEST_METHOD, 'PUT');
      assert.equal(j.params.HTTP_X_RAW, '1');
      assert.equal(j.body_sha256, sha256(body));
    } finally {
      c.close();
    }
  });

  it('stops on SIGTERM with exit code 0', async () => {
    assert.deepEqual(await daemon.stop(), { code: 0, signal: null }, daemon.dump());
  });
});
