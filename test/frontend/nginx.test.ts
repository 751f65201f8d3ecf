/**
 * The real client: nginx in front of the FastCGI (TCP, kept-alive connections) and SCGI
 * (Unix socket) listeners, a fake pool behind them. Pins what nginx actually does with
 * our records: keep-conn reuse, large bodies, error pages, and cut responses.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { ErrorCodes, ProxyError } from '../../src/errors.js';
import { FakePool, echoBodyAfterEnd, echoParams, failAfterHead, failWith } from '../helpers/fake-pool.js';
import { httpRequest, httpUpload } from '../helpers/http-client.js';
import { startNginx, type Nginx } from '../helpers/nginx.js';
import { seededBytes, sha256 } from '../helpers/payload.js';
import { Cleanup } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';
import { startRig, type Rig } from './support.js';

describe('nginx → fcgi-pm front ends', { timeout: 60_000 }, () => {
  const scope = new Cleanup();
  let fcgi: Rig;
  let nginx: Nginx;
  const pool = new FakePool();

  before(async () => {
    fcgi = await startRig(scope, 'fastcgi', '127.0.0.1:0', { pool, cfg: { idleTimeout: 10_000 } });
    const sock = join(makeTempDir(scope), 's.sock');
    await startRig(scope, 'scgi', `unix:${sock}`, { pool, cfg: { idleTimeout: 10_000, mode: 0o600 } });
    nginx = await startNginx(
      scope,
      `
    root /srv/none;
    location /fcgi/ {
      include /etc/nginx/fastcgi_params;
      fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name;
      fastcgi_keep_conn on;
      fastcgi_pass fpm;
    }
    location /scgi/ {
      include /etc/nginx/scgi_params;
      scgi_pass unix:${sock};
    }`,
      { httpExtra: `upstream fpm { server ${fcgi.listener.address}; keepalive 4; }` },
    );
  });
  after(() => scope.run());

  it('FastCGI: 20 requests reuse one kept-alive connection, with nginx variables', async () => {
    pool.behaviour = echoParams;
    for (let i = 0; i < 20; i++) {
      const r = await httpRequest(`${nginx.url}/fcgi/page.php?i=${i}`, { headers: { 'X-Test': 'v' } });
      assert.equal(r.status, 200, nginx.errorLog());
      const p = JSON.parse(r.text);
      assert.equal(p.QUERY_STRING, `i=${i}`);
      assert.equal(p.SCRIPT_NAME, '/fcgi/page.php');
      assert.equal(p.HTTP_X_TEST, 'v');
    }
    assert.equal(fcgi.listener.connections, 1, 'nginx kept one connection (FCGI_KEEP_CONN honoured)');
  });

  it('FastCGI: 10 MB POST echoed back intact', async () => {
    pool.behaviour = echoBodyAfterEnd;
    const block = seededBytes(65536, 21);
    const r = await httpUpload(`${nginx.url}/fcgi/up.php`, block, 160 * 65536, { timeout: 20_000 });
    assert.equal(r.status, 200, nginx.errorLog());
    assert.equal(r.body.length, 160 * 65536);
    const expect = Buffer.concat(Array.from({ length: 160 }, () => block));
    assert.equal(sha256(r.body), sha256(expect));
  });

  it('FastCGI: an error before the head becomes that status; a cut response stays cut', async () => {
    pool.behaviour = failWith(new ProxyError(ErrorCodes.QUEUE_FULL, 503, 'full', 3));
    const r = await httpRequest(`${nginx.url}/fcgi/x.php`);
    assert.equal(r.status, 503);
    assert.equal(r.headers['retry-after'], '3');
    pool.behaviour = failAfterHead;
    // nginx must not present a truncated body as complete: the chunked stream is not terminated.
    await assert.rejects(httpRequest(`${nginx.url}/fcgi/x.php`, { timeout: 10_000 }));
    pool.behaviour = echoParams;
    assert.equal((await httpRequest(`${nginx.url}/fcgi/after.php`)).status, 200);
  });

  it('SCGI over a Unix socket: variables, body and status', async () => {
    pool.behaviour = echoParams;
    const r = await httpRequest(`${nginx.url}/scgi/app?x=1`, { method: 'POST', body: 'hello' });
    assert.equal(r.status, 200, nginx.errorLog());
    const p = JSON.parse(r.text);
    assert.equal(p.QUERY_STRING, 'x=1');
    assert.equal(p.CONTENT_LENGTH, '5');
    assert.equal(p.REQUEST_METHOD, 'POST');
    pool.behaviour = echoBodyAfterEnd;
    const block = seededBytes(65536, 5);
    const up = await httpUpload(`${nginx.url}/scgi/up`, block, 32 * 65536);
    assert.equal(sha256(up.body), sha256(Buffer.concat(Array.from({ length: 32 }, () => block))));
    pool.behaviour = failWith(new ProxyError(ErrorCodes.BACKEND_UNREACHABLE, 502, 'down'));
    assert.equal((await httpRequest(`${nginx.url}/scgi/x`)).status, 502);
  });
});
