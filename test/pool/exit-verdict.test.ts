import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ErrorCodes } from '../../src/errors.js';
import { EARLY_EXIT_MS, judgeExit, type ExitRule, type ExitVerdict } from '../../src/pool/workers/exit-verdict.js';
import type { RetireReason, WorkerExit } from '../../src/worker/types.js';

const exit = (o: Partial<WorkerExit>): WorkerExit => ({ code: null, signal: null, reason: undefined, uptime: 1234, ready: true, served: 3, busy: false, ...o });

/** How a pool that hands each request over (counts exactly) judges an exit. */
function classifyExit(e: WorkerExit, busy: boolean): ExitVerdict {
  return judgeExit({ exit: { ...e, busy }, served: 'exact', selfRecycles: false });
}

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
  // An idle php-cgi is sent SIGKILL at once (WorkerSpec.killIdle): no SIGTERM was sat out.
  const idle = classifyExit(exit({ signal: 'SIGKILL', reason: 'reload', killedIdle: true }), false);
  assert.deepEqual([idle.crash, idle.outside, idle.level], [false, false, 'debug']);
  assert.doesNotMatch(idle.message, /needed SIGKILL/);
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

test('the direct path: exit 0 after ready of a worker that recycles itself is a recycle whatever sampling counted; a crash is still a crash', () => {
  // [what happened, exit, served counted how, told to recycle itself, rule, crash, early]; seen at work unless said
  const rows: Array<[string, Partial<WorkerExit>, 'exact' | 'sampled', boolean, ExitRule, boolean, boolean]> = [
    ['PHP_FCGI_MAX_REQUESTS reached between two samples (none seen)', { code: 0, uptime: 80, served: 0 }, 'sampled', true, 'recycled', false, false],
    ['PHP_FCGI_MAX_REQUESTS reached, some seen', { code: 0, uptime: 900, served: 12 }, 'sampled', true, 'recycled', false, false],
    ['exit 0 before ready, told to recycle itself', { code: 0, uptime: 20, ready: false, served: 0 }, 'sampled', true, 'early_crash', true, true],
    ['exit 0 soon after ready, seen at work, not php-cgi', { code: 0, uptime: 80, served: 0 }, 'sampled', false, 'recycled', false, false],
    ['exit 0 soon after ready, counted exactly: nothing served', { code: 0, uptime: 80, served: 0 }, 'exact', true, 'early_crash', true, true],
    ['exit 0 after serving, counted exactly', { code: 0, uptime: 80, served: 500 }, 'exact', false, 'recycled', false, false],
    ['exit 0 past EARLY_EXIT_MS, nothing served', { code: 0, uptime: EARLY_EXIT_MS, served: 0 }, 'exact', false, 'clean', false, false],
    ['SEGV soon after start, recycling itself', { signal: 'SIGSEGV', uptime: 80, served: 0 }, 'sampled', true, 'early_crash', true, true],
    ['exit 255 after serving', { code: 255, uptime: 80, served: 3 }, 'sampled', true, 'crash', true, false],
    ['kill -9 from outside, sampled idle', { signal: 'SIGKILL', uptime: 80, served: 0 }, 'sampled', true, 'outside', true, false],
    ['retired for idle (scale-down), exit 0', { code: 0, uptime: 80, served: 0, reason: 'scale_down' }, 'sampled', true, 'planned', false, false],
    ['killed for request_timeout', { signal: 'SIGKILL', uptime: 80, served: 0, reason: 'request_timeout', busy: true }, 'sampled', true, 'planned', false, false],
    ['spawn_timeout', { signal: 'SIGTERM', uptime: 80, ready: false, served: 0, reason: 'spawn_timeout' }, 'sampled', true, 'spawn_timeout', true, true],
  ];
  for (const [what, e, served, selfRecycles, rule, crash, early] of rows) {
    const v = judgeExit({ exit: exit(e), served, selfRecycles, seenWorking: true });
    assert.deepEqual([v.rule, v.crash, v.early], [rule, crash, early], what);
  }
  // Exit 0 at once, never seen in accept() nor on a request: php-cgi told to recycle has no other clean exit;
  // another program may be one that does not serve at all (a crash loop that backs off).
  const php = judgeExit({ exit: exit({ code: 0, uptime: 30, served: 0 }), served: 'sampled', selfRecycles: true, seenWorking: false });
  assert.deepEqual([php.rule, php.crash, php.early], ['recycled', false, false]);
  const other = judgeExit({ exit: exit({ code: 0, uptime: 30, served: 0 }), served: 'sampled', selfRecycles: false, seenWorking: false });
  assert.deepEqual([other.rule, other.crash, other.early], ['early_crash', true, true]);
  const seen = judgeExit({ exit: exit({ code: 0, uptime: 30, served: 0 }), served: 'sampled', selfRecycles: false, seenWorking: true });
  assert.deepEqual([seen.rule, seen.crash], ['recycled', false]);
  // A worker sampled busy that exits 0 (stopped for shutdown, or recycling itself) finished its request: no loss warned.
  const stopped = judgeExit({ exit: exit({ code: 0, reason: 'shutdown', busy: true }), served: 'sampled', selfRecycles: true, seenWorking: true });
  assert.deepEqual([stopped.level, /request loss/.test(stopped.message)], ['debug', false]);
  const killedBusy = judgeExit({ exit: exit({ signal: 'SIGKILL', reason: 'shutdown', busy: true }), served: 'sampled', selfRecycles: true, seenWorking: true });
  assert.match(killedBusy.message, /possible request loss/);
  const recycled = judgeExit({ exit: exit({ code: 0, uptime: 80, served: 0 }), served: 'sampled', selfRecycles: true, seenWorking: true });
  assert.deepEqual([recycled.restart, recycled.level, recycled.code], [true, 'info', undefined]);
});
