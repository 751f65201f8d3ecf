// Every answer counted: a real daemon with real php-cgi, refusals of each kind (unknown
// vhost, script guard 403 and 404, queue full, authorizer failure, max_conns overflow)
// in the status snapshot per listener and per pool or site, in Prometheus (checked by
// promtool), histograms that move with the requests served, broken sites named, and a
// site's pool shown with its own limits.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import * as net from 'node:net';
import { join } from 'node:path';
import { stringify as stringifyYaml } from 'yaml';
import type { StatusSnapshot } from '../../src/control/types.js';
import { statusOf } from '../helpers/control-status.js';
import { FcgiClient, parseCgiOutput, phpParams } from '../helpers/fcgi-client.js';
import { httpRequest } from '../helpers/http-client.js';
import { PHP_FIXTURES, PHP_FLAGS, PHP_CGI } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { opsDaemon } from './helpers.js';
import { checkExposition, promtool, sampleValue } from './prom-check.js';

const skip = process.geteuid?.() !== 0 && 'runs as root (a site runs as nobody)';

async function fcgiGet(port: number, script: string, docRoot = PHP_FIXTURES): Promise<number> {
  const c = await FcgiClient.connect({ port });
  try {
    c.request(1, phpParams(docRoot, script), undefined, { keepConn: false });
    return parseCgiOutput((await c.response(1)).stdout).status;
  } finally {
    c.socket.destroy();
  }
}

