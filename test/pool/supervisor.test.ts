/**
 * The Supervisor's state table, cell by cell, on fake workers, a fake clock and a
 * recording dispatcher: each test puts one worker in a state, fires one event, and
 * asserts the ACTION taken (the dispatcher hook called, the signal sent, the spawn
 * asked, the log line) as well as the next state.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ErrorCodes, ProxyError } from '../../src/errors.js';
import type { PoolConfig } from '../../src/config/types.js';
import { buildWorkerSpec } from '../../src/pool/worker-spec.js';
import { judgeExit } from '../../src/pool/workers/exit-verdict.js';
import { EXIT_GRACE_MS } from '../../src/pool/spawned/seat-table.js';
import { PoolStats } from '../../src/pool/stats.js';
import { Supervisor, type SlotEventContext, type SupervisorHooks } from '../../src/pool/workers/supervisor.js';
import { SLOT_EVENTS, SLOT_STATES, SUPERVISOR_TABLE, type SlotEvent, type SlotState } from '../../src/pool/workers/supervisor-table.js';
import type { SeatView, SlotView } from '../../src/pool/workers/slot.js';
import type { Exchange } from '../../src/protocol/exchange.js';
import type { Endpoint } from '../../src/upstream/types.js';
import { FakeClock } from './fake-clock.js';
import { FakeWorkerFactory, type FakeWorker } from './fake-worker.js';
import { poolConfig, recordingLogger } from './helpers.js';

type HookName = Exclude<keyof SupervisorHooks, 'waiting' | 'poolState' | 'idleWorkers' | 'seats'>;

/** What the recording dispatcher's unhold answers: true = no held failure still waits. */
let unholdAnswers: boolean[] = [];

function setup(over: Partial<PoolConfig> = {}) {
  nextFireIsTested = false;
  const clock = new FakeClock();
  const wf = new FakeWorkerFactory(clock);
  // Stopped workers exit a second later, so a test sees the stopping state for a while.
  wf.plan = { readyAfter: undefined, exitAfterStop: 1000 };
  const { logger, lines } = recordingLogger();
  const cfg = poolConfig({ command: ['/fake/app'], pm: 'static', maxChildren: 1, ...over });
  const calls: Array<[HookName, SlotView | ProxyError | undefined]> = [];
  const killed: number[] = [];
  let waiting = 0;
  let closedIdle = 0;
  const rec = (name: HookName) => (arg?: SlotView | ProxyError) => void calls.push([name, arg]);
  const hooks: SupervisorHooks = {
    waiting: () => waiting,
    poolState: () => 'running',
    seats: (_slot, n) => Array.from({ length: n }, () => ({ busy: false, inIdle: false, idleSince: 0, current: undefined, busySince: 0 })),
    // The endpoint the dispatcher makes when a worker is offered: it counts closeIdle.
    connect: () => ({ closeIdle: () => void closedIdle++ }) as unknown as Endpoint,
    offer: rec('offer'),
    withdraw: rec('withdraw'),
    cut: rec('cut'),
    lost: rec('lost'),
    refuseQueued: rec('refuseQueued'),
    idleWorkers: () => [],
    unhold: (slot) => {
      calls.push(['unhold', slot]);
      return unholdAnswers.shift() ?? true;
    },
    pump: rec('pump'),
    checkDrained: rec('checkDrained'),
  };
  const stats = new PoolStats();
  // The first worker's record, kept once it has left the live set.
  let first: SlotView | undefined;
  const sup = new Supervisor(cfg, {
    logger, clock, spec: buildWorkerSpec(cfg, '/tmp'), workerFactory: wf.create, workerLogger: logger, random: () => 0,
    killNow: (pid) => void killed.push(pid),
  }, hooks, stats);
  void sup.start();
  first = [...sup.slots][0];
  return {
    clock, wf, sup, calls, killed, lines, stats,
    get slot(): SlotView {
      first ??= [...sup.slots][0];
      return first!;
    },
    get worker(): FakeWorker {
      return wf.workers[0]!;
    },
    names: () => calls.map((c) => c[0]),
    /** closeIdle calls on the worker's endpoint. */
    get closedIdle(): number {
      return closedIdle;
    },
    setWaiting: (n: number) => (waiting = n),
  };
}

