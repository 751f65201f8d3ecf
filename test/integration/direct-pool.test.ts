/**
 * accept: direct through real nginx and real php-cgi: the workers accept on the pool's
 * socket themselves (nginx's primary upstream server), the pool's FastCGI listener is the
 * backup (the overflow). Scale from zero, the script guard inside the workers, recycling
 * after max_requests, idle stop, max_memory_hard, kill -9 under load, the overflow's 503,
 * and status.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
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

const MARKER = 'direct-php';
const MAX_CHILDREN = 2;

/** A process asleep in nanosleep (php's usleep), where a signal cuts the sleep short. */
function inSleep(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/wchan`, 'utf8').includes('nanosleep');
  } catch {
    return false;
  }
}

const pidOf = (text: string): number => Number(/^slept \d+ pid (\d+)/.exec(text)?.[1]);

describe('accept: direct pool through nginx', { timeout: 120_000, skip: process.platform !== 'linux' }, () => {
  const scope = new Cleanup();
  let ops: OpsDaemon;
  let ngx: Nginx;
  let dir: string;
  let root: string;
  const workers = (): number[] => workerPids(ops.daemon, MARKER);
  const appStatus = async (): Promise<any> => {
    const r = await ops.ctl(['status', '--json']);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout).pools.find((p: { name: string }) => p.name === 'app');
  };
  const get = (path: string): Promise<{ status: number; text: string }> => httpRequest(`${ngx.url}${path}`, { timeout: 20_000 });
  /** Pids of the workers the pool itself has sampled busy (the process list may still show one of the test before on its way out). */
  const sampledBusy = async (): Promise<number[]> =>
    (await appStatus()).workers.filter((w: { state: string }) => w.state === 'busy').map((w: { pid: number }) => w.pid);

  before(async () => {
    // The suite builds the addon at npm ci (scripts/build-native.mjs): its absence is a failure here.
    assert.equal(directSocketSupport(), undefined);
    dir = makeTempDir(scope);
    root = makeTempDir(scope, 'fpm-direct-root-');
    for (const f of ['hello.php', 'pid.php', 'sleep.php', 'alloc.php']) copyFileSync(join(PHP_FIXTURES, f), join(root, f));
    // An "image" an attacker uploaded: PHP code that must never run.
    writeFileSync(join(root, 'image.jpg'), '<?php echo "EXECUTED-IMAGE"; ?>\n');
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
          // Small, so that the overflow's queue and its 503 are reached (the default is 511).
          direct_backlog: MAX_CHILDREN,
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
    ngx = await startNginxDirect(scope, root, `${dir}/direct.sock`, port);
    // By this run's own directory: another run of this file on the machine has workers with the same marker.
    scope.after(() => {
      for (const pid of orphanPids(dir)) process.kill(pid, 'SIGKILL');
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
    // Busy for longer than a loaded machine needs to start the worker and run `status` a few
    // times (each a Node process): a busy window shorter than the wait could pass unseen.
    const slow = get('/sleep.php?ms=10000');
    const busy = await waitFor(async () => {
      const s = await appStatus();
      return s.workers.some((w: { state: string }) => w.state === 'busy') ? s : undefined;
    }, { timeout: 9000, what: 'a worker sampled busy' });
    assert.equal(busy.kind, 'direct');
    assert.equal(busy.direct.address, `unix:${dir}/direct.sock`);
    assert.equal(busy.direct.backlog, MAX_CHILDREN);
    const live = workers();
    for (const w of busy.workers) {
      assert.equal(w.sampled, true);
      assert.ok(live.includes(w.pid), `status pid ${w.pid} is one of our php-cgi ${JSON.stringify(live)}`);
    }
    const b = busy.workers.find((w: { state: string }) => w.state === 'busy');
    assert.ok(b.request !== undefined, JSON.stringify(b));
    // While the request runs (the worker is there whatever the machine's load).
    const text = await ops.ctl(['status', '--full']);
    assert.match(text.stdout, /direct socket: unix:.*direct\.sock, \d+ of 2 waiting/);
    assert.match(text.stdout, /direct requests are not in the access log/);
    assert.match(text.stdout, /≥\d+/, 'REQS of a sampled worker is a lower bound');
    assert.equal((await slow).status, 200);
    await waitFor(async () => (await appStatus()).workers.some((w: { state: string }) => w.state === 'idle'), { timeout: 5000, what: 'the worker sampled idle' });
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
    const idleStops = async (): Promise<number> => (await appStatus()).recycles.idle_timeout ?? 0;
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
    assert.match(String(line.msg), /over max_memory_hard/);
    const ok = await get('/hello.php');
    assert.equal(ok.status, 200);
  });

  it('kill -9 of a worker under load fails only its own request', async () => {
    await waitFor(async () => (await get('/hello.php')).status === 200 && workers().length >= 1, { timeout: 5000 });
    // Two running, two waiting in the backlog: within capacity, so only the victim's may fail.
    const reqs = Array.from({ length: 4 }, () => get('/sleep.php?ms=3000'));
    // One of the pool's workers (not one of the test before on its way out), asleep in a request
    // now: read from /proc at the moment of the kill, not from the pool's sampled state, which
    // lags by a sample and a status CLI run (seconds on a loaded machine).
    const victim = await waitFor(async () => {
      const pool = new Set((await appStatus()).workers.map((w: { pid: number }) => w.pid));
      return workers().find((pid) => pool.has(pid) && inSleep(pid));
    }, { timeout: 10_000, what: 'a worker asleep in a request' });
    process.kill(victim, 'SIGKILL');
    const results = await Promise.all(reqs);
    const failed = results.filter((r) => r.status !== 200);
    assert.ok(failed.length <= 1, `failed: ${JSON.stringify(failed)}`);
    for (const r of results.filter((x) => x.status === 200)) assert.match(r.text, /^slept 3000 pid \d+/);
  });

  it('a rolling restart replaces the workers while requests go on', async () => {
    // Both workers held in a long sleep that only the restart's SIGTERM cuts short (php-cgi then
    // answers and exits): neither can recycle itself at max_requests before the restart
    // reaches it, so the restart has both to retire, whatever the machine's load.
    const long = Array.from({ length: MAX_CHILDREN }, () => get('/sleep.php?ms=15000'));
    const held = await waitFor(async () => {
      const pids = await sampledBusy();
      return pids.length === MAX_CHILDREN && pids.every(inSleep) ? pids : undefined;
    }, { timeout: 10_000, what: 'both workers asleep in a request' });
    // Four more wait behind them, in the direct socket's backlog (Linux lets a Unix listener
    // hold one more than its backlog) and in the overflow's queue.
    const waiting = Array.from({ length: 4 }, () => get('/sleep.php?ms=200'));
    await waitFor(async () => {
      const s = await appStatus();
      return s.direct.waiting + s.queue.length === 4;
    }, { timeout: 10_000, what: 'four requests waiting in the backlog and the overflow queue' });
    const r = await ops.ctl(['restart', '--pool', 'app', '--rolling'], 60_000);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.match(r.stdout, /restarted pool app \(2 retired/);
    for (const x of await Promise.all(long)) {
      assert.equal(x.status, 200, x.text);
      assert.ok(held.includes(pidOf(x.text)), `${x.text} from one of ${held}`);
    }
    // None of the connections waiting in the backlog or the queue is lost, and none goes to a retiring worker.
    for (const x of await Promise.all(waiting)) {
      assert.equal(x.status, 200, x.text);
      assert.ok(!held.includes(pidOf(x.text)), `${x.text}: served by a new worker, not ${held}`);
    }
    await waitFor(() => held.every((pid) => !workers().includes(pid)), { timeout: 10_000, what: 'the retired workers gone' });
  });

  it('past capacity the overflow queues, then answers 503; nothing else fails', async () => {
    // 2 workers, a backlog of 2 and a queue of 2: of 14 slow requests some must be refused.
    const mark = ops.daemon.mark();
    const results = await Promise.all(Array.from({ length: 14 }, () => get('/sleep.php?ms=800')));
    const statuses = results.map((r) => r.status);
    // A 502 means a worker died under a request: say which, and why the daemon thinks so.
    assert.ok(statuses.every((s) => s === 200 || s === 503), `${JSON.stringify(results.map((r) => `${r.status} ${r.text.trim()}`))}\n${ops.daemon.dump(mark)}`);
    assert.ok(statuses.includes(503), JSON.stringify(statuses));
    assert.ok(statuses.filter((s) => s === 200).length >= MAX_CHILDREN * 2, JSON.stringify(statuses));
    const s = await appStatus();
    assert.ok(s.rejected.queueFull >= 1, JSON.stringify(s.rejected));
    assert.ok(s.accepted >= 1, 'the overflow listener took requests');
    const logged = ops.daemon.logsSince(mark).filter((l) => l['kind'] === 'access');
    assert.ok(logged.some((l) => l['status'] === 503) && logged.some((l) => l['status'] === 200), 'the overflow logs its requests, 503s included');
  });
});
