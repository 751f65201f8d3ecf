import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ErrorCodes } from '../../src/errors.js';
import {
  BACKOFF_MAX_MS,
  CrashWindow,
  EARLY_EXIT_MS,
  backoffDelay,
  classifyExit,
  restartDelay,
} from '../../src/worker/exit-policy.js';
import type { RetireReason, WorkerExit } from '../../src/worker/types.js';

const exit = (o: Partial<WorkerExit>): WorkerExit => ({ code: null, signal: null, reason: undefined, uptime: 1234, ready: true, served: 3, ...o });

test('planned exits are quiet and not crashes', () => {
  const quiet: RetireReason[] = ['idle_timeout', 'scale_down', 'shutdown', 'reload', 'max_requests', 'max_lifetime'];
  for (const reason of quiet) {
    const v = classifyExit(exit({ code: 0, reason }), false);
    assert.equal(v.crash, false, reason);
    assert.equal(v.level, 'debug', reason);
    assert.doesNotMatch(v.message, /request loss/);
  }
  // Stopped by SIGTERM's default action is still planned.
  assert.equal(classifyExit(exit({ signal: 'SIGTERM', reason: 'idle_timeout' }), false).crash, false);
});

test('restart follows the reason: replace recycled workers, not idle or shutdown ones', () => {
  assert.equal(classifyExit(exit({ code: 0, reason: 'idle_timeout' }), false).restart, false);
  assert.equal(classifyExit(exit({ code: 0, reason: 'shutdown' }), false).restart, false);
  assert.equal(classifyExit(exit({ code: 0, reason: 'scale_down' }), false).restart, false);
  assert.equal(classifyExit(exit({ code: 0, reason: 'max_requests' }), false).restart, true);
  assert.equal(classifyExit(exit({ code: 0, reason: 'reload' }), false).restart, true);
});

test('a signal nobody asked for is a crash; while busy it is an error with possible request loss', () => {
  const idle = classifyExit(exit({ signal: 'SIGSEGV' }), false);
  assert.deepEqual([idle.crash, idle.restart, idle.level], [true, true, 'warn']);
  assert.match(idle.message, /SIGSEGV/);
  assert.doesNotMatch(idle.message, /request loss/);
  const busy = classifyExit(exit({ signal: 'SIGKILL' }), true);
  assert.deepEqual([busy.crash, busy.level], [true, 'error']);
  assert.match(busy.message, /possible request loss/);
});

test('an unexpected non-zero exit is a crash; code 0 by itself is not (php-cgi after PHP_FCGI_MAX_REQUESTS)', () => {
  const v = classifyExit(exit({ code: 255 }), false);
  assert.equal(v.crash, true);
  assert.match(v.message, /code 255/);
  const clean = classifyExit(exit({ code: 0 }), false);
  assert.deepEqual([clean.crash, clean.restart, clean.level], [false, true, 'info']);
  const cleanBusy = classifyExit(exit({ code: 0 }), true);
  assert.equal(cleanBusy.level, 'warn');
  assert.match(cleanBusy.message, /possible request loss/);
});

test('a spawn timeout counts as a crash; a process that never started too', () => {
  const v = classifyExit(exit({ signal: 'SIGTERM', reason: 'spawn_timeout' }), false);
  assert.deepEqual([v.crash, v.restart], [true, true]);
  assert.match(v.message, /spawn_timeout/);
  const never = classifyExit(exit({}), false);
  assert.equal(never.crash, true);
  assert.match(never.message, /could not be started/);
});

test('a planned stop of a busy worker warns about request loss; one that needed SIGKILL says so', () => {
  const v = classifyExit(exit({ signal: 'SIGTERM', reason: 'shutdown' }), true);
  assert.deepEqual([v.crash, v.level], [false, 'warn']);
  assert.match(v.message, /possible request loss/);
  const k = classifyExit(exit({ signal: 'SIGKILL', reason: 'idle_timeout' }), false);
  assert.equal(k.level, 'info');
  assert.match(k.message, /needed SIGKILL/);
  const rt = classifyExit(exit({ signal: 'SIGKILL', reason: 'request_timeout' }), true);
  assert.equal(rt.level, 'warn');
  assert.doesNotMatch(rt.message, /needed SIGKILL/);
});

