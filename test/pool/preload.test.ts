/**
 * preload pools with the real adapter (bin/fcgi-pm-wsgi --preload) and a small WSGI
 * app: workers are forks of one parent, counted, capped and stopped one by one; the
 * parent's crash is the pool's spawner's crash; it stops when idle. Parents and children
 * come from /proc.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { lookupUser } from '../../src/config/system-users.js';
import { ErrorCodes } from '../../src/errors.js';
import type { PoolConfig } from '../../src/config/types.js';
import { createPool, type Pool } from '../../src/pool/index.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { isAlive, listProcesses } from '../helpers/proc.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor, withTimeout } from '../helpers/wait.js';
import { worldReadableAdapter } from '../helpers/world-readable.js';
import { makeRequest, poolConfig, recordingLogger, type LogLine, type TestRequest } from './helpers.js';

const T = { timeout: 60_000 };

const APP = `
import os, time
if os.path.exists(os.path.join(os.path.dirname(__file__), 'broken')):
    raise RuntimeError('broken on purpose')
def application(env, start):
    q = env.get('QUERY_STRING', '')
    here = os.path.dirname(__file__)
    if q.startswith('ms='):
        open(os.path.join(here, 'running'), 'w').close()
        time.sleep(int(q[3:]) / 1000)
    elif q == 'hold':
        # Answers once the test writes 'release' (at most 30 s): requests held together run at once.
        open(os.path.join(here, f'held-{os.getpid()}'), 'w').close()
        for _ in range(3000):
            if os.path.exists(os.path.join(here, 'release')):
                break
            time.sleep(0.01)
    start('200 OK', [('Content-Type', 'text/plain')])
    return [f"{os.getpid()} {os.getppid()}".encode()]
`;

interface Preload {
  pool: Pool;
  dir: string;
  lines: LogLine[];
  get(query?: string): Promise<TestRequest>;
  request(query?: string): TestRequest;
  /** pid → ppid of the adapter processes this test started. */
  procs(): Map<number, number>;
}

function preloadPool(t: TestContext, over: Partial<PoolConfig> = {}): Preload {
  const dir = makeTempDir(t, 'fpm-pre-');
  const runtimeDir = join(dir, 'run');
  mkdirSync(runtimeDir, { mode: 0o700 });
  writeFileSync(join(dir, 'app.py'), APP);
  const { logger, lines } = recordingLogger();
  const cfg = poolConfig({
    name: 'py',
    command: ['/usr/bin/python3', join(REPO_ROOT, 'bin', 'fcgi-pm-wsgi'), '--preload', '--fastcgi', 'app:application'],
    cwd: dir,
    env: { PATH: '/usr/bin:/bin', PYTHONDONTWRITEBYTECODE: '1' },
    preload: true,
    preloadIdleTimeout: 0,
    pm: 'ondemand',
    maxChildren: 4,
    killTimeout: 1000,
    ...over,
  });
  const pool = createPool(cfg, { logger, runtimeDir });
  const procs = (): Map<number, number> => {
    const all = listProcesses().filter((p) => p.state !== 'Z' && p.cmdline.includes('fcgi-pm-wsgi') && p.cmdline.includes('app:application'));
    const mine = all.filter((p) => p.ppid === process.pid || all.some((q) => q.pid === p.ppid && q.ppid === process.pid));
    return new Map(mine.map((p) => [p.pid, p.ppid]));
  };
  const keepAlive = setInterval(() => {}, 1 << 30);
  t.after(async () => {
    clearInterval(keepAlive);
    await pool.stop(0);
    for (const pid of procs().keys()) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  });
  const request = (query = ''): TestRequest => {
    const r = makeRequest({ SCRIPT_NAME: '', PATH_INFO: '/', REQUEST_URI: `/?${query}`, QUERY_STRING: query, REQUEST_METHOD: 'GET', SERVER_PROTOCOL: 'HTTP/1.1', SERVER_NAME: 'localhost', SERVER_PORT: '80' });
    pool.dispatch(r.ex);
    return r;
  };
  const get = async (query = ''): Promise<TestRequest> => {
    const r = request(query);
    await withTimeout(r.sink.answered, 30_000, `request ?${query}`);
    return r;
  };
  return { pool, dir, lines, get, request, procs };
}