type Env = ReturnType<typeof setup>;

/** The recording dispatcher's seats, which the tests write as the dispatcher would. */
type TestSeat = { -readonly [K in keyof SeatView]: SeatView[K] };

/** The dispatcher gives `n` of the worker's seats a request (busy is read from the seats). */
function occupy(sup: Supervisor, slot: SlotView, n = 1): void {
  for (const seat of slot.seats.slice(0, n) as TestSeat[]) {
    seat.current = {} as Exchange;
    seat.busy = true;
    sup.assigned(slot);
  }
}

/** The dispatcher's seats end their requests, then tell the supervisor. */
function vacate(e: Env): void {
  for (const seat of e.slot.seats as TestSeat[]) {
    seat.current = undefined;
    seat.busy = false;
  }
  e.sup.released(e.slot);
}

const err = new ProxyError(ErrorCodes.REQUEST_TIMEOUT, 504, 'too long');

/**
 * The first cell fired after into() put a worker in its state: the one the test is about.
 * Cells fired on the way there (or as a consequence later) are not counted.
 */
const driven = new Set<string>();
let nextFireIsTested = false;
const realFire = Supervisor.prototype.fire;
Supervisor.prototype.fire = function (this: Supervisor, view, event, ctx) {
  if (nextFireIsTested) {
    nextFireIsTested = false;
    driven.add(`${view.state}+${event}`);
  }
  realFire.call(this, view, event, ctx);
};

/** Puts the one worker into `state` the way the pool would. */
function into(state: SlotState, over: Partial<PoolConfig> = {}): Env {
  const e = setup(over);
  if (state === 'starting') {
    nextFireIsTested = true;
    return e;
  }
  e.worker.becomeReady();
  if (state === 'retiring') {
    // A busy worker retired: it finishes its request first.
    occupy(e.sup, e.slot);
    e.sup.retire(e.slot, 'max_requests');
  } else if (state === 'stopping') e.sup.stop(e.slot, 'request_timeout', err);
  else if (state === 'gone') e.worker.exit(0, null);
  assert.equal(e.slot.state, state);
  e.calls.length = 0;
  e.killed.length = 0;
  nextFireIsTested = true;
  return e;
}

function fireIn(e: Env, event: SlotEvent): void {
  if (event === 'exit' || event === 'killed') {
    // The process's own exit event drives the cell; a gone worker has none left.
    if (e.worker.state !== 'exited') e.worker.exit(null, event === 'exit' ? 'SIGSEGV' : 'SIGKILL');
    else e.sup.fire(e.slot, event, {});
    return;
  }
  e.sup.fire(e.slot, event, { reason: 'scale_down', err });
}

test('starting + ready → up: offer (seats to the dispatcher, spawn time counted, ready line)', () => {
  const e = into('starting');
  e.clock.advance(42);
  e.worker.becomeReady();
  assert.equal(e.slot.state, 'up');
  assert.deepEqual(e.names(), ['offer']);
  assert.equal(e.calls[0]![1], e.slot);
  assert.equal(e.stats.spawnLatency?.count, 1);
  assert.equal(e.stats.spawnLatency?.maxMs, 42);
  assert.ok(e.lines.some((l) => l.msg === `worker ${e.worker.pid} ready after 42 ms`));
});

test('starting + retire → stopping: retire (the process is asked to retire, nothing offered)', () => {
  const e = into('starting');
  e.sup.retire(e.slot, 'scale_down');
  assert.equal(e.slot.state, 'stopping');
  assert.equal(e.worker.retireReason, 'scale_down');
  assert.equal(e.worker.state, 'stopping');
  assert.deepEqual(e.names(), ['withdraw']);
  assert.equal(e.stats.recycles['scale_down'], 1);
});

