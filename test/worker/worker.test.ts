/**
 * Worker behaviour with the fixture programs (test/fixtures/workers/).
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { silentLogger } from '../../src/log/log.js';
import { ErrorCodes } from '../../src/errors.js';
import { Worker } from '../../src/worker/worker.js';
import type { WorkerExit, WorkerSpawnFailure, WorkerSpec } from '../../src/worker/types.js';
import { judgeExit, type ExitVerdict } from '../../src/pool/workers/exit-verdict.js';
import { fixtureCommand } from '../fixtures/workers/index.js';
import { fcgiRequest } from './fcgi-raw.js';
import { captureLogger, makeSpec, PoolSide, processGone, tempDir, waitFor, type LogRecord } from './helpers.js';

interface Recorded {
  w: Worker;
  /** What the pool tells the worker: the test plays the pool. */
  pool: PoolSide;
  events: string[];
  failures: WorkerSpawnFailure[];
  exit: Promise<[WorkerExit, ExitVerdict]>;
}

/** Spawns and records every event; always stopped after the test. */
function spawnRecorded(t: { after: (fn: () => void | Promise<void>) => void }, spec: WorkerSpec, logger = silentLogger()): Recorded {
  const pool = new PoolSide();
  const w = Worker.spawn(spec, logger, 1, pool);
  const events: string[] = [];
  const failures: WorkerSpawnFailure[] = [];
  w.on('ready', () => events.push('ready'));
  w.on('spawnFailed', (f) => {
    events.push('spawnFailed');
    failures.push(f);
  });
  w.on('exit', () => events.push('exit'));
  // What the exit reports, and how a pool that counts its requests exactly judges it at burial.
  const exit = (once(w, 'exit') as Promise<[WorkerExit]>).then(([e]): [WorkerExit, ExitVerdict] => [e, judgeExit({ exit: e, served: 'exact', selfRecycles: false })]);
  t.after(async () => {
    pool.retire('shutdown');
    await w.stop();
    // Nothing follows the exit: every timer and probe ended with it, and a second
    // failure, a late ready or a second exit are refused by the worker's own guards.
    assert.equal(events.indexOf('exit'), events.length - 1, `events after the exit: ${events.join(', ')}`);
  });
  return { w, pool, events, failures, exit };
}

test('never-ready (accepts nothing on fd 0): spawn timeout, one failure, killed, reason spawn_timeout', async (t) => {
  const dir = tempDir(t);
  const r = spawnRecorded(t, makeSpec(dir, fixtureCommand('never-ready'), { spawnTimeout: 400, killTimeout: 1000 }));
  const [exit, verdict] = await r.exit;
  assert.deepEqual(r.events, ['spawnFailed', 'exit']);
  assert.equal(r.failures[0]!.errno, 'TIMEOUT');
  assert.equal(r.failures[0]!.code, ErrorCodes.SPAWN_FAILED);
  assert.match(r.failures[0]!.message, /within spawn_timeout \(400 ms\)/);
  assert.equal(exit.reason, 'spawn_timeout');
  assert.equal(exit.signal, 'SIGTERM');
  assert.equal(verdict.crash, true);
  assert.ok(processGone(r.w.pid!));
  assert.deepEqual(fs.readdirSync(dir), [], 'socket file removed');
});

test('never-ready in argv mode (never binds {socket}): spawn timeout too', async (t) => {
  const dir = tempDir(t);
  const r = spawnRecorded(t, makeSpec(dir, fixtureCommand('never-ready', '--socket', '{socket}'), { socket: 'argv', spawnTimeout: 300 }));
  const [exit] = await r.exit;
  assert.deepEqual(r.events, ['spawnFailed', 'exit']);
  assert.equal(exit.reason, 'spawn_timeout');
});

test('a missing command is reported once, by name and errno, and nothing is spawned', async (t) => {
  const dir = tempDir(t);
  const { logger, records } = captureLogger();
  const r = spawnRecorded(t, makeSpec(dir, ['no-such-backend-xyz', '-b', '{socket}']), logger);
  const [exit, verdict] = await r.exit;
  assert.deepEqual(r.events, ['spawnFailed', 'exit']);
  const f = r.failures[0]!;
  assert.equal(f.errno, 'ENOENT');
  assert.match(f.message, /no-such-backend-xyz/);
  assert.match(f.message, /ENOENT/);
  assert.equal(r.w.pid, undefined);
  assert.deepEqual([exit.code, exit.signal], [null, null]);
  assert.equal(verdict.crash, true);
  assert.equal(records.filter((x) => x.level === 50).length, 1, 'one error line');
  // stop() after the fact resolves with the same exit.
  assert.equal(await r.w.stop(), exit);
});

