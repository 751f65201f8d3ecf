/**
 * The harness itself, without fcgi-pm: nginx straight to php-cgi and to the SCGI echo
 * fixture. When these pass and a product test fails, the fault is in fcgi-pm.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { startScgiEcho } from '../fixtures/scgi/echo-server.js';
import { httpRequest, httpUpload } from '../helpers/http-client.js';
import { fastcgiParams, scgiParams, startNginx } from '../helpers/nginx.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { bigBlock, bigSha256, sha256 } from '../helpers/payload.js';
import { startPhpCgi } from '../helpers/php.js';
import { descendantPids } from '../helpers/proc.js';
import { makeTempDir } from '../helpers/tmp.js';

test('nginx → php-cgi directly: fixtures and helpers work', { timeout: 30_000 }, async (t) => {
  const dir = makeTempDir(t);
  const php = await startPhpCgi(t, join(dir, 'php.sock'));
  assert.deepEqual(descendantPids(process.pid, 'php-cgi'), [php.pid]);
  const ngx = await startNginx(
    t,
    `root ${PHP_FIXTURES};
    location ~ \\.php$ { fastcgi_pass unix:${dir}/php.sock; ${fastcgiParams()} }`,
  );
  const hello = await httpRequest(`${ngx.url}/hello.php`);
  assert.equal(hello.status, 200);
  assert.equal(hello.text, 'Hello from PHP\n');

  const echo = await httpRequest(`${ngx.url}/echo.php?a=1&b=x%20y`, { headers: { cookie: 'c1=v1; c2=v2', 'x-test': 'yes' } });
  const j = JSON.parse(echo.text);
  assert.equal(j.method, 'GET');
  assert.equal(j.query, 'a=1&b=x%20y');
  assert.deepEqual(j.cookies, { c1: 'v1', c2: 'v2' });
  assert.equal(j.headers.HTTP_X_TEST, 'yes');

  const big = await httpRequest(`${ngx.url}/big.php?mb=2`);
  assert.equal(big.body.length, 2 * 1048576);
  assert.equal(sha256(big.body), bigSha256(2));

  const block = bigBlock();
  const up = await httpUpload(`${ngx.url}/upload-hash.php`, block, 3 * 65536);
  assert.equal(up.status, 200);
  assert.deepEqual(JSON.parse(up.text), { sha256: sha256(Buffer.concat([block, block, block])), bytes: 3 * 65536 });
});

test('nginx → SCGI echo fixture', { timeout: 20_000 }, async (t) => {
  const dir = makeTempDir(t);
  const echo = await startScgiEcho(join(dir, 'scgi.sock'));
  t.after(() => echo.close());
  const ngx = await startNginx(t, `location / { scgi_pass unix:${dir}/scgi.sock; ${scgiParams()} }`);
  const r = await httpRequest(`${ngx.url}/x/y?status=201`, { method: 'POST', body: 'hello' });
  assert.equal(r.status, 201);
  const j = JSON.parse(r.text);
  assert.equal(j.params.REQUEST_URI, '/x/y?status=201');
  assert.equal(j.body_length, 5);
  assert.equal(j.body_sha256, sha256('hello'));
});