test('early: only what the application does to itself before ready or soon after start counts toward crash_limit; a kill from outside never does', () => {
  // [what happened, exit, busy, crash, early, outside]
  const cells: Array<[string, Partial<WorkerExit>, boolean, boolean, boolean, boolean]> = [
    ['killed after serving, under a request', { signal: 'SIGKILL', uptime: 200, served: 1 }, true, true, false, true],
    ['killed after serving, idle', { signal: 'SIGKILL', uptime: 200, served: 40 }, false, true, false, true],
    ['killed idle, never used, past EARLY_EXIT_MS', { signal: 'SIGKILL', uptime: EARLY_EXIT_MS, served: 0 }, false, true, false, true],
    ['kill -9 under its first request, soon after start', { signal: 'SIGKILL', uptime: 50, served: 0 }, true, true, false, true],
    ['kill (TERM) idle, soon after ready, never used', { signal: 'SIGTERM', uptime: 50, served: 0 }, false, true, false, true],
    ['kill -9 before ready, however long it tried', { signal: 'SIGKILL', uptime: 60_000, ready: false, served: 0 }, false, true, false, true],
    ['kill (TERM) before ready', { signal: 'SIGTERM', uptime: 10, ready: false, served: 0 }, false, true, false, true],
    ['SEGV under its first request, soon after start', { signal: 'SIGSEGV', uptime: EARLY_EXIT_MS - 1, served: 0 }, true, true, true, false],
    ['ABRT before ready', { signal: 'SIGABRT', uptime: 10, ready: false, served: 0 }, false, true, true, false],
    ['SEGV after serving', { signal: 'SIGSEGV', uptime: 200, served: 3 }, true, true, false, false],
    ['exit 1 before ready', { code: 1, uptime: 30, ready: false, served: 0 }, false, true, true, false],
    ['exit 0 before ready (a start that keeps failing)', { code: 0, uptime: 30, ready: false, served: 0 }, false, true, true, false],
    ['exit 0 soon after ready, never served', { code: 0, uptime: 100, served: 0 }, false, true, true, false],
    ['exit 0 after serving (PHP_FCGI_MAX_REQUESTS)', { code: 0, uptime: 100, served: 500 }, false, false, false, false],
    ['stopped for idle_timeout soon after start', { code: 0, uptime: 100, served: 0, reason: 'idle_timeout' }, false, false, false, false],
    ['killed for request_timeout under its first request', { signal: 'SIGKILL', uptime: 100, served: 0, reason: 'request_timeout' }, true, false, false, false],
    ['SIGTERM fcgi-pm sent for spawn_timeout', { signal: 'SIGTERM', uptime: 100, ready: false, served: 0, reason: 'spawn_timeout' }, false, true, true, false],
  ];
  for (const [what, e, busy, crash, early, outside] of cells) {
    const v = classifyExit(exit(e), busy);
    assert.deepEqual([v.crash, v.early, v.outside], [crash, early, outside], what);
    if (e.reason === undefined) assert.equal(v.restart, true, what);
    if (outside) assert.equal(v.code, ErrorCodes.WORKER_KILLED, what);
  }
  assert.match(classifyExit(exit({ signal: 'SIGKILL', ready: false, served: 0 }), false).message, /SIGKILL from outside fcgi-pm before it was ready/);
  assert.match(classifyExit(exit({ signal: 'SIGABRT', ready: false, served: 0 }), false).message, /SIGABRT before it was ready/);
});

test('back-off: 100 ms doubling, capped at 30 s', () => {
  assert.deepEqual([0, 1, 2, 3, 4, 5].map(backoffDelay), [0, 100, 200, 400, 800, 1600]);
  assert.equal(backoffDelay(9), 25_600);
  assert.equal(backoffDelay(10), BACKOFF_MAX_MS);
  assert.equal(backoffDelay(1000), BACKOFF_MAX_MS);
});

test('no restart sooner than a second after the last start, but only after crashes', () => {
  assert.equal(restartDelay(0, 10_000, 9_990), 0);
  assert.equal(restartDelay(1, 10_000, 9_950), 950); // started 50 ms ago
  assert.equal(restartDelay(1, 10_000, 5_000), 100); // long ago: plain back-off
  assert.equal(restartDelay(6, 10_000, 9_950), 3200);
});