test('a command that is not executable: EACCES', async (t) => {
  const dir = tempDir(t);
  const file = path.join(dir, 'not-exec.sh');
  fs.writeFileSync(file, '#!/bin/sh\n', { mode: 0o644 });
  const r = spawnRecorded(t, makeSpec(dir, [file]));
  await r.exit;
  assert.deepEqual(r.events, ['spawnFailed', 'exit']);
  assert.equal(r.failures[0]!.errno, 'EACCES');
  assert.match(r.failures[0]!.message, /not-exec\.sh/);
});

test('exit before ready (crash loop fixture): one EXITED failure, then the exit with its code', async (t) => {
  const dir = tempDir(t);
  const { logger, records } = captureLogger();
  const r = spawnRecorded(t, makeSpec(dir, fixtureCommand('exit-immediately', '3')), logger);
  const [exit, verdict] = await r.exit;
  assert.deepEqual(r.events, ['spawnFailed', 'exit']);
  assert.equal(r.failures[0]!.errno, 'EXITED');
  assert.match(r.failures[0]!.message, /exited with code 3 before accepting connections/);
  assert.equal(exit.code, 3);
  assert.equal(exit.reason, undefined);
  assert.equal(verdict.crash, true);
  assert.deepEqual([exit.ready, exit.served, verdict.early], [false, 0, true], 'a start that failed counts toward crash_limit');
  assert.ok(
    records.some((x) => x['stream'] === 'stderr' && x.msg === 'exit-immediately: giving up' && x['wpid'] === r.w.pid && x['pool'] === 'test'),
    'stderr line logged with pool and worker pid',
  );
  assert.deepEqual(fs.readdirSync(dir), []);
});

test('stop escalates SIGTERM → SIGKILL after killTimeout for a worker that ignores SIGTERM; stop is idempotent', async (t) => {
  const dir = tempDir(t);
  const { logger, records } = captureLogger();
  const r = spawnRecorded(t, makeSpec(dir, fixtureCommand('ignore-sigterm'), { killTimeout: 300 }), logger);
  await once(r.w, 'ready');
  r.pool.retire('shutdown');
  const p1 = r.w.stop();
  const p2 = r.w.stop();
  assert.equal(p1, p2);
  const exit = await p1;
  assert.equal(exit.signal, 'SIGKILL');
  assert.equal(exit.reason, 'shutdown', 'the pool\'s reason: its own SIGKILL is no outside kill');
  assert.ok(records.some((x) => x['stream'] === 'stdout' && /SIGTERM ignored/.test(x.msg)), 'it did get SIGTERM first');
  const late = records.find((x) => /did not exit within kill_timeout/.test(x.msg));
  // Where it waited: a Node process in epoll_wait, or running on a loaded machine.
  assert.match(String((late?.['blockedIn'] as { syscall?: string } | undefined)?.syscall), /^(running|\d+( 0x[0-9a-f]+)?)$/, JSON.stringify(late));
  assert.deepEqual(r.events, ['ready', 'exit']);
  assert.equal(await r.w.stop(), exit);
});

test('a worker that slept through SIGTERM in accept() (php-cgi\'s race between its shutdown check and accept) gets it again and exits, no SIGKILL', async (t) => {
  const dir = tempDir(t);
  // Notes the first SIGTERM and goes on accepting, as php-cgi does when the signal lands
  // between its look at in_shutdown and accept(); the second one ends it.
  const script = path.join(dir, 'race.py');
  fs.writeFileSync(script, [
    'import signal, socket, sys',
    'seen = []',
    'def term(signo, frame):',
    '    seen.append(signo)',
    '    print("SIGTERM %d" % len(seen), flush=True)',
    '    if len(seen) > 1: sys.exit(0)',
    'signal.signal(signal.SIGTERM, term)',
    'listener = socket.socket(fileno=0)',
    'while True:',
    '    conn, _ = listener.accept()',
    '    conn.close()',
    '',
  ].join('\n'));
  const { logger, records } = captureLogger();
  const r = spawnRecorded(t, makeSpec(dir, ['/usr/bin/python3', script], { killTimeout: 10_000 }), logger);
  await once(r.w, 'ready');
  r.pool.retire('shutdown');
  const exit = await r.w.stop();
  assert.deepEqual([exit.code, exit.signal], [0, null], JSON.stringify(records.map((x) => x.msg)));
  assert.ok(records.some((x) => x['stream'] === 'stdout' && x.msg === 'SIGTERM 2'), 'it got SIGTERM twice');
  assert.equal(records.find((x) => x['code'] === ErrorCodes.KILL_TIMEOUT), undefined);
});

