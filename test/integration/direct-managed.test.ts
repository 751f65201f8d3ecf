/**
 * accept: direct managed as any pool (real nginx, real php-cgi): recycling after
 * max_requests under load counts no crash, fails nothing and never leaves the pool without
 * a worker; after a burst a trickle that php-cgi's first-in first-out accept() spreads over
 * every worker still shrinks the pool; a pool with no worker while connections wait is not
 * ready (status, `fcgi-pm ready`, fcgipm_pool_failing).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { httpRequest } from '../helpers/http-client.js';
import { startNginxDirect, type Nginx } from '../helpers/nginx.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { Cleanup } from '../helpers/scope.js';
import { orphanPids, phpCommand, workerPids } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { opsDaemon, type OpsDaemon } from '../ops/helpers.js';
import { directSocketSupport } from '../../src/worker/shared-socket.js';

const MARKER = 'direct-managed';

interface Setup {
  ops: OpsDaemon;
  ngx: Nginx;
  dir: string;
  /** The document root. */
  root: string;
  status(): Promise<any>;
  get(path: string): Promise<{ status: number; text: string }>;
  workers(): number[];
}

/** A daemon with one direct pool `app` (extra keys from `pool`) behind nginx, its overflow listener as the backup. */
async function directBehindNginx(scope: Cleanup, pool: Record<string, unknown>): Promise<Setup> {
  assert.equal(directSocketSupport(), undefined);
  const dir = makeTempDir(scope);
  const root = makeTempDir(scope, 'fpm-direct-root-');
  for (const f of ['hello.php', 'sleep.php']) copyFileSync(join(PHP_FIXTURES, f), join(root, f));
  const port = await freePort();
  const ops = await opsDaemon(scope, {
    listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'app' }],
    pools: {
      app: { command: phpCommand(dir, MARKER), accept: 'direct', direct_listen: `unix:${dir}/direct.sock`, direct_socket_mode: '0666', script_roots: [root], ...pool },
    },
    log: { level: 'info' },
  });
  scope.after(() => {
    for (const pid of orphanPids(dir)) process.kill(pid, 'SIGKILL');
  });
  const ngx = await startNginxDirect(scope, root, `${dir}/direct.sock`, port);
  return {
    ops,
    ngx,
    dir,
    root,
    status: async () => {
      const r = await ops.ctl(['status', '--json']);
      assert.equal(r.code, 0, r.stderr);
      return JSON.parse(r.stdout).pools.find((p: { name: string }) => p.name === 'app');
    },
    get: (path) => httpRequest(`${ngx.url}${path}`, { timeout: 20_000 }),
    workers: () => workerPids(ops.daemon, dir),
  };
}

/** `clients` loops, each sending `path` until `n` requests were sent in all; the statuses. */
async function load(s: Setup, path: string, n: number, clients: number): Promise<number[]> {
  const statuses: number[] = [];
  let sent = 0;
  await Promise.all(Array.from({ length: clients }, async () => {
    while (sent < n) {
      sent++;
      statuses.push((await s.get(path)).status);
    }
  }));
  return statuses;
}

