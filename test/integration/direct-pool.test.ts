/**
 * accept: direct through real nginx and real php-cgi: the workers accept on the pool's
 * socket themselves (nginx's primary upstream server), the pool's FastCGI listener is the
 * backup (the overflow). Scale from zero, the script guard inside the workers, recycling
 * after max_requests, idle stop, max_memory_hard, kill -9 under load, the overflow's 503,
 * and status.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { httpRequest } from '../helpers/http-client.js';
import { fastcgiParams, startNginx, type Nginx } from '../helpers/nginx.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { Cleanup } from '../helpers/scope.js';
import { orphanPids, phpCommand, workerPids } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { opsDaemon, type OpsDaemon } from '../ops/helpers.js';
import { directSocketSupport } from '../../src/worker/shared-socket.js';

const MARKER = 'direct-pool-worker';
const MAX_CHILDREN = 2;

describe('accept: direct pool through nginx', { timeout: 120_000, skip: process.platform !== 'linux' }, () => {
  const scope = new Cleanup();
  let ops: OpsDaemon;
  let ngx: Nginx;
  let dir: string;
  let root: string;
  const workers = (): number[] => workerPids(ops.daemon, MARKER);
  const get = (path: string): Promise<{ status: number; text: string }> => httpRequest(`${ngx.url}${path}`, { timeout: 20_000 });
  let gates = 0;
  /** A URL whose requests hold their worker busy until open() (however slow the status reads that look for it). */
  const gate = (): { url: string; open: () => void } => {
    const file = join(root, `gate-${++gates}`);
    writeFileSync(file, '');
    return { url: `/gate.php?f=${encodeURIComponent(file)}`, open: () => rmSync(file, { force: true }) };
  };
  /** The workers the pool itself has sampled busy (the process list may still show one of the test before on its way out). */
  const busyWorkers = (): Promise<number[]> =>
    waitFor(async () => {
      const r = await ops.ctl(['status', '--json']);
      const pool = JSON.parse(r.stdout).pools.find((p: { name: string }) => p.name === 'app');
      const pids = pool.workers.filter((w: { state: string }) => w.state === 'busy').map((w: { pid: number }) => w.pid);
      return pids.length > 0 ? (pids as number[]) : undefined;
    }, { timeout: 10_000, what: 'a worker sampled busy' });

  before(async () => {
    // The suite builds the addon at npm ci (scripts/build-native.mjs): its absence is a failure here.
    assert.equal(directSocketSupport(), undefined);
    dir = makeTempDir(scope);
    root = makeTempDir(scope, 'fpm-direct-root-');
    for (const f of ['hello.php', 'pid.php', 'sleep.php', 'alloc.php']) copyFileSync(join(PHP_FIXTURES, f), join(root, f));
    // An "image" an attacker uploaded: PHP code that must never run.
    writeFileSync(join(root, 'image.jpg'), '<?php echo "EXECUTED-IMAGE"; ?>\n');
    // Answers once the file ?f= is gone (20 s at most): a request that holds its worker busy until the test lets it go.
    writeFileSync(join(root, 'gate.php'), '<?php $end = microtime(true) + 20; while (file_exists($_GET["f"]) && microtime(true) < $end) usleep(20000); echo "released pid ", getmypid(), "\\n";\n');
    // Holds ?mb= MiB for ?ms= ms however often a signal cuts its sleep short (an idle stop's SIGTERM may reach a worker that just took it).
    writeFileSync(join(root, 'hold.php'), '<?php $s = str_repeat("x", (int)$_GET["mb"] * 1048576); $end = microtime(true) + (int)$_GET["ms"] / 1000; while (microtime(true) < $end) usleep(20000); echo strlen($s);\n');
    const port = await freePort();
    ops = await opsDaemon(scope, {
      listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'app' }],
      pools: {
        app: {
          command: phpCommand(dir, MARKER),
          accept: 'direct',
          direct_listen: `unix:${dir}/direct.sock`,
          direct_socket_mode: '0666',
          pm: 'ondemand',
          max_children: MAX_CHILDREN,
          idle_timeout: '4s',
          max_requests: 5,
          max_memory_hard: '48MiB',
          memory_sample_interval: '100ms',
          kill_timeout: '1s',
          queue_limit: 2,
          queue_timeout: '20s',
          script_roots: [root],
        },
      },
      log: { level: 'info', access: true },
    });
    // Everything goes to PHP, as a careless config would: the guard in the worker decides.
    ngx = await startNginx(
      scope,
      `root ${root};
      location / {
        fastcgi_pass direct;
        fastcgi_read_timeout 30s;
        ${fastcgiParams()}
      }`,
      { httpExtra: `upstream direct { server unix:${dir}/direct.sock max_fails=0; server 127.0.0.1:${port} backup; }` },
    );
    scope.after(() => {
      for (const pid of orphanPids(MARKER)) process.kill(pid, 'SIGKILL');
    });
  });
  after(() => scope.run());

  it('starts with no worker and the first request spawns one', async () => {
    assert.deepEqual(workers(), []);
    const r = await get('/hello.php');
    assert.equal(r.status, 200);
    assert.equal(r.text, 'Hello from PHP\n');
    assert.equal(workers().length, 1);
    // The request went straight to the worker: the daemon's listener saw nothing.
    assert.equal(ops.daemon.logsSince().filter((l) => l['kind'] === 'access').length, 0);
  });

  it('status shows the direct pool and its sampled workers, busy and idle', async () => {
    const appOf = async (): Promise<any> => {
      const r = await ops.ctl(['status', '--json']);
      assert.equal(r.code, 0, r.stderr);
      return JSON.parse(r.stdout).pools.find((p: { name: string }) => p.name === 'app');
    };
    const g = gate();
    const slow = get(g.url);
    let busy;
    let text;
    try {
      busy = await waitFor(async () => {
        const s = await appOf();
        return s.workers.some((w: { state: string }) => w.state === 'busy') ? s : undefined;
      }, { timeout: 10_000, what: 'a worker sampled busy' });
      // Read while the worker is held: once idle, its idle_timeout may stop it before a slow read.
      text = await ops.ctl(['status', '--full']);
    } finally {
      g.open();
    }
    assert.equal(busy.kind, 'direct');
    assert.equal(busy.direct.address, `unix:${dir}/direct.sock`);
    assert.equal(busy.direct.backlog, MAX_CHILDREN);
    const live = workers();
    for (const w of busy.workers) {
      assert.equal(w.sampled, true);
      assert.ok(live.includes(w.pid), `status pid ${w.pid} is one of our php-cgi ${JSON.stringify(live)}`);
    }
    const b = busy.workers.find((w: { state: string }) => w.state === 'busy');
    assert.ok(b.request !== undefined && b.request.durationMs >= 0, JSON.stringify(b));
    assert.equal((await slow).status, 200);
    await waitFor(async () => (await appOf()).workers.some((w: { state: string }) => w.state === 'idle'), { timeout: 5000, what: 'the worker sampled idle' });
    assert.match(text.stdout, /direct socket: unix:.*direct\.sock, \d+ of 2 waiting/);
    assert.match(text.stdout, /direct requests are not in the access log/);
    assert.match(text.stdout, /≥\d+/, 'REQS of a sampled worker is a lower bound');
  });

  it('never runs PHP hidden in an image (.jpg, /image.jpg/x.php)', async () => {
    for (const path of ['/image.jpg', '/image.jpg/x.php']) {
      const r = await get(path);
      assert.doesNotMatch(r.text, /EXECUTED-IMAGE/, path);
      assert.ok(r.status === 403 || r.status === 404, `${path}: ${r.status} ${r.text}`);
    }
    const ok = await get('/hello.php');
    assert.equal(ok.status, 200);
  });

  it('recycles after max_requests (PHP_FCGI_MAX_REQUESTS)', async () => {
    const seen = new Map<string, number>();
    for (let i = 0; i < 12; i++) {
      const r = await get('/pid.php');
      assert.equal(r.status, 200);
      seen.set(r.text, (seen.get(r.text) ?? 0) + 1);
    }
    assert.ok(seen.size >= 2, `pids: ${JSON.stringify([...seen])}`);
    for (const [pid, n] of seen) assert.ok(n <= 5, `pid ${pid} served ${n}`);
  });

  it('stops idle workers after idle_timeout', async () => {
    const idleStops = async (): Promise<number> => {
      const r = await ops.ctl(['status', '--json']);
      return JSON.parse(r.stdout).pools.find((p: { name: string }) => p.name === 'app').recycles.idle_timeout ?? 0;
    };
    // The test before may leave its last worker at max_requests (it then exits by itself):
    // one fresh worker, one request served, then nothing but its idle_timeout stops it.
    await waitFor(() => workers().length === 0, { timeout: 15_000, what: 'the workers of the test before gone' });
    const before = await idleStops();
    assert.equal((await get('/pid.php')).status, 200);
    await waitFor(() => workers().length === 0, { timeout: 15_000, what: 'no workers after idle_timeout' });
    assert.equal(await idleStops(), before + 1);
  });

  it('kills a worker over max_memory_hard', async () => {
    const mark = ops.daemon.mark();
    const r = await get('/hold.php?mb=96&ms=4000');
    assert.notEqual(r.status, 200);
    const line = await ops.daemon.waitForLog((l) => l['code'] === 'ERR_MEMORY_HARD_LIMIT', { since: mark, timeout: 5000 });
    assert.match(String(line.msg), /max_memory_hard: killed/);
    const ok = await get('/hello.php');
    assert.equal(ok.status, 200);
  });

  it('kill -9 of a worker under load fails only its own request', async () => {
    await waitFor(async () => (await get('/hello.php')).status === 200 && workers().length >= 1, { timeout: 5000 });
    // Two running, two waiting in the backlog: within capacity, so only the victim's may fail.
    // They hold until the gate opens: requests of a fixed length could all be over before a
    // status read on a loaded machine samples a worker busy.
    const g = gate();
    const reqs = Array.from({ length: 4 }, () => get(g.url));
    try {
      const victim = (await busyWorkers())[0]!;
      process.kill(victim, 'SIGKILL');
    } finally {
      g.open();
    }
    const results = await Promise.all(reqs);
    const failed = results.filter((r) => r.status !== 200);
    assert.ok(failed.length <= 1, `failed: ${JSON.stringify(failed)}`);
    for (const r of results.filter((x) => x.status === 200)) assert.match(r.text, /^released pid \d+/);
  });

  it('a rolling restart replaces the workers while requests go on', async () => {
    // Held until the restart has retired one of the busy workers (which then finishes its request).
    const g = gate();
    const load = Array.from({ length: 6 }, () => get(g.url));
    let busy: number[] = [];
    let restart: ReturnType<typeof ops.ctl> | undefined;
    try {
      busy = await busyWorkers();
      restart = ops.ctl(['restart', '--pool', 'app', '--rolling'], 60_000);
      await waitFor(async () => {
        const r = await ops.ctl(['status', '--json']);
        const pool = JSON.parse(r.stdout).pools.find((p: { name: string }) => p.name === 'app');
        return pool.workers.some((w: { pid: number; state: string }) => busy.includes(w.pid) && w.state === 'stopping');
      }, { timeout: 10_000, what: 'a busy worker retired' });
    } finally {
      g.open();
    }
    const r = await restart!;
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.match(r.stdout, /restarted pool app \([1-9]\d* retired/);
    await waitFor(() => busy.every((pid) => !workers().includes(pid)), { timeout: 10_000, what: 'the busy workers replaced' });
    const results = await Promise.all(load);
    assert.deepEqual(results.map((x) => x.status), results.map(() => 200), 'no request failed');
    const after = await get('/pid.php');
    assert.equal(after.status, 200);
    assert.ok(!busy.includes(Number(after.text)), `served by a new worker, not ${busy}`);
  });

  it('past capacity the overflow queues, then answers 503; nothing else fails', async () => {
    // 2 workers, a backlog of 2 and a queue of 2: of 14 slow requests some must be refused.
    const mark = ops.daemon.mark();
    const results = await Promise.all(Array.from({ length: 14 }, () => get('/sleep.php?ms=800')));
    const statuses = results.map((r) => r.status);
    assert.ok(statuses.every((s) => s === 200 || s === 503), JSON.stringify(statuses));
    assert.ok(statuses.includes(503), JSON.stringify(statuses));
    assert.ok(statuses.filter((s) => s === 200).length >= MAX_CHILDREN * 2, JSON.stringify(statuses));
    const s = JSON.parse((await ops.ctl(['status', '--json'])).stdout).pools.find((p: { name: string }) => p.name === 'app');
    assert.ok(s.rejected.queueFull >= 1, JSON.stringify(s.rejected));
    assert.ok(s.accepted >= 1, 'the overflow listener took requests');
    const logged = ops.daemon.logsSince(mark).filter((l) => l['kind'] === 'access');
    assert.ok(logged.some((l) => l['status'] === 503) && logged.some((l) => l['status'] === 200), 'the overflow logs its requests, 503s included');
  });
});