test('a worker retired while it served is stopped after its request: the exit carries the pool\'s reason and the request served', async (t) => {
  const dir = tempDir(t);
  const r = spawnRecorded(t, makeSpec(dir, fixtureCommand('responder')));
  await once(r.w, 'ready');
  r.pool.start();
  const reply = fcgiRequest(r.w.address, { QUERY_STRING: 'sleep=200', REQUEST_URI: '/slow' });
  r.pool.retire('max_requests');
  const res = await reply;
  assert.match(res.stdout.toString(), /hello pid=\d+ n=1 uri=\/slow/);
  assert.equal(processGone(r.w.pid!), false, 'a retire alone sends nothing: the pool stops it');
  r.pool.end();
  void r.w.stop();
  const [exit, verdict] = await r.exit;
  assert.equal(exit.reason, 'max_requests');
  assert.deepEqual([exit.ready, exit.served], [true, 1]);
  assert.deepEqual([verdict.crash, verdict.restart, verdict.level], [false, true, 'debug']);
});

test('a worker stopped when idle after a request on TCP: exit with the pool\'s reason', async (t) => {
  const dir = tempDir(t);
  const r = spawnRecorded(t, makeSpec(dir, fixtureCommand('responder', '--port', '{port}'), { socket: 'argv' }));
  await once(r.w, 'ready');
  assert.equal(r.w.address.kind, 'tcp');
  const res = await fcgiRequest(r.w.address, { REQUEST_URI: '/tcp' });
  assert.match(res.stdout.toString(), /uri=\/tcp/);
  r.pool.retire('idle_timeout');
  void r.w.stop();
  const [exit, verdict] = await r.exit;
  assert.equal(exit.reason, 'idle_timeout');
  assert.equal(verdict.restart, false);
});

test('a crash while busy is reported as possible request loss', async (t) => {
  const dir = tempDir(t);
  const r = spawnRecorded(t, makeSpec(dir, fixtureCommand('responder')));
  await once(r.w, 'ready');
  r.pool.start();
  const res = await fcgiRequest(r.w.address, { QUERY_STRING: 'crash=1' }).catch(() => undefined);
  assert.equal(res?.appStatus, undefined, 'no END_REQUEST');
  const [exit, verdict] = await r.exit;
  assert.equal(exit.code, 70);
  assert.deepEqual([verdict.crash, verdict.level], [true, 'error']);
  assert.match(verdict.message, /possible request loss/);
  assert.deepEqual([exit.ready, exit.served, verdict.early], [true, 0, true], 'died under its first request, just started');
});

/** A responder worker that has served one request and is idle again. */
async function servedOnce(t: TestContext): Promise<Recorded> {
  const r = spawnRecorded(t, makeSpec(tempDir(t), fixtureCommand('responder')));
  await once(r.w, 'ready');
  r.pool.start();
  await fcgiRequest(r.w.address, { REQUEST_URI: '/one' });
  r.pool.end();
  return r;
}

test('SIGKILL from outside after the worker served: a crash, but not an early one', async (t) => {
  const r = await servedOnce(t);
  process.kill(r.w.pid!, 'SIGKILL');
  const [exit, verdict] = await r.exit;
  assert.equal(exit.signal, 'SIGKILL');
  assert.deepEqual([exit.ready, exit.served], [true, 1]);
  assert.deepEqual([verdict.crash, verdict.early, verdict.restart], [true, false, true]);
});

test('SIGKILL from outside in the instant before fcgi-pm retires the worker (its exit not reaped yet): still an outside kill, no retire reason', async (t) => {
  const r = await servedOnce(t);
  // As the pool does when a request on a just-killed worker fails and the exit event is
  // late (a loaded machine): the retire's SIGTERM reaches a process already dead.
  process.kill(r.w.pid!, 'SIGKILL');
  r.pool.retire('scale_down');
  void r.w.stop();
  const [exit, verdict] = await r.exit;
  assert.equal(exit.signal, 'SIGKILL');
  assert.equal(exit.reason, undefined, 'fcgi-pm sent no SIGKILL: the retire did not end it');
  assert.deepEqual([verdict.crash, verdict.outside, verdict.early, verdict.restart], [true, true, false, true]);
});

test('SIGKILL from outside on a draining worker (retired, no signal sent yet): an outside kill, not the planned stop', async (t) => {
  const dir = tempDir(t);
  const r = spawnRecorded(t, makeSpec(dir, fixtureCommand('responder')));
  await once(r.w, 'ready');
  r.pool.start();
  const reply = fcgiRequest(r.w.address, { QUERY_STRING: 'sleep=5000', REQUEST_URI: '/slow' }).catch(() => undefined);
  r.pool.retire('max_requests');
  process.kill(r.w.pid!, 'SIGKILL');
  const [exit, verdict] = await r.exit;
  await reply;
  assert.equal(exit.signal, 'SIGKILL');
  assert.equal(exit.reason, undefined);
  assert.deepEqual([verdict.crash, verdict.outside, verdict.code], [true, true, ErrorCodes.WORKER_KILLED]);
});

