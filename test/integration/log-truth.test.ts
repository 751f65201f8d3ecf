// Logs that tell the truth: the bytes of a page fcgi-pm writes itself (403, 404, 503),
// a 504 filed under its own code even when it was also slow, and what a removed site's
// next request really gets.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify as stringifyYaml } from 'yaml';
import { startDaemon, type LogLine } from '../helpers/daemon.js';
import { FcgiClient, parseCgiOutput, phpParams } from '../helpers/fcgi-client.js';
import { httpRequest } from '../helpers/http-client.js';
import { PHP_FIXTURES, PHP_FLAGS } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { makeTempDir } from '../helpers/tmp.js';

test('access lines count the bytes of error pages fcgi-pm writes; a slow 504 is logged as ERR_REQUEST_TIMEOUT', { timeout: 60_000 }, async (t) => {
  const [http, fcgi] = [await freePort(), await freePort()];
  const d = await startDaemon(t, {
    control_socket: 'off',
    listen: [
      { protocol: 'http', address: `127.0.0.1:${http}`, pool: 'php', document_root: PHP_FIXTURES },
      { protocol: 'fastcgi', address: `127.0.0.1:${fcgi}`, pool: 'php' },
    ],
    pools: { php: { command: ['php-cgi', ...PHP_FLAGS], max_children: 2, request_timeout: '1s', slow_request: '300ms' } },
    log: { level: 'info', access: true },
  });
  const access = (uri: string): Promise<LogLine> => d.waitForLog((l) => l.kind === 'access' && l.uri === uri, { timeout: 10_000, what: `the access line of ${uri}` });

  // HTTP: a script the pool may not run (403), and one that is not there (404).
  for (const [uri, status] of [['/notes.txt.php.bak', 403], ['/nothere.php', 404]] as const) {
    const r = await httpRequest(`http://127.0.0.1:${http}${uri}`);
    assert.equal(r.status, status, r.text);
    const line = await access(uri);
    assert.equal(line.status, status);
    assert.ok(r.body.length > 0);
    assert.equal(line.bytes, r.body.length, `${uri}: bytes logged = the page's body`);
  }
  // FastCGI: the same pages inside STDOUT records.
  const c = await FcgiClient.connect({ port: fcgi });
  try {
    c.request(1, phpParams(PHP_FIXTURES, '/nothere.php', { REQUEST_URI: '/fcgi-nothere.php' }));
    const out = parseCgiOutput((await c.response(1)).stdout);
    assert.equal(out.status, 404);
    assert.equal((await access('/fcgi-nothere.php')).bytes, out.body.length);
  } finally {
    c.close();
  }

  // Past request_timeout (so also past slow_request): one 504 line, filed under its failure.
  const r = await httpRequest(`http://127.0.0.1:${http}/sleep.php?ms=3000`, { timeout: 10_000 });
  assert.equal(r.status, 504);
  const line = await access('/sleep.php?ms=3000');
  assert.deepEqual([line.status, line.code, line.error, line.slow], [504, 'ERR_REQUEST_TIMEOUT', 'ERR_REQUEST_TIMEOUT', true]);
  assert.equal(line.bytes, r.body.length);
});

test('a removed site: the log says its hosts now get 404, and they do', { timeout: 60_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-vhr-');
  const root = join(dir, 'www');
  mkdirSync(root);
  writeFileSync(join(root, 'index.php'), '<?php echo "here";');
  const sites = join(dir, 'sites');
  mkdirSync(sites);
  writeFileSync(join(sites, 'app.yaml'), stringifyYaml({ names: ['app.test'], document_root: root }));
  const port = await freePort();
  const d = await startDaemon(t, {
    control_socket: 'off',
    listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, vhosts: true }],
    vhosts: { dir: sites, poll_interval: '200ms', defaults: { command: ['php-cgi', ...PHP_FLAGS], max_children: 1 } },
    log: { level: 'info', access: false },
  });
  const get = () => httpRequest(`http://127.0.0.1:${port}/index.php`, { headers: { host: 'app.test' }, timeout: 20_000 });
  assert.equal((await get()).status, 200);
  const mark = d.mark();
  rmSync(join(sites, 'app.yaml'));
  const line = await d.waitForLog((l) => l.kind === 'vhosts' && l.site === 'app' && l.why === 'removed', { since: mark, timeout: 5000 });
  assert.doesNotMatch(String(line.msg), /next request starts a new one/);
  assert.match(String(line.msg), /404/);
  assert.equal((await get()).status, 404);
});