describe('accept: direct, managed', { timeout: 180_000, skip: process.platform !== 'linux' }, () => {
  it('recycling after max_requests under load: no request fails, no crash counted, never 0 workers', async (t) => {
    const scope = new Cleanup();
    t.after(() => scope.run());
    const s = await directBehindNginx(scope, { pm: 'static', max_children: 2, max_requests: 20, max_requests_jitter: 0, direct_backlog: 64, queue_limit: 100 });
    await waitFor(() => s.workers().length === 2, { timeout: 10_000, what: 'two workers' });
    const mark = s.ops.daemon.mark();
    // While the load runs, status is asked again and again: it never shows the pool without a worker or failing.
    let running = true;
    const seen: Array<{ workers: number; state: string }> = [];
    const watcher = (async () => {
      while (running) {
        const p = await s.status();
        seen.push({ workers: p.workers.length, state: p.state });
      }
    })();
    const statuses = await load(s, '/hello.php', 600, 6);
    running = false;
    await watcher;
    assert.deepEqual(statuses.filter((x) => x !== 200), [], 'every request answered 200');
    const crashLines = s.ops.daemon.logsSince(mark).filter((l) => l['code'] === 'ERR_WORKER_CRASHED' || l['code'] === 'ERR_POOL_FAILING');
    assert.deepEqual(crashLines, []);
    const p = await s.status();
    assert.ok((p.recycles.max_requests ?? 0) >= 10, `recycles: ${JSON.stringify(p.recycles)}`);
    assert.equal(p.crashes ?? 0, 0, 'no crash counted');
    assert.ok(seen.length > 0);
    assert.deepEqual(seen.filter((x) => x.workers === 0 || x.state !== 'running'), [], 'the pool never showed 0 workers or failing');
    const ready = await s.ops.ctl(['ready', '--pool', 'app']);
    assert.equal(ready.code, 0, ready.stdout + ready.stderr);
  });

  it('after a burst, a trickle that every worker serves in turn shrinks the pool within 2 × idle_timeout', async (t) => {
    const scope = new Cleanup();
    t.after(() => scope.run());
    const idleMs = 3000;
    const s = await directBehindNginx(scope, { pm: 'ondemand', max_children: 4, idle_timeout: `${idleMs}ms`, direct_backlog: 64, queue_limit: 100 });
    // A burst: eight requests of 600 ms at once start all four workers.
    const burst = await Promise.all(Array.from({ length: 8 }, () => s.get('/sleep.php?ms=600')));
    assert.deepEqual(burst.map((r) => r.status), Array(8).fill(200));
    assert.equal(s.workers().length, 4);
    // Then a trickle of about five requests a second. php-cgi blocked in accept() is woken
    // first-in first-out, so each worker gets one in turn and none is idle for idle_timeout.
    const start = Date.now();
    const counts: number[] = [];
    let failed = 0;
    while (Date.now() - start < 2 * idleMs + 1000) {
      const r = await s.get('/hello.php');
      if (r.status !== 200) failed++;
      counts.push(s.workers().length);
      await new Promise((res) => setTimeout(res, 200));
    }
    assert.equal(failed, 0);
    const left = s.workers().length;
    assert.ok(left <= 2, `workers after 2 × idle_timeout of trickle: ${left} (seen ${counts.join(',')})`);
    const p = await s.status();
    assert.ok((p.recycles.scale_down ?? 0) + (p.recycles.idle_timeout ?? 0) >= 2, JSON.stringify(p.recycles));
  });

  it('slow_request: a request on the direct path running longer is logged with the PHP call stack read from the worker', async (t) => {
    const scope = new Cleanup();
    t.after(() => scope.run());
    const s = await directBehindNginx(scope, { pm: 'static', max_children: 1, slow_request: '300ms' });
    await waitFor(() => s.workers().length === 1, { timeout: 10_000, what: 'the worker' });
    const mark = s.ops.daemon.mark();
    const slow = s.get('/sleep.php?ms=1500');
    const line = await s.ops.daemon.waitForLog((l) => l['code'] === 'ERR_SLOW_REQUEST', { since: mark, timeout: 10_000, what: 'the slow request line' });
    assert.equal((await slow).status, 200);
    const script = join(s.root, 'sleep.php');
    assert.equal(line['wpid'], s.workers()[0]);
    assert.equal(line['script'], script, JSON.stringify(line));
    assert.deepEqual(line['backtrace'], [`usleep() ${script}:11`], JSON.stringify(line));
    const p = await s.status();
    assert.equal(p.slowRequests, 1, 'counted once for the one request');
  });

  it('a pool with no worker while connections wait is not ready, and says so', async (t) => {
    const scope = new Cleanup();
    t.after(() => scope.run());
    const dir = makeTempDir(scope);
    // A worker that exits at once, again and again: the crash back-off leaves the pool without one.
    const ops = await opsDaemon(scope, {
      listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${await freePort()}`, pool: 'app' }],
      pools: {
        app: { command: ['/bin/sh', '-c', 'sleep 0.05; exit 3', MARKER], accept: 'direct', direct_listen: `unix:${dir}/direct.sock`, direct_socket_mode: '0666', pm: 'static', max_children: 1, limit_extensions: [], crash_limit: 3 },
      },
      log: { level: 'info' },
    });
    // Connections waiting in the accept queue that no worker takes.
    const conns = Array.from({ length: 2 }, () => net.connect(join(dir, 'direct.sock')));
    scope.after(() => conns.forEach((c) => c.destroy()));
    await Promise.all(conns.map((c) => new Promise((res) => c.once('connect', res))));
    // A worker lives 50 ms at a time: from its first crash on, status says so whether one is alive or not.
    const notReady = await waitFor(async () => {
      const r = await ops.ctl(['ready', '--pool', 'app']);
      return r.code !== 0 ? r : undefined;
    }, { timeout: 15_000, what: 'fcgi-pm ready --pool app says not ready' });
    assert.ok(JSON.parse((await ops.ctl(['status', '--json'])).stdout).pools[0].crashes >= 1);
    assert.match(notReady.stdout + notReady.stderr, /not ready: pool app is failing/);
    const st = JSON.parse((await ops.ctl(['status', '--json'])).stdout).pools.find((p: { name: string }) => p.name === 'app');
    assert.equal(st.state, 'failing');
    const metrics = await ops.ctl(['status', '--prometheus']);
    assert.match(metrics.stdout, /fcgipm_pool_failing\{pool="app"\} 1/);
  });
});