test('starting + stop → stopping: stop (requests cut, SIGTERM asked)', () => {
  const e = into('starting');
  e.sup.stop(e.slot, 'spawn_timeout', err);
  assert.equal(e.slot.state, 'stopping');
  assert.deepEqual(e.worker.stopCalls, ['spawn_timeout']);
  assert.deepEqual(e.names().slice(0, 2), ['cut', 'withdraw']);
  assert.deepEqual(e.killed, []);
});

test('starting + kill → stopping: kill (stop, then SIGKILL to its pid now)', () => {
  const e = into('starting');
  fireIn(e, 'kill');
  assert.equal(e.slot.state, 'stopping');
  assert.deepEqual(e.worker.stopCalls, ['scale_down']);
  assert.deepEqual(e.killed, [e.worker.pid]);
});

test('starting + exit → gone: start_failed (SPAWN_FAILED logged once, early crash counted, no offer)', () => {
  const e = into('starting', { maxChildren: 1 });
  e.setWaiting(2);
  e.worker.exit(1, null);
  assert.equal(e.slot.state, 'gone');
  assert.ok(!e.names().includes('offer'));
  assert.ok(e.names().includes('lost'));
  const line = e.lines.find((l) => l.code === ErrorCodes.SPAWN_FAILED);
  assert.ok(line, 'a SPAWN_FAILED line');
  // Nobody else may take the waiting requests: they are refused now.
  assert.ok(e.names().includes('refuseQueued'));
  assert.equal(e.sup.slots.has(e.slot), false);
  // The crash backs off the replacement: nothing spawned until the back-off ends.
  assert.equal(e.wf.workers.length, 1);
  e.clock.advance(1000);
  assert.equal(e.wf.workers.length, 2, 'respawned after the back-off');
});

test('up + retire → retiring: retire (idle seats withdrawn, process retires after its request)', () => {
  const e = into('up');
  occupy(e.sup, e.slot);
  e.sup.retire(e.slot, 'max_requests');
  assert.equal(e.slot.state, 'retiring');
  assert.deepEqual(e.names(), ['withdraw']);
  assert.equal(e.worker.state, 'draining');
  assert.deepEqual(e.worker.stopCalls, [], 'no signal while it serves');
  assert.ok(e.lines.some((l) => l.msg === `retiring worker ${e.worker.pid}: max_requests`));
});

test('up + stop → stopping: stop (its requests answered with the error, SIGTERM; replaced once gone)', () => {
  const e = into('up');
  e.sup.stop(e.slot, 'request_timeout', err);
  assert.equal(e.slot.state, 'stopping');
  assert.deepEqual(e.names().slice(0, 2), ['cut', 'withdraw']);
  assert.equal(e.calls[0]![1], e.slot);
  assert.deepEqual(e.worker.stopCalls, ['request_timeout']);
  assert.equal(e.stats.recycles['request_timeout'], 1);
  // static max_children 1: the stopping one holds its place until it exits, then is replaced.
  assert.equal(e.wf.workers.length, 1);
  e.clock.advance(1000);
  assert.equal(e.slot.state, 'gone');
  assert.equal(e.wf.workers.length, 2);
});

test('up + kill → stopping: kill (SIGKILL now)', () => {
  const e = into('up');
  fireIn(e, 'kill');
  assert.equal(e.slot.state, 'stopping');
  assert.deepEqual(e.killed, [e.worker.pid]);
  assert.ok(e.names().includes('cut'));
});

test('starting + killed → gone: bury (a kill from outside before ready: no SPAWN_FAILED, nothing refused, replaced at once)', () => {
  const e = into('starting', { maxChildren: 1 });
  e.setWaiting(2);
  e.worker.exit(null, 'SIGKILL');
  assert.equal(e.slot.state, 'gone');
  assert.deepEqual(e.names(), ['withdraw', 'lost', 'pump', 'checkDrained']);
  assert.equal(e.lines.find((l) => l.code === ErrorCodes.SPAWN_FAILED), undefined);
  assert.equal(e.wf.workers.length, 2, 'replaced at once, no back-off');
  assert.equal(e.stats.crashes, 1, 'counted as a crash in status');
  assert.equal(e.sup.failing, false);
});