const pidsOf = (r: TestRequest): [number, number] => r.sink.text().split(' ').map(Number) as [number, number];

test('workers are forks of one parent (PPid in /proc), each a worker of its own in status; the parent is a child of the daemon', T, async (t) => {
  const p = preloadPool(t);
  await p.pool.start();
  // Held until all three run: one worker cannot serve two of them in turn, however slowly forks start on a busy machine.
  const held = [p.request('hold'), p.request('hold'), p.request('hold')];
  await waitFor(() => readdirSync(p.dir).filter((n) => n.startsWith('held-')).length === 3, { timeout: 30_000, what: 'three requests running at once' });
  writeFileSync(join(p.dir, 'release'), '');
  const rs = await Promise.all(held.map(async (r) => (await withTimeout(r.sink.answered, 30_000, 'a held request'), r)));
  for (const r of rs) assert.equal(r.sink.status, 200, r.sink.error?.message);
  const pairs = rs.map(pidsOf);
  const parents = new Set(pairs.map(([, pp]) => pp));
  assert.equal(new Set(pairs.map(([pid]) => pid)).size, 3, 'three workers');
  assert.equal(parents.size, 1, 'one parent');
  const parent = [...parents][0]!;
  assert.equal(p.procs().get(parent), process.pid, 'the parent is our child');
  const workers = p.pool.snapshot().workers.map((w) => w.pid).sort();
  assert.deepEqual(workers, pairs.map(([pid]) => pid).sort());
});

test('max_requests: the daemon retires a fork; the parent reaps it and reports the exit (no crash), the next is a new fork', T, async (t) => {
  const p = preloadPool(t, { maxRequests: 1 });
  await p.pool.start();
  const [a, pa] = pidsOf(await p.get());
  await waitFor(() => !isAlive(a), { timeout: 10_000, what: 'the retired fork to exit' });
  await waitFor(() => p.pool.snapshot().workers.length === 0, { timeout: 10_000, what: 'its exit to be reported' });
  const [b, pb] = pidsOf(await p.get());
  assert.notEqual(a, b);
  assert.equal(pa, pb, 'same parent');
  const s = p.pool.snapshot();
  assert.equal(s.crashes, 0);
  assert.ok((s.recycles['max_requests'] ?? 0) >= 1);
});

test('request_timeout: 504, that fork is stopped by the daemon, the parent lives on', T, async (t) => {
  const p = preloadPool(t, { requestTimeout: 300 });
  await p.pool.start();
  const [, parent] = pidsOf(await p.get());
  const slow = await p.get('ms=5000');
  assert.equal(slow.sink.status, 504);
  assert.equal(slow.sink.error?.code, ErrorCodes.REQUEST_TIMEOUT);
  await waitFor(() => p.pool.snapshot().workers.length === 0, { timeout: 10_000, what: 'the stopped fork to be reported gone' });
  assert.ok(isAlive(parent));
  const [, again] = pidsOf(await p.get());
  assert.equal(again, parent);
});

test('the parent killed: ERR_PRELOAD_PARENT_EXITED, its running fork still answers, the next request starts a new parent', T, async (t) => {
  const p = preloadPool(t);
  await p.pool.start();
  const [w, parent] = pidsOf(await p.get());
  const running = p.request('ms=500');
  await waitFor(() => existsSync(join(p.dir, 'running')), { timeout: 5000, what: 'the application to run the request' });
  process.kill(parent, 'SIGKILL');
  await waitFor(() => p.lines.some((l) => l.code === ErrorCodes.PRELOAD_PARENT_EXITED), { timeout: 5000, what: 'the parent-exited line' });
  await withTimeout(running.sink.answered, 10_000, 'the running request');
  assert.equal(running.sink.status, 200, 'a fork finishes its request when its parent dies');
  await waitFor(() => !isAlive(w), { timeout: 10_000, what: 'the orphaned fork to exit' });
  await waitFor(() => p.pool.snapshot().workers.length === 0, { timeout: 10_000, what: 'its exit to be seen' });
  const [w2, parent2] = pidsOf(await p.get());
  assert.notEqual(parent2, parent);
  assert.notEqual(w2, w);
  assert.equal(p.lines.filter((l) => l.code === ErrorCodes.PRELOAD_PARENT_EXITED).length, 1);
});