test('refusals of every kind are counted per listener and per pool, in status and Prometheus', { skip, timeout: 90_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-count-');
  chmodSync(dir, 0o755);
  const root = join(dir, 'alpha');
  mkdirSync(root, { mode: 0o755 });
  writeFileSync(join(root, 'index.php'), '<?php echo "alpha";', { mode: 0o644 });
  const sites = join(dir, 'sites');
  mkdirSync(sites);
  writeFileSync(join(sites, 'alpha.yaml'), stringifyYaml({ names: ['alpha.test'], document_root: root, pool: { user: 'nobody', max_children: 3, queue_limit: 7 } }));
  writeFileSync(join(sites, 'broken.yaml'), stringifyYaml({ names: ['broken.test'], document_root: root, pool: { user: 'nobody', max_children: -1 } }));
  const [http, fcgi, guarded, small, dead] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
  const d = await opsDaemon(t, {
    listen: [
      { protocol: 'http', address: `127.0.0.1:${http}`, vhosts: true },
      { protocol: 'fastcgi', address: `127.0.0.1:${fcgi}`, pool: 'php' },
      { protocol: 'fastcgi', address: `127.0.0.1:${guarded}`, pool: 'guarded' },
      { protocol: 'fastcgi', address: `127.0.0.1:${small}`, pool: 'php', max_conns: 1 },
    ],
    pools: {
      // One worker and no queue: a second request at once is refused.
      php: { command: [PHP_CGI, ...PHP_FLAGS], pm: 'static', max_children: 1, queue_limit: 0 },
      guarded: { backends: [`127.0.0.1:${dead}`], authorizer: 'auth' },
      auth: { backends: [`127.0.0.1:${dead}`] },
    },
    vhosts: { dir: sites, defaults: { command: [PHP_CGI, ...PHP_FLAGS] } },
    log: { level: 'info', access: false },
  }, { dir });
  await d.daemon.waitForLog((l) => l.kind === 'ready', { timeout: 20_000 });

  // Served: 5 through the FastCGI listener, 1 for the site.
  for (let i = 0; i < 5; i++) assert.equal(await fcgiGet(fcgi, '/hello.php'), 200);
  assert.equal((await httpRequest(`http://127.0.0.1:${http}/index.php`, { headers: { host: 'alpha.test' } })).status, 200);
  // Before any pool: no site has the name.
  assert.equal((await httpRequest(`http://127.0.0.1:${http}/index.php`, { headers: { host: 'nowhere.test' } })).status, 404);
  // The script guard: not a .php, and a .php that is not there (pool php; site alpha).
  assert.equal(await fcgiGet(fcgi, '/passwd', '/etc'), 403);
  assert.equal(await fcgiGet(fcgi, '/no-such.php'), 404);
  assert.equal((await httpRequest(`http://127.0.0.1:${http}/gone.php`, { headers: { host: 'alpha.test' } })).status, 404);
  // Queue full: the one worker is busy.
  const slow = fcgiGet(fcgi, '/sleep.php?ms=3000');
  await waitUntil(d.control, (s) => s.pools.find((p) => p.name === 'php')?.active === 1, 'the php worker busy');
  assert.equal(await fcgiGet(fcgi, '/hello.php'), 503);
  assert.equal(await slow, 200);
  // The authorizer pool cannot be reached: 503.
  assert.equal(await fcgiGet(guarded, '/hello.php'), 503);
  // Over max_conns: one connection held, the next answered "overloaded" at accept.
  const held = net.connect(small, '127.0.0.1');
  await new Promise((r) => held.once('connect', r));
  await waitUntil(d.control, (s) => s.listeners.find((l) => l.address === `127.0.0.1:${small}`)?.connections === 1, 'the held connection counted');
  assert.equal(await fcgiGet(small, '/hello.php'), 503);
  held.destroy();

  const s = JSON.parse((await d.ctl(['status', '--json'])).stdout) as StatusSnapshot;
  const listener = (port: number) => s.listeners.find((l) => l.address === `127.0.0.1:${port}`)!;
  const pool = (name: string) => s.pools.find((p) => p.name === name)!;
  assert.deepEqual(listener(http).outcomes?.refusals, { ERR_VHOST_UNKNOWN: 1, ERR_SCRIPT_NOT_FOUND: 1 });
  assert.equal(listener(http).outcomes?.status['2xx'], 1);
  assert.deepEqual(listener(fcgi).outcomes?.refusals, { ERR_SCRIPT_FORBIDDEN: 1, ERR_SCRIPT_NOT_FOUND: 1, ERR_QUEUE_FULL: 1 });
  assert.equal(listener(fcgi).outcomes?.status['2xx'], 6);
  assert.deepEqual(listener(guarded).outcomes?.refusals, { ERR_AUTHORIZER_FAILED: 1 });
  assert.equal(listener(small).overflowed, 1);
  assert.deepEqual(pool('php').outcomes?.refusals, { ERR_SCRIPT_FORBIDDEN: 1, ERR_SCRIPT_NOT_FOUND: 1, ERR_QUEUE_FULL: 1 });
  assert.deepEqual(pool('php').outcomes?.status, { '1xx': 0, '2xx': 6, '3xx': 0, '4xx': 2, '5xx': 1 });
  assert.deepEqual(pool('alpha').outcomes?.refusals, { ERR_SCRIPT_NOT_FOUND: 1 });
  assert.deepEqual(pool('guarded').outcomes?.refusals, { ERR_AUTHORIZER_FAILED: 1 });
  // The site's pool with its own limits, not the config file's (it has no entry there).
  assert.equal(pool('alpha').maxChildren, 3);
  assert.equal(pool('alpha').queue.limit, 7);
  assert.equal(pool('alpha').capacity, 3);
  // The broken site is named, with what is wrong.
  assert.equal(s.sites?.broken, 1);
  assert.equal(s.sites?.brokenSites[0]?.id, 'broken');
  assert.match(s.sites?.brokenSites[0]?.error ?? '', /broken\.yaml:\d+: pool\.max_children/);
  const text = (await d.ctl(['status', '--pool', 'php'])).stdout;
  assert.match(text, /^ {2}broken broken: .*broken\.yaml:\d+: pool\.max_children/m);

  // Prometheus: the same counts, histograms whose counts are the requests that finished.
  const prom = (await d.ctl(['status', '--prometheus'])).stdout;
  assert.equal(promtool(prom), '', 'promtool check metrics');
  const c = checkExposition(prom);
  assert.deepEqual(c.problems, []);
  assert.equal(sampleValue(c, 'fcgipm_refusals_total', { pool: 'php', code: 'ERR_SCRIPT_FORBIDDEN' }), 1);
  assert.equal(sampleValue(c, 'fcgipm_refusals_total', { pool: 'alpha', code: 'ERR_SCRIPT_NOT_FOUND' }), 1);
  assert.equal(sampleValue(c, 'fcgipm_refusals_total', { pool: 'guarded', code: 'ERR_AUTHORIZER_FAILED' }), 1);
  assert.equal(sampleValue(c, 'fcgipm_listener_refusals_total', { listener: `127.0.0.1:${http}`, code: 'ERR_VHOST_UNKNOWN' }), 1);
  assert.equal(sampleValue(c, 'fcgipm_listener_refusals_total', { listener: `127.0.0.1:${small}`, code: 'ERR_TOO_MANY_CONNECTIONS' }), 1);
  assert.equal(sampleValue(c, 'fcgipm_responses_total', { pool: 'php', class: '4xx' }), 2);
  assert.equal(sampleValue(c, 'fcgipm_request_duration_seconds_count', { pool: 'php' }), 9);
  assert.equal(sampleValue(c, 'fcgipm_queue_wait_seconds_count', { pool: 'php' }), 6, 'queue waits of the requests a worker took');
  // Cumulative buckets; the 3 s request is above the 2 s one whatever the machine's speed.
  assert.ok(sampleValue(c, 'fcgipm_request_duration_seconds_bucket', { pool: 'php', le: '2' })! <= 8);
  assert.equal(sampleValue(c, 'fcgipm_request_duration_seconds_bucket', { pool: 'php', le: '+Inf' }), 9);

  // Under more load the histogram moves by as many requests.
  await Promise.all(Array.from({ length: 4 }, async () => {
    for (let i = 0; i < 5; i++) await fcgiGet(fcgi, '/hello.php').catch(() => 0);
  }));
  const after = checkExposition((await d.ctl(['status', '--prometheus'])).stdout);
  const served = sampleValue(after, 'fcgipm_responses_total', { pool: 'php', class: '2xx' })! - 6;
  const refused = sampleValue(after, 'fcgipm_refusals_total', { pool: 'php', code: 'ERR_QUEUE_FULL' })! - 1;
  assert.equal(served + refused, 20, 'each of the 20 requests either served or refused as queue full');
  assert.equal(sampleValue(after, 'fcgipm_request_duration_seconds_count', { pool: 'php' }), 9 + 20);
  assert.equal(sampleValue(after, 'fcgipm_queue_wait_seconds_count', { pool: 'php' }), 6 + served);
});

/** Polls the daemon's snapshot through its control socket, in-process (a CLI per poll is slow on a loaded machine). */
async function waitUntil(control: string, ok: (s: StatusSnapshot) => boolean, what: string): Promise<void> {
  await waitFor(async () => ok(await statusOf(control)), { timeout: 30_000, interval: 20, what });
}