test('up + killed → gone: bury (a kill from outside soon after start is replaced at once, not a breaker crash)', () => {
  const e = into('up', { crashLimit: 1 });
  occupy(e.sup, e.slot);
  e.worker.exit(null, 'SIGKILL');
  assert.equal(e.slot.state, 'gone');
  assert.deepEqual(e.names(), ['withdraw', 'lost', 'pump', 'checkDrained']);
  assert.equal(e.wf.workers.length, 2, 'replaced at once, no back-off');
  assert.equal(e.sup.failing, false);
});

for (const state of ['retiring', 'stopping'] as const) {
  // A worker fcgi-pm asked to go carries a reason, so its exit is never "outside"; the
  // cell is there so that no exit can leave a worker in the table.
  test(`${state} + killed → gone: bury`, () => {
    const e = into(state);
    const exit = { code: null, signal: 'SIGKILL' as const, reason: undefined, uptime: 10, ready: true, served: 1, busy: false };
    e.sup.fire(e.slot, 'killed', { exit, verdict: judgeExit({ exit, served: 'exact', selfRecycles: false }) });
    assert.equal(e.slot.state, 'gone');
    assert.ok(e.names().includes('lost'));
  });
}

test('up + exit → gone: bury (requests to failure handling, a crash long after start replaced at once, not a breaker crash)', () => {
  const e = into('up');
  e.clock.advance(60_000); // long past the early-exit window
  e.worker.exit(null, 'SIGSEGV');
  assert.equal(e.slot.state, 'gone');
  assert.deepEqual(e.names(), ['withdraw', 'lost', 'pump', 'checkDrained']);
  assert.equal(e.stats.crashes, 1);
  assert.equal(e.wf.workers.length, 2, 'replaced at once, no back-off');
  assert.equal(e.sup.failing, false);
});

test('retiring + idle → retiring: drained (its last request ended: kept-alive connections closed, SIGTERM with the retire reason)', () => {
  const e = into('retiring');
  const closed = e.closedIdle;
  assert.equal(e.worker.state, 'draining');
  vacate(e);
  assert.equal(e.slot.state, 'retiring');
  assert.equal(e.closedIdle - closed, 1, 'its kept-alive connections closed');
  assert.deepEqual(e.worker.stopCalls, ['max_requests']);
  assert.deepEqual(e.names(), [], 'nothing to withdraw or answer: it ran its last request');
  assert.equal(e.slot.workerState, 'stopping');
  e.clock.advance(1000);
  assert.equal(e.slot.state, 'gone');
  assert.equal(e.slot.exit?.reason, 'max_requests');
  assert.equal(e.slot.exit?.served, 1, 'the request it finished counts');
});

test('up + retire with no request running → retiring: retire (SIGTERM at once, no idle to wait for)', () => {
  const e = into('up');
  e.sup.retire(e.slot, 'idle_timeout');
  assert.equal(e.slot.state, 'retiring');
  assert.deepEqual(e.worker.stopCalls, ['idle_timeout']);
  assert.equal(e.slot.workerState, 'stopping');
});

test('the reason a worker is wanted gone: the first asked stays, a stop of one still serving replaces it', () => {
  const e = into('retiring'); // busy, retired for max_requests
  e.sup.retire(e.slot, 'idle_timeout');
  assert.equal(e.slot.reason, 'max_requests', 'a second retire does not change it');
  e.sup.stop(e.slot, 'request_timeout', err);
  assert.equal(e.slot.reason, 'request_timeout', 'the forced stop is what ends it');
  e.sup.fire(e.slot, 'shutdown', { reason: 'shutdown' });
  assert.equal(e.slot.reason, 'request_timeout', 'already on its way out');
  const idle = into('up');
  idle.sup.retire(idle.slot, 'idle_timeout');
  idle.sup.stop(idle.slot, 'request_timeout', err);
  assert.equal(idle.slot.reason, 'idle_timeout', 'retired with no request: already signalled, the reason stays');
});

