// Health: ready_path and `fcgi-pm ready` against real daemons with real php-cgi (200
// serving, 503 for a full pool, 404 for an unknown one, 503 once stopping), and a real
// HAProxy with `option httpchk` on ready_path taking a stopping daemon out of rotation
// during its shutdown_delay, before its listeners close, with no request failing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as http from 'node:http';
import { startHaproxy } from '../apps/servers.js';
import { httpRequest } from '../helpers/http-client.js';
import { PHP_CGI, PHP_FIXTURES, PHP_FLAGS } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import type { Scope } from '../helpers/scope.js';
import { waitFor } from '../helpers/wait.js';
import { opsDaemon, type OpsDaemon } from './helpers.js';

async function daemon(scope: Scope, port: number, extra: Record<string, unknown> = {}, pool: Record<string, unknown> = {}): Promise<OpsDaemon> {
  const d = await opsDaemon(scope, {
    listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'php', document_root: PHP_FIXTURES, ready_path: '/ready', ping_path: '/ping' }],
    pools: { php: { command: [PHP_CGI, ...PHP_FLAGS], pm: 'static', max_children: 2, ...pool } },
    log: { level: 'info', access: false },
    ...extra,
  });
  await d.daemon.waitForLog((l) => l.kind === 'ready', { timeout: 20_000 });
  return d;
}

test('ready_path and fcgi-pm ready: 200 serving, 503 for a full pool, 404 for none, 503 while stopping', { timeout: 60_000 }, async (t) => {
  const port = await freePort();
  const d = await daemon(t, port, { shutdown_delay: '20s' }, { max_children: 1, queue_limit: 0 });
  const url = `http://127.0.0.1:${port}`;
  let r = await httpRequest(`${url}/ready`);
  assert.equal(r.status, 200);
  assert.equal(r.text, 'ready\n');
  assert.equal((await httpRequest(`${url}/ready?pool=php`)).status, 200);
  assert.equal((await httpRequest(`${url}/ready?pool=nope`)).status, 404);
  assert.equal((await d.ctl(['ready'])).code, 0);
  // The pool's one worker busy and no queue: that pool is not ready, the daemon is. Busy long
  // enough for a CLI run after it (seconds on a loaded machine) to find it busy still.
  const slow = httpRequest(`${url}/sleep.php?ms=8000&flush=1`, { timeout: 30_000 });
  await waitFor(async () => (await httpRequest(`${url}/ready?pool=php`)).status === 503, { timeout: 10_000, interval: 50, what: 'the full pool to be not ready' });
  r = await httpRequest(`${url}/ready?pool=php`);
  assert.match(r.text, /pool php is full \(1 running, 0 waiting, queue_limit 0\)/);
  assert.equal((await httpRequest(`${url}/ready`)).status, 200);
  const full = await d.ctl(['ready', '--pool', 'php']);
  assert.equal(full.code, 1, full.stdout + full.stderr);
  assert.match(full.stderr, /pool php is full/);
  assert.equal((await slow).status, 200);
  assert.equal((await d.ctl(['ready', '--pool', 'php'])).code, 0);
  // Stopping: during shutdown_delay it still serves, and says it is not ready.
  d.daemon.signal('SIGTERM');
  await d.daemon.waitForLog((l) => l.kind === 'shutdown' && l.delay_ms === 20_000, { timeout: 10_000 });
  r = await httpRequest(`${url}/ready`);
  assert.equal(r.status, 503);
  assert.match(r.text, /not ready: fcgi-pm is stopping/);
  assert.equal((await httpRequest(`${url}/hello.php`)).status, 200, 'still serving during shutdown_delay');
  assert.equal((await httpRequest(`${url}/ping`)).status, 200, 'alive');
  assert.equal((await d.ctl(['ready'])).code, 1);
  assert.equal((await d.ctl(['ready', '--live'])).code, 0);
  // SIGINT while stopping stops at once, the rest of the delay skipped.
  d.daemon.signal('SIGINT');
  const exit = await d.daemon.child.exited;
  assert.equal(exit.code, 0);
});

