/**
 * Spawned pools on misbehaving fixture workers (test/fixtures/workers): crash loops make
 * the pool fail fast, a command that cannot start is reported once, protocol garbage and
 * cut connections are 502s, a worker that exits between requests loses no request.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { PoolConfig } from '../../src/config/types.js';
import { ErrorCodes } from '../../src/errors.js';
import { createPool, type Pool } from '../../src/pool/index.js';
import { FIXTURE_DIR, fixtureCommand } from '../fixtures/workers/index.js';
import { descendantPids } from '../helpers/proc.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor, withTimeout } from '../helpers/wait.js';
import { makeRequest, poolConfig, recordingLogger, type LogLine, type TestRequest } from './helpers.js';

const T = { timeout: 60_000 };

function fixturePool(t: TestContext, over: Partial<PoolConfig>): { pool: Pool; lines: LogLine[]; get(query?: string): Promise<TestRequest>; procs(): number[] } {
  const dir = makeTempDir(t, 'fpm-fx-');
  const runtimeDir = join(dir, 'run');
  mkdirSync(runtimeDir, { mode: 0o700 });
  const { logger, lines } = recordingLogger();
  const pool = createPool(poolConfig({ name: 'fx', inheritEnv: ['PATH'], killTimeout: 1000, ...over }), { logger, runtimeDir });
  const cmd = over.command?.[1] ?? over.command?.[0] ?? '';
  const procs = (): number[] => (cmd ? descendantPids(process.pid, cmd) : []);
  const keepAlive = setInterval(() => {}, 1 << 30);
  t.after(async () => {
    clearInterval(keepAlive);
    await pool.stop(0);
    for (const pid of procs()) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  });
  const get = async (query = ''): Promise<TestRequest> => {
    const r = makeRequest({ SCRIPT_FILENAME: '/fixture', REQUEST_URI: `/x?${query}`, QUERY_STRING: query });
    pool.dispatch(r.ex);
    await withTimeout(r.sink.answered, 20_000, 'answer');
    return r;
  };
  return { pool, lines, get, procs };
}

const startErrors = (lines: LogLine[]): LogLine[] => lines.filter((l) => l.level === 50 && String(l.msg).includes('cannot start workers'));

test('a worker that exits at once: queued requests get 503, crash_limit makes the pool failing, reported once', T, async (t) => {
  const p = fixturePool(t, { pm: 'ondemand', maxChildren: 2, crashLimit: 3, crashWindow: 60_000, command: fixtureCommand('exit-immediately', '3') });
  for (let i = 0; i < 10 && p.pool.snapshot().state !== 'failing'; i++) {
    const r = await p.get();
    assert.equal(r.sink.status, 503);
    assert.ok(r.sink.error?.code === ErrorCodes.POOL_FAILING, r.sink.error?.message);
  }
  assert.equal(p.pool.snapshot().state, 'failing');
  assert.equal(p.pool.snapshot().crashes, 3);
  assert.ok(p.lines.some((l) => l.level === 50 && String(l.msg).includes('is failing: 3 crashes')));
  assert.equal(startErrors(p.lines).length, 1, 'the start failure is reported once');
  // While failing: 503 without trying to spawn.
  const spawnsBefore = p.lines.filter((l) => String(l.msg).includes('spawning')).length;
  const r = await p.get();
  assert.equal(r.sink.error?.code, ErrorCodes.POOL_FAILING);
  assert.ok((r.sink.error?.retryAfter ?? 0) >= 1);
  assert.equal(p.lines.filter((l) => String(l.msg).includes('spawning')).length, spawnsBefore);
  assert.ok(p.pool.snapshot().rejected.failing >= 1);
});

test('a command that does not exist: reported once, requests 503, no tight loop', T, async (t) => {
  const p = fixturePool(t, { pm: 'static', maxChildren: 3, crashLimit: 3, command: ['/nonexistent/fcgi-app'] });
  await withTimeout(p.pool.start(), 10_000, 'start');
  const r = await p.get();
  assert.equal(r.sink.status, 503);
  await new Promise((res) => setTimeout(res, 2500));
  const errs = startErrors(p.lines);
  assert.equal(errs.length, 1);
  assert.match(String(errs[0]!.msg), /\/nonexistent\/fcgi-app.*ENOENT/);
  const attempts = p.lines.filter((l) => String(l.msg).includes('worker spawn failed')).length;
  assert.ok(attempts <= 6, `${attempts} attempts in 2.5 s`);
  assert.equal(p.pool.snapshot().state, 'failing');
});

test('a worker that never becomes ready: killed after spawn_timeout, the waiting request gets 503', T, async (t) => {
  const p = fixturePool(t, { pm: 'ondemand', maxChildren: 1, spawnTimeout: 300, command: fixtureCommand('never-ready') });
  const r = await p.get();
  assert.equal(r.sink.status, 503);
  assert.match(r.sink.error!.message, /spawn_timeout|cannot start/);
  await waitFor(() => p.procs().length === 0, { timeout: 5000, what: 'never-ready worker killed' });
});

test('a worker that speaks garbage: 502 BACKEND_PROTOCOL', T, async (t) => {
  const p = fixturePool(t, { pm: 'ondemand', maxChildren: 1, command: fixtureCommand('garbage') });
  const r = await p.get();
  assert.equal(r.sink.status, 502);
  assert.equal(r.sink.error?.code, ErrorCodes.BACKEND_PROTOCOL);
  assert.equal(p.pool.snapshot().crashes, 0);
});

test('a worker that cuts the connection mid-response but lives: 502, the worker stays', T, async (t) => {
  const p = fixturePool(t, { pm: 'ondemand', maxChildren: 1, command: fixtureCommand('close-mid-response') });
  const a = await p.get();
  assert.equal(a.sink.status, 502);
  assert.equal(a.sink.error?.code, ErrorCodes.BACKEND_CLOSED);
  const b = await p.get();
  assert.equal(b.sink.status, 502);
  const s = p.pool.snapshot();
  assert.equal(s.workers.length, 1);
  assert.equal(s.crashes, 0);
  assert.equal(a.ex.workerPid, b.ex.workerPid);
});

test('a worker that exits by itself after each request loses no request', T, async (t) => {
  const p = fixturePool(t, { pm: 'ondemand', maxChildren: 1, command: fixtureCommand('responder', '--max-requests', '1') });
  const pids = new Set<number | undefined>();
  for (let i = 0; i < 5; i++) {
    const r = await p.get();
    assert.equal(r.sink.status, 200, r.sink.error?.message);
    pids.add(r.ex.workerPid);
  }
  assert.equal(pids.size, 5);
  assert.equal(p.pool.snapshot().crashes, 0);
});

test('a live worker answering FCGI_OVERLOADED is replaced, not left draining: the request is served by the next worker', T, async (t) => {
  // Answers END_REQUEST(FCGI_OVERLOADED) while the flag file exists, else a normal response.
  const dir = makeTempDir(t, 'fpm-ovl-');
  const flag = join(dir, 'overloaded');
  const script = join(dir, 'overloaded-worker.mjs');
  const mini = pathToFileURL(join(FIXTURE_DIR, 'fcgi-mini.mjs')).href;
  writeFileSync(
    script,
    `import fs from 'node:fs';
    import { listen, serveRequests, record, T } from ${JSON.stringify(mini)};
    const flag = process.argv[2];
    listen((conn) => serveRequests(conn, (req, c) => {
      if (fs.existsSync(flag)) {
        const end = Buffer.alloc(8); end[4] = 2; // protocolStatus FCGI_OVERLOADED
        c.write(record(T.END, req.id, end));
        return;
      }
      const body = Buffer.from('served by ' + process.pid);
      c.write(Buffer.concat([record(T.STDOUT, req.id, Buffer.concat([Buffer.from('Content-Type: text/plain\\r\\n\\r\\n'), body])), record(T.STDOUT, req.id), record(T.END, req.id, Buffer.alloc(8))]));
    }));`,
  );
  writeFileSync(flag, '');
  const p = fixturePool(t, { pm: 'ondemand', maxChildren: 1, queueTimeout: 10_000, command: [process.execPath, script, flag] });
  const r = makeRequest({ SCRIPT_FILENAME: '/fixture', REQUEST_URI: '/x' });
  p.pool.dispatch(r.ex);
  await waitFor(() => p.lines.some((l) => String(l.msg).includes('alive but unreachable')), { timeout: 10_000, what: 'the refusal' });
  rmSync(flag);
  await withTimeout(r.sink.answered, 15_000, 'answer');
  assert.equal(r.sink.status, 200, r.sink.error?.message);
  assert.match(r.sink.text(), /^served by \d+$/);
  const s = p.pool.snapshot();
  assert.equal(s.workers.filter((w) => w.state === 'draining').length, 0);
  assert.ok((s.recycles['scale_down'] ?? 0) >= 1);
});