test('a parent that fails at import: one SPAWN_FAILED line, the waiting request gets 503, restarts back off; fixed, the next request works', T, async (t) => {
  const p = preloadPool(t);
  writeFileSync(join(p.dir, 'broken'), '');
  await p.pool.start();
  const r = await p.get();
  assert.equal(r.sink.status, 503);
  assert.equal(r.sink.error?.code, ErrorCodes.POOL_FAILING);
  const poolLines = p.lines.filter((l) => l.code === ErrorCodes.SPAWN_FAILED && /cannot start workers/.test(String(l.msg)));
  assert.equal(poolLines.length, 1, 'one SPAWN_FAILED line from the pool');
  assert.match(String(poolLines[0]!.msg), /preload parent exited with code 1 before forking/);
  assert.ok(p.lines.some((l) => l.code === ErrorCodes.PRELOAD_PARENT_EXITED && l.ready === false), 'the parent exit, before ready');
  rmSync(join(p.dir, 'broken'));
  assert.equal(existsSync(join(p.dir, 'broken')), false);
  // The back-off (a second after the crashed worker's start) ends; the next request works.
  await waitFor(async () => (await p.get()).sink.status === 200, { timeout: 15_000, interval: 200, what: 'a request to succeed once fixed' });
});

test('preload_idle_timeout: with no worker for that long the parent stops; the next request starts a new one', T, async (t) => {
  const p = preloadPool(t, { idleTimeout: 200, preloadIdleTimeout: 300 });
  await p.pool.start();
  const [w, parent] = pidsOf(await p.get());
  await waitFor(() => !isAlive(w), { timeout: 10_000, what: 'the idle worker to stop' });
  await waitFor(() => !isAlive(parent), { timeout: 10_000, what: 'the idle parent to stop' });
  assert.ok(!p.lines.some((l) => l.code === ErrorCodes.PRELOAD_PARENT_EXITED), 'an idle stop is no failure');
  const [, parent2] = pidsOf(await p.get());
  assert.notEqual(parent2, parent);
});

const WWW = lookupUser('www-data');

test("as another user: the parent binds each worker's socket in a directory of that user's, reached by an inherited fd; the runtime dir stays 0700 and ours; stop removes it", { ...T, skip: (process.geteuid?.() !== 0 || WWW === undefined) && 'needs root and www-data' }, async (t) => {
  // The adapter from a place www-data can reach (a checkout under /root is not).
  const command = ['/usr/bin/python3', worldReadableAdapter(t), '--preload', '--fastcgi', 'app:application'];
  const p = preloadPool(t, { user: 'www-data', command });
  chmodSync(p.dir, 0o755);
  const runtimeDir = join(p.dir, 'run');
  await p.pool.start();
  const r = await p.get();
  assert.equal(r.sink.status, 200, r.sink.error?.message);
  const [worker, parent] = pidsOf(r);
  for (const pid of [worker, parent]) assert.match(readFileSync(`/proc/${pid}/status`, 'latin1'), new RegExp(`\\nUid:\\t${WWW!.uid}\\t`), `pid ${pid} runs as www-data`);
  const rt = statSync(runtimeDir);
  assert.equal((rt.mode & 0o777).toString(8), '700');
  assert.equal(rt.uid, 0);
  const dirs = readdirSync(runtimeDir).filter((n) => n.startsWith('preload-'));
  assert.equal(dirs.length, 1, `one socket directory in ${readdirSync(runtimeDir).join(', ')}`);
  const sockets = join(runtimeDir, dirs[0]!);
  assert.equal(statSync(sockets).uid, WWW!.uid);
  const bound = readdirSync(sockets);
  assert.equal(bound.length, 1, 'the one worker socket');
  assert.equal(statSync(join(sockets, bound[0]!)).uid, WWW!.uid, 'bound by the parent as www-data');
  await p.pool.stop(5000);
  assert.equal(existsSync(sockets), false, 'removed by stop');
});