/** GETs through `url` until told to stop; every status seen, and when each answered. */
/** GETs /pid.php one at a time until `stopAt()`, each answer pushed into `seen` as it comes. */
function loadLoop(url: string, stopAt: () => boolean, seen: Array<{ status: number; pid: string; at: number }>): Promise<void> {
  const one = (): Promise<void> =>
    new Promise((resolve) => {
      const req = http.get(`${url}/pid.php`, { agent: false, timeout: 15_000 }, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (c: string) => (body += c));
        res.on('end', () => {
          seen.push({ status: res.statusCode ?? 0, pid: body.trim(), at: Date.now() });
          resolve();
        });
        res.on('error', () => {
          seen.push({ status: -1, pid: '', at: Date.now() });
          resolve();
        });
      });
      req.on('error', () => {
        seen.push({ status: -1, pid: '', at: Date.now() });
        resolve();
      });
    });
  return (async () => {
    while (!stopAt()) await one();
  })();
}

test('HAProxy with option httpchk on ready_path takes a stopping daemon out of rotation before it stops; no request fails', { timeout: 90_000 }, async (t) => {
  const [pa, pb, front] = await Promise.all([freePort(), freePort(), freePort()]);
  // 3 s of serving on: HAProxy checks every 200 ms and marks a server down after 2 failures.
  const a = await daemon(t, pa, { shutdown_delay: '3s', shutdown_timeout: '10s' });
  const b = await daemon(t, pb);
  const hap = await startHaproxy(
    t,
    [
      'global',
      '  maxconn 200',
      'defaults',
      '  mode http',
      '  timeout connect 2s',
      '  timeout client 20s',
      '  timeout server 20s',
      'frontend fe',
      `  bind 127.0.0.1:${front}`,
      '  default_backend be',
      'backend be',
      '  balance roundrobin',
      '  option httpchk GET /ready',
      '  http-check expect status 200',
      '  default-server inter 200ms fall 2 rise 2',
      `  server a 127.0.0.1:${pa} check`,
      `  server b 127.0.0.1:${pb} check`,
      '',
    ].join('\n'),
    front,
  );
  const url = `http://127.0.0.1:${front}`;
  // Both servers up (rise 2) and answering through HAProxy.
  const pids = new Set<string>();
  await waitFor(async () => {
    const r = await httpRequest(`${url}/pid.php`);
    if (r.status === 200) pids.add(r.text.trim());
    return pids.size >= 2; // a worker of each: sequential requests go to the most recently used one
  }, { timeout: 20_000, interval: 20, what: 'workers of both daemons to answer through HAProxy' });

  let done = false;
  const seen: Array<{ status: number; pid: string; at: number }> = [];
  const loops = Promise.all([0, 1, 2].map(() => loadLoop(url, () => done, seen)));
  await waitFor(() => seen.length >= 10, { timeout: 20_000, what: 'requests through HAProxy before the signal' });
  const signalled = Date.now();
  a.daemon.signal('SIGTERM');
  const aExit = await a.daemon.child.exited;
  const aGone = Date.now();
  assert.equal(aExit.code, 0);
  // A while longer on b alone.
  await waitFor(() => seen.filter((s) => s.at > aGone).length >= 10, { timeout: 20_000, what: 'requests through HAProxy after a stopped' });
  done = true;
  await loops;
  const failed = seen.filter((s) => s.status !== 200);
  assert.deepEqual(failed, [], `${failed.length} of ${seen.length} requests failed; HAProxy: ${hap.log().slice(-2000)}`);
  assert.ok(aGone - signalled >= 3000, 'a served on for its shutdown_delay');
  // HAProxy saw a's readiness fail (Layer7 wrong status), not a refused connection.
  assert.match(hap.log(), /Server be\/a is DOWN, reason: Layer7 wrong status/);
  await b.daemon.stop();
});