test('stop while spawning stops it without a spawn failure', async (t) => {
  const dir = tempDir(t);
  const r = spawnRecorded(t, makeSpec(dir, fixtureCommand('never-ready'), { spawnTimeout: 10_000 }));
  r.pool.retire('shutdown');
  void r.w.stop(); // before the process even started
  const [exit] = await r.exit;
  assert.deepEqual(r.events, ['exit']);
  assert.equal(exit.reason, 'shutdown');
  assert.equal(r.w.pid, undefined);
  const r2 = spawnRecorded(t, makeSpec(dir, fixtureCommand('never-ready'), { spawnTimeout: 10_000 }));
  await waitFor(() => r2.w.pid !== undefined, 3000);
  r2.pool.retire('scale_down');
  void r2.w.stop();
  const [exit2] = await r2.exit;
  assert.deepEqual(r2.events, ['exit']);
  assert.deepEqual([exit2.reason, exit2.signal], ['scale_down', 'SIGTERM']);
});

test('a runtime dir other users can enter is refused', async (t) => {
  const dir = tempDir(t);
  fs.chmodSync(dir, 0o755);
  const r = spawnRecorded(t, makeSpec(dir, fixtureCommand('responder')));
  await r.exit;
  assert.deepEqual(r.events, ['spawnFailed', 'exit']);
  assert.equal(r.failures[0]!.errno, 'SETUP');
  assert.match(r.failures[0]!.message, /0755.*0700/);
});

test('argv mode without {socket} or {port} is a setup failure', async (t) => {
  const dir = tempDir(t);
  const r = spawnRecorded(t, makeSpec(dir, fixtureCommand('responder'), { socket: 'argv' }));
  await r.exit;
  assert.equal(r.failures[0]!.errno, 'SETUP');
  assert.match(r.failures[0]!.message, /\{socket\} or \{port\}/);
});

test('garbage and close-mid-response fixtures become ready (they accept) and misbehave on requests', async (t) => {
  const dir = tempDir(t);
  const g = spawnRecorded(t, makeSpec(dir, fixtureCommand('garbage')));
  await once(g.w, 'ready');
  const gr = await fcgiRequest(g.w.address, { REQUEST_URI: '/' });
  assert.equal(gr.appStatus, undefined, 'no END_REQUEST from garbage');
  const c = spawnRecorded(t, makeSpec(dir, fixtureCommand('close-mid-response', '--socket', '{socket}'), { socket: 'argv' }));
  await once(c.w, 'ready');
  const cr = await fcgiRequest(c.w.address, { REQUEST_URI: '/' });
  assert.equal(cr.appStatus, undefined, 'cut before END_REQUEST');
});

test('a noisy worker is rate-limited: the burst of entries is logged, the rest counted in one report', async (t) => {
  const dir = tempDir(t);
  const { logger, records } = captureLogger();
  const { TokenBucket } = await import('../../src/util/token-bucket.js');
  const { MAX_ENTRY_LINES } = await import('../../src/log/entries.js');
  // Practically no refill, so the count is exact whatever the machine's speed.
  const w = Worker.spawn(makeSpec(dir, fixtureCommand('noisy-stderr', '--lines', '1000')), logger, 1, new PoolSide(), {
    outputLimiter: new TokenBucket({ ratePerSec: 0.001, burst: 10 }),
  });
  t.after(async () => void (await w.stop()));
  await once(w, 'ready');
  const entries = (): LogRecord[] => records.filter((x) => x['stream'] === 'stderr');
  const dropped = (): number => records.reduce((n, x) => n + (typeof x['dropped'] === 'number' ? (x['dropped'] as number) : 0), 0);
  await w.stop();
  // 1000 short lines + one long one, in one write: at least 11 capped entries, so the
  // burst of 10 is used up; the report may follow the exit by up to a second.
  assert.ok(await waitFor(() => dropped() > 0, 5000), `entries ${entries().length} dropped ${dropped()}`);
  assert.equal(entries().length, 10);
  for (const e of entries()) assert.ok(String(e.msg).split('\n').length <= MAX_ENTRY_LINES);
  assert.equal(entries()[0]!.msg.split('\n')[1], 'noise line 2', 'lines written together are one entry');
  assert.equal(records.filter((x) => x['dropped'] !== undefined).length <= 2, true);
});