test('CrashWindow: failing at crash_limit within crash_window, recovering as crashes age out (fake clock)', () => {
  const w = new CrashWindow(3, 60_000);
  let now = 1_000_000;
  assert.equal(w.failing(now), false);
  assert.equal(w.delay(now, now - 5000), 0);
  w.record(now);
  assert.equal(w.delay(now, now - 5000), 100);
  now += 10_000;
  w.record(now);
  assert.equal(w.count(now), 2);
  assert.equal(w.failing(now), false);
  now += 10_000;
  w.record(now);
  assert.equal(w.failing(now), true);
  assert.equal(w.delay(now, now - 5000), 400);
  // The first crash leaves the window 60 s after it happened.
  now = 1_000_000 + 60_000;
  assert.equal(w.count(now), 2);
  assert.equal(w.failing(now), false);
  now += 60_000;
  assert.equal(w.count(now), 0);
  assert.equal(w.delay(now, now - 10), 0);
  assert.equal(w.last, 1_020_000);
});

test('CrashWindow: limit 0 never fails; more crashes than the ring holds still count as failing', () => {
  const off = new CrashWindow(0, 60_000);
  for (let i = 0; i < 100; i++) off.record(i);
  assert.equal(off.failing(100), false);
  const w = new CrashWindow(5, 60_000);
  for (let i = 0; i < 100; i++) w.record(i * 10);
  assert.equal(w.failing(1000), true);
  assert.equal(w.delay(1000, 990), BACKOFF_MAX_MS);
});

test('CrashWindow.count matches a brute-force count over the recent crashes (property)', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 30 }),
      fc.integer({ min: 1, max: 10_000 }),
      fc.array(fc.integer({ min: 0, max: 5000 }), { maxLength: 60 }),
      fc.integer({ min: 0, max: 20_000 }),
      (limit, windowMs, gaps, after) => {
        const w = new CrashWindow(limit, windowMs);
        const times: number[] = [];
        let t = 0;
        for (const g of gaps) {
          t += g;
          times.push(t);
          w.record(t);
        }
        const now = t + after;
        const cap = Math.max(limit, 16);
        const expected = times.slice(-cap).filter((x) => x > now - windowMs).length;
        assert.equal(w.count(now), expected);
        assert.equal(w.failing(now), expected >= limit);
      },
    ),
  );
});

test('a verdict logged at warn or error names its stable code; quiet ones have none', () => {
  const reasons: (RetireReason | undefined)[] = [undefined, 'idle_timeout', 'scale_down', 'shutdown', 'reload', 'max_requests', 'max_lifetime', 'memory', 'memory_budget', 'memory_hard', 'request_timeout', 'client_abort', 'spawn_timeout'];
  fc.assert(
    fc.property(fc.constantFrom(...reasons), fc.constantFrom<[number | null, NodeJS.Signals | null]>([0, null], [1, null], [null, 'SIGTERM'], [null, 'SIGKILL'], [null, null]), fc.boolean(), (reason, [code, signal], busy) => {
      const v = classifyExit(exit({ code, signal, reason }), busy);
      assert.equal(v.code !== undefined, v.level === 'warn' || v.level === 'error', JSON.stringify({ reason, code, signal, busy, v }));
    }),
  );
  assert.equal(classifyExit(exit({ signal: 'SIGKILL', reason: 'request_timeout' }), true).code, ErrorCodes.REQUEST_TIMEOUT);
  assert.equal(classifyExit(exit({ signal: 'SIGKILL', reason: 'memory_hard' }), true).code, ErrorCodes.MEMORY_HARD_LIMIT);
  assert.equal(classifyExit(exit({ signal: 'SIGSEGV' }), false).code, ErrorCodes.WORKER_CRASHED);
  assert.equal(classifyExit(exit({ signal: 'SIGTERM', reason: 'spawn_timeout' }), false).code, ErrorCodes.SPAWN_TIMEOUT);
  assert.equal(classifyExit(exit({ signal: 'SIGTERM', reason: 'shutdown' }), true).code, ErrorCodes.REQUEST_LOST);
});