test('what status shows of a worker is read from its table state and its seats', () => {
  const e = into('starting', { groupSize: 2, maxChildren: 2 });
  assert.equal(e.slot.workerState, 'spawning');
  e.worker.becomeReady();
  assert.equal(e.slot.workerState, 'idle');
  occupy(e.sup, e.slot);
  assert.equal(e.slot.workerState, 'busy', 'one seat of two busy: the process is busy');
  e.sup.retire(e.slot, 'drain');
  assert.equal(e.slot.workerState, 'draining');
  vacate(e);
  assert.equal(e.slot.workerState, 'stopping');
  e.clock.advance(1000);
  assert.equal(e.slot.workerState, 'exited');
  const t = into('starting');
  t.sup.stop(t.slot, 'request_timeout', err);
  assert.equal(t.slot.workerState, 'stopping');
});

test('a spawn that timed out shows stopping until it exits', () => {
  const e = setup();
  const slot = e.slot;
  assert.equal(slot.workerState, 'spawning');
  // A worker past spawn_timeout reports it, then stops itself and exits.
  e.worker.emit('spawnFailed', Object.assign(new Error('timed out'), { code: ErrorCodes.SPAWN_FAILED, errno: 'TIMEOUT' }));
  assert.equal(slot.workerState, 'stopping');
  assert.equal(slot.state, 'starting', 'still the table\'s starting: its exit is the start failure');
});

test('retiring + stop → stopping: stop (a retired worker past request_timeout is signalled)', () => {
  const e = into('retiring');
  e.sup.stop(e.slot, 'request_timeout', err);
  assert.equal(e.slot.state, 'stopping');
  assert.deepEqual(e.worker.stopCalls, ['request_timeout']);
  assert.ok(e.names().includes('cut'));
});

test('retiring + kill → stopping: kill', () => {
  const e = into('retiring');
  fireIn(e, 'kill');
  assert.deepEqual(e.killed, [e.worker.pid]);
  assert.equal(e.slot.state, 'stopping');
});

test('retiring + exit → gone: bury', () => {
  const e = into('retiring');
  e.worker.exit(0, null);
  assert.equal(e.slot.state, 'gone');
  assert.ok(e.names().includes('lost'));
});

test('stopping + kill → stopping: kill (a SIGTERMed worker over max_memory_hard gets SIGKILL)', () => {
  const e = into('stopping');
  fireIn(e, 'kill');
  assert.equal(e.slot.state, 'stopping');
  assert.deepEqual(e.killed, [e.worker.pid]);
});

test('stopping + exit → gone: bury', () => {
  const e = into('stopping');
  e.worker.exit(0, null);
  assert.equal(e.slot.state, 'gone');
  assert.deepEqual(e.names().slice(0, 2), ['withdraw', 'lost']);
});

for (const state of ['up', 'retiring', 'stopping'] as const) {
  test(`${state} + suspect → ${state}: hold (one wait of EXIT_GRACE_MS for the exit, then grace)`, () => {
    const e = into(state);
    e.sup.suspect(e.slot);
    e.sup.suspect(e.slot); // a second held failure shares the wait
    assert.equal(e.slot.state, state);
    assert.deepEqual(e.names(), [], 'nothing answered yet');
    e.clock.advance(EXIT_GRACE_MS - 1);
    assert.deepEqual(e.names(), []);
    e.clock.advance(1);
    assert.deepEqual(e.names(), ['unhold'], 'one grace for both');
  });

  test(`${state} + grace → ${state}: unhold (held failures answered; one held later re-arms the wait)`, () => {
    const e = into(state);
    unholdAnswers = [false];
    e.sup.fire(e.slot, 'grace', {});
    assert.deepEqual(e.names(), ['unhold']);
    e.clock.advance(EXIT_GRACE_MS);
    assert.deepEqual(e.names(), ['unhold', 'unhold'], 'the one still waiting got its own grace');
    assert.equal(e.slot.state, state);
  });
}

test('up + suspect, then exit → gone: bury, and the wait ends without a grace', () => {
  const e = into('up');
  e.sup.suspect(e.slot);
  e.worker.exit(null, 'SIGSEGV');
  assert.equal(e.slot.state, 'gone');
  e.clock.advance(EXIT_GRACE_MS * 2);
  assert.ok(!e.names().includes('unhold'), 'the exit answered the held failures (lost), no grace after it');
  assert.ok(e.names().includes('lost'));
});

for (const state of ['starting', 'up', 'retiring', 'stopping'] as const) {
  test(`${state} + shutdown → stopping: shut (SIGTERM asked with the pool's reason; no hook, no recycle counted, no spawn)`, () => {
    const e = into(state);
    const spawned = e.wf.workers.length;
    const stops = e.worker.stopCalls.length;
    const recycles = { ...e.stats.recycles };
    const ctx: SlotEventContext = { reason: 'shutdown' };
    e.sup.fire(e.slot, 'shutdown', ctx);
    assert.equal(e.slot.state, 'stopping');
    // A worker already stopped keeps the reason it was stopped for; any other goes for shutdown.
    assert.deepEqual(e.worker.stopCalls.slice(stops), [state === 'stopping' ? 'request_timeout' : 'shutdown']);
    assert.deepEqual(e.names(), []);
    assert.deepEqual(e.killed, []);
    assert.deepEqual(e.stats.recycles, recycles);
    assert.equal(e.wf.workers.length, spawned);
  });
}

test('shutdown fires the table for every worker: each is stopping, and all are gone when it resolves', async () => {
  const e = into('up', { maxChildren: 3 });
  for (const w of e.wf.workers) if (w.state === 'spawning') w.becomeReady();
  const slots = [...e.sup.slots];
  assert.equal(slots.length, 3);
  const done = e.sup.shutdown('shutdown');
  assert.deepEqual(slots.map((s) => s.state), ['stopping', 'stopping', 'stopping']);
  e.clock.advance(1000); // the fake workers exit a second after their stop
  await done;
  assert.deepEqual(slots.map((s) => s.state), ['gone', 'gone', 'gone']);
  assert.equal(e.sup.slots.size, 0);
});

test('up + handover → gone: hand_on (seats withdrawn, idle connections closed, out of the live set, never signalled)', async () => {
  const e = into('up');
  nextFireIsTested = true;
  const handed = await e.sup.shutdown('shutdown', true);
  assert.equal(e.slot.state, 'gone');
  assert.deepEqual(handed.map((h) => h.pid), [e.worker.pid]);
  assert.ok(e.worker.handedOver);
  assert.deepEqual(e.worker.stopCalls, [], 'a handed worker is not signalled');
  assert.deepEqual(e.names(), ['withdraw']);
  assert.equal(e.closedIdle, 1);
  assert.equal(e.sup.slots.size, 0);
});

test('shutdown with handOn: an idle worker that is up is handed on with its request count, a busy one is stopped as usual', async () => {
  const e = into('up', { maxChildren: 2 });
  for (const w of e.wf.workers) w.becomeReady();
  const [idle, busy] = [...e.sup.slots];
  occupy(e.sup, idle!, 1);
  (idle!.seats[0] as TestSeat).busy = false;
  occupy(e.sup, busy!);
  const done = e.sup.shutdown('shutdown', true);
  assert.equal(busy!.state, 'stopping');
  e.clock.advance(1000);
  const handed = await done;
  assert.deepEqual(handed.map((h) => [h.pid, h.requests]), [[idle!.pid, 1]]);
  assert.equal(e.wf.workers[1]!.stopCalls.length, 1);
  assert.equal(e.sup.slots.size, 0);
});

test('start with adopt: a handed worker becomes a slot at once (its requests kept, no spawn counted, an adopted line), and only the rest are spawned', async () => {
  const clock = new FakeClock();
  const wf = new FakeWorkerFactory(clock);
  wf.plan = { readyAfter: 10 };
  const { logger, lines } = recordingLogger();
  const cfg = poolConfig({ command: ['/fake/app'], pm: 'static', maxChildren: 2 });
  const adopted: number[] = [];
  const hooks = { waiting: () => 0, poolState: () => 'running' as const, seats: (_s: SlotView, n: number) => Array.from({ length: n }, () => ({ busy: false, inIdle: false, idleSince: 0, current: undefined, busySince: 0 })), connect: () => ({ closeIdle: () => undefined }) as unknown as Endpoint, offer: () => undefined, withdraw: () => undefined, cut: () => undefined, lost: () => undefined, refuseQueued: () => undefined, idleWorkers: () => [], unhold: () => true, pump: () => undefined, checkDrained: () => undefined };
  const stats = new PoolStats();
  const sup = new Supervisor(cfg, {
    logger, clock, spec: buildWorkerSpec(cfg, '/tmp'), workerFactory: wf.create, workerLogger: logger, random: () => 0,
    workerAdopter: (h, spec, l, id, owner) => {
      adopted.push(h.pid);
      const w = wf.create(spec, l, id, owner);
      process.nextTick(() => (w as FakeWorker).becomeReady());
      return w;
    },
  }, hooks, stats);
  const started = sup.start({ seats: 2, step: 1, adopt: [{ pid: 4242, socket: '/fake/a.sock', out: -1, err: -1, requests: 7, startedAt: Date.now() - 5000, readyAt: Date.now() - 4900 }] });
  await new Promise((r) => process.nextTick(r));
  await new Promise((r) => setImmediate(r));
  clock.advance(10);
  await started;
  assert.deepEqual(adopted, [4242]);
  const slots = [...sup.slots];
  assert.equal(slots.length, 2, 'one adopted, one spawned for static max_children 2');
  const a = slots.find((s) => s.requests === 7);
  assert.ok(a !== undefined && a.state === 'up', 'the adopted slot is up with its requests');
  assert.ok(clock.now() - a.spawnedAt >= 4900, 'its age is kept');
  assert.equal(stats.spawnLatency?.count, 1, 'only the spawned one counts as a spawn');
  assert.ok(lines.some((l) => /adopted from before the upgrade/.test(String(l.msg))));
});

// Every other cell changes nothing: no hook, no signal, no spawn, same state.
for (const state of SLOT_STATES) {
  for (const event of SLOT_EVENTS) {
    const cell = SUPERVISOR_TABLE[state][event];
    if (cell.action !== 'none') continue;
    test(`${state} + ${event} → ${cell.next}: none (no hook, no signal, no spawn)`, () => {
      const e = into(state);
      const spawned = e.wf.workers.length;
      const stops = e.worker.stopCalls.length;
      const reason = e.worker.retireReason;
      fireIn(e, event);
      assert.equal(e.slot.state, state);
      assert.deepEqual(e.names(), []);
      assert.deepEqual(e.killed, []);
      assert.equal(e.wf.workers.length, spawned);
      assert.equal(e.worker.stopCalls.length, stops);
      assert.equal(e.worker.retireReason, reason);
    });
  }
}

test('a group (group_size 4) is spawned as one worker with four seats; max_children counts seats', () => {
  const e = setup({ groupSize: 4, maxChildren: 8 });
  assert.equal(e.sup.slotsPerWorker, 4);
  assert.equal(e.wf.workers.length, 2, 'static max_children 8 = two groups of 4');
  assert.equal(e.slot.seats.length, 4);
  assert.equal(e.sup.startingSeats(), 8);
});

test('the load signal in seats: a group with 1 of 4 seats busy counts 3 idle, and waiting requests ask for whole groups', () => {
  const e = setup({ groupSize: 4, maxChildren: 8, pm: 'ondemand' });
  assert.equal(e.wf.workers.length, 0);
  e.setWaiting(5);
  e.sup.scale();
  assert.equal(e.wf.workers.length, 2, '5 waiting requests need two groups of 4');
  for (const w of e.wf.workers) w.becomeReady();
  const [a] = [...e.sup.slots];
  occupy(e.sup, a!);
  e.setWaiting(0);
  assert.deepEqual(e.sup.counts(), { idle: 7, busy: 1, spawning: 0, retiring: 0, queued: 0 });
});


test('every cell of SUPERVISOR_TABLE is driven by a test above', () => {
  const missing: string[] = [];
  for (const state of SLOT_STATES) for (const event of SLOT_EVENTS) if (!driven.has(`${state}+${event}`)) missing.push(`${state}+${event}`);
  assert.deepEqual(missing, []);
});
