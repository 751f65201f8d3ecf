/**
 * The Dispatcher's seat table, cell by cell, on a real SpawnedPool with fake workers,
 * fake endpoints and a fake clock: each test puts one seat in a state the way the pool
 * would (worker starting, ready, a request running, a failure held, the worker exited
 * under it), brings about one event, and asserts the ACTION taken (the answer the
 * client got, the endpoint run or closed, the idle stack, the timers, the worker
 * retired) as well as the next state.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ErrorCodes, ProxyError } from '../../src/errors.js';
import type { PoolConfig } from '../../src/config/types.js';
import { closedEarly, protocolFault } from '../../src/upstream/failures.js';
import type { UpstreamOutcome } from '../../src/upstream/types.js';
import { EXIT_GRACE_MS, SEAT_EVENTS, SEAT_STATES, SEAT_TABLE, type SeatEvent, type SeatState } from '../../src/pool/spawned/seat-table.js';
import type { Seat } from '../../src/pool/spawned/seats.js';
import type { Slot, SlotView } from '../../src/pool/workers/slot.js';
import { makeRequest, type FakeEndpoint, type TestRequest } from './helpers.js';

/** FakeClock's timer handle: whether it was cleared. */
interface FakeTimer {
  cleared: boolean;
}
import { closed, refused, setup } from './spawned-harness.js';

/** The cells the tests below drove, checked against the table at the end. */
const tested = new Set<string>();
const mark = (state: SeatState, event: SeatEvent): void => void tested.add(`${state}+${event}`);

const cutErr = new ProxyError(ErrorCodes.REQUEST_TIMEOUT, 504, 'cut by the test');

/** One static worker (max_children 1) that becomes ready only when told; its one seat put into `state`. */
function into(state: SeatState, over: Partial<PoolConfig> = {}) {
  const p = setup({ pm: 'static', maxChildren: 1, queueTimeout: 60_000, ...over });
  p.wf.plan = { readyAfter: undefined };
  void p.pool.start();
  const w = p.wf.workers[0]!;
  const slot: SlotView = [...p.pool.supervisor.slots][0]!;
  let seat = slot.seats[0] as Seat;
  let req: TestRequest | undefined;
  if (state !== 'closed') {
    w.becomeReady();
    if (state !== 'free') {
      req = p.send(1)[0]!;
      seat = slot.seats.find((s) => s.current === req!.ex) as Seat; // a group's seat on top of the stack
      if (state === 'held') p.ep(w).finish(closed);
      else if (state === 'ending') w.exit(null, 'SIGKILL');
    }
  }
  assert.equal(seat.state, state);
  return {
    ...p,
    w,
    slot,
    seat,
    req,
    /** The dispatcher's idle stack (white box: the table's list/unlist act on it). */
    get idle(): readonly Seat[] {
      return (p.pool as unknown as { idle: Seat[] }).idle;
    },
  };
}

test('closed + free → free: list (a ready worker\'s seat goes on the idle stack; the next request runs on it at once)', () => {
  const e = into('closed');
  e.clock.advance(30);
  e.w.becomeReady();
  mark('closed', 'free');
  assert.equal(e.seat.state, 'free');
  assert.deepEqual(e.idle, [e.seat]);
  assert.equal(e.seat.idleSince, e.clock.now());
  const [r] = e.send(1);
  assert.equal(r!.ex.workerPid, e.w.pid);
});

test('closed + free → free: list (after a request; the idle timer counts from then)', () => {
  const e = setup({ pm: 'ondemand', maxChildren: 1, idleTimeout: 1000 });
  e.wf.plan = { readyAfter: undefined };
  const [r] = e.send(1); // spawns the worker: its seat is closed until ready
  const w = e.wf.workers[0]!;
  const seat = [...e.pool.supervisor.slots][0]!.seats[0] as Seat;
  assert.equal(seat.state, 'closed');
  w.becomeReady();
  e.clock.advance(500);
  e.ep(w).finish();
  assert.equal(r!.sink.status, 200);
  assert.equal(seat.state, 'free');
  assert.equal(seat.idleSince, e.clock.now());
  e.clock.advance(999);
  assert.equal(w.state, 'idle', 'idle_timeout counts from when the seat was listed');
  e.clock.advance(1);
  assert.equal(w.retireReason, 'idle_timeout');
});

test('closed + assign → running: run (a request waiting when the worker becomes ready goes to its seat, on its endpoint)', () => {
  const e = into('closed');
  const [r] = e.send(1);
  assert.equal(e.pool.snapshot().queued, 1);
  e.w.becomeReady();
  mark('closed', 'assign');
  assert.equal(e.seat.state, 'running');
  assert.equal(e.seat.current, r!.ex);
  assert.deepEqual(e.idle, [], 'never listed');
  assert.equal(e.ep(e.w).runs, 1);
  assert.equal(r!.ex.workerPid, e.w.pid);
  assert.equal(e.w.state, 'busy');
  assert.equal(e.slot.requests, 1);
  assert.equal(e.pool.snapshot().active, 1);
});

test('free + assign → running: take (off the idle stack, run on the endpoint; the next request waits)', () => {
  const e = into('free');
  assert.deepEqual(e.idle, [e.seat]);
  const [a, b] = e.send(2);
  mark('free', 'assign');
  assert.equal(e.seat.state, 'running');
  assert.deepEqual(e.idle, []);
  assert.equal(e.seat.current, a!.ex);
  assert.equal(e.ep(e.w).runs, 1);
  assert.equal(b!.ex.workerPid, undefined);
  assert.equal(e.pool.snapshot().queued, 1);
});

test('free + withdraw → closed: unlist (a retired worker\'s seat leaves the idle stack and gets no request)', () => {
  const e = into('free');
  e.pool.supervisor.retire(e.slot, 'scale_down');
  mark('free', 'withdraw');
  assert.equal(e.seat.state, 'closed');
  assert.deepEqual(e.idle, []);
  const [r] = e.send(1);
  assert.equal(e.ep(e.w).runs, 0);
  assert.equal(r!.ex.workerPid, undefined);
});

test('free + withdraw → closed: unlist, also from under the top of the stack', () => {
  const e = into('free', { maxChildren: 2 });
  const w2 = e.wf.workers[1]!;
  w2.becomeReady(); // w2's seat on top, e's under it
  const seat2 = [...e.pool.supervisor.slots][1]!.seats[0] as Seat;
  assert.deepEqual(e.idle, [e.seat, seat2]);
  e.pool.supervisor.retire(e.slot, 'scale_down');
  assert.equal(e.seat.state, 'closed');
  assert.deepEqual(e.idle, [seat2]);
});

test('free + withdraw → closed: unlist (the top seat\'s worker is past max_lifetime: retired, the request goes to the next seat)', () => {
  const e = into('free', { maxChildren: 2, maxLifetime: 5000 });
  const w2 = e.wf.workers[1]!;
  w2.becomeReady();
  e.clock.advance(1000);
  w2.exit(null, 'SIGKILL'); // replaced at once: w3 is younger than e.w
  const w3 = e.wf.workers[2]!;
  w3.becomeReady();
  const seat3 = [...e.pool.supervisor.slots].find((s) => s.worker === w3)!.seats[0] as Seat;
  // e.w's seat goes on top: it finishes last.
  e.send(2);
  e.ep(w3).finish();
  e.ep(e.w).finish();
  assert.deepEqual(e.idle, [seat3, e.seat]);
  e.clock.advance(4000); // e.w is past max_lifetime, w3 not yet
  const [r] = e.send(1);
  assert.equal(e.w.retireReason, 'max_lifetime');
  assert.equal(e.seat.state, 'closed');
  assert.equal(r!.ex.workerPid, w3.pid);
  assert.deepEqual(e.idle, []);
});

test('running + outcome → closed: end (answered; a live worker\'s seat then takes the next request, or is listed)', () => {
  const e = into('running');
  const [b] = e.send(1);
  e.ep(e.w).finish();
  mark('running', 'outcome');
  assert.equal(e.req!.sink.status, 200);
  assert.equal(e.pool.snapshot().completed, 1);
  assert.equal(e.seat.current, b!.ex, 'the seat took the waiting request');
  e.ep(e.w).finish();
  assert.equal(e.seat.state, 'free');
  assert.deepEqual(e.idle, [e.seat]);
});

test('running + outcome → closed: end (and stays closed when its worker is recycled: max_requests)', () => {
  const e = into('running', { maxRequests: 1 });
  e.ep(e.w).finish();
  assert.equal(e.req!.sink.status, 200);
  assert.equal(e.seat.state, 'closed');
  assert.deepEqual(e.idle, []);
  assert.equal(e.w.retireReason, 'max_requests');
});

test('running + outcome → closed: end (a failure that says nothing of the worker is answered at once)', () => {
  const e = into('running');
  e.ep(e.w).finish(protocolFault('unix:/fake/w1.sock', 'a bad record'));
  assert.equal(e.req!.sink.error?.code, ErrorCodes.BACKEND_PROTOCOL);
  assert.equal(e.seat.state, 'free');
});

test('running + suspect → held: hold (the failure waits, the supervisor\'s one timer for the exit armed)', () => {
  const e = into('running');
  const pending = e.clock.pending;
  e.ep(e.w).finish(closed);
  mark('running', 'suspect');
  assert.equal(e.seat.state, 'held');
  assert.equal(e.req!.sink.done, false, 'not answered yet');
  assert.equal(e.seat.held, closed);
  assert.equal(e.seat.heldAt, e.clock.now());
  assert.notEqual((e.slot as Slot).graceTimer, undefined, 'the supervisor waits for the exit');
  assert.equal(e.clock.pending, pending + 1);
  assert.equal(e.pool.snapshot().active, 1);
});

test('running + exit → ending: await_report (the endpoint may still report; the seat waits EXIT_GRACE_MS for it)', () => {
  const e = into('running');
  e.w.exit(null, 'SIGKILL');
  mark('running', 'exit');
  assert.equal(e.seat.state, 'ending');
  assert.equal(e.req!.sink.done, false);
  assert.notEqual(e.seat.exitTimer, undefined);
  assert.equal(e.ep(e.w).destroyed, false, 'the endpoint is left to report');
  e.clock.advance(EXIT_GRACE_MS - 1);
  assert.equal(e.req!.sink.done, false);
});

for (const state of ['running', 'held'] as const) {
  test(`${state} + cut → closed: cut (a worker stopped under its request: answered with the stop's error now, nothing after)`, () => {
    const e = into(state);
    e.pool.supervisor.stop(e.slot, 'request_timeout', cutErr);
    mark(state, 'cut');
    assert.equal(e.seat.state, 'closed');
    assert.equal(e.req!.sink.error, cutErr);
    assert.equal(e.seat.current, undefined);
    assert.equal(e.seat.held, undefined);
    assert.equal(e.pool.snapshot().active, 0);
    // The endpoint's late report and the end of the supervisor's wait change nothing.
    if (e.ep(e.w).active > 0) e.ep(e.w).finish(closed);
    e.clock.advance(EXIT_GRACE_MS);
    assert.equal(e.req!.sink.error, cutErr);
  });
}

test('held + exit → closed: answer_held (the held failure, told how the worker went: 502 WORKER_CRASHED at once)', () => {
  const e = into('held');
  e.w.exit(null, 'SIGKILL');
  mark('held', 'exit');
  assert.equal(e.seat.state, 'closed');
  assert.equal(e.req!.sink.status, 502);
  assert.equal(e.req!.sink.error?.code, ErrorCodes.WORKER_CRASHED);
  assert.match(e.req!.sink.error!.message, /killed by SIGKILL while serving \/srv\/app\/index.php/);
  assert.equal(e.seat.held, undefined);
  assert.equal(e.ep(e.w).destroyed, true, 'no seat waits on the dead worker\'s endpoint');
});

test('held + exit → closed: answer_held (a request that never reached a worker exiting cleanly goes to another worker)', () => {
  const e = into('running', { maxChildren: 2 });
  const w2 = e.wf.workers[1]!;
  e.ep(e.w).finish(refused);
  assert.equal(e.seat.state, 'held');
  e.w.exit(0, null); // php-cgi after PHP_FCGI_MAX_REQUESTS
  assert.equal(e.seat.state, 'closed');
  assert.equal(e.req!.sink.done, false);
  assert.equal(e.pool.snapshot().queued, 1, 'first in line for the next seat');
  w2.becomeReady();
  assert.equal(e.req!.ex.workerPid, w2.pid);
});

test('held + grace → closed: give_up (the worker lives: a plain failure is answered, the worker serves on)', () => {
  const e = into('held');
  e.clock.advance(EXIT_GRACE_MS - 1);
  assert.equal(e.req!.sink.done, false);
  e.clock.advance(1);
  mark('held', 'grace');
  assert.equal(e.req!.sink.error?.code, ErrorCodes.BACKEND_CLOSED);
  assert.equal(e.w.state, 'idle');
  assert.equal(e.seat.state, 'free', 'closed, then listed again: its worker serves on');
});

test('held + grace → closed: give_up (alive but unreachable: the worker is replaced, its request goes to the replacement)', () => {
  const e = into('running');
  e.ep(e.w).finish(refused);
  assert.equal(e.seat.state, 'held');
  e.clock.advance(EXIT_GRACE_MS);
  assert.equal(e.seat.state, 'closed');
  assert.equal(e.req!.sink.done, false);
  assert.equal(e.w.retireReason, 'scale_down');
  assert.ok(e.lines.some((l) => l.level === 40 && l.code === ErrorCodes.BACKEND_UNREACHABLE && /alive but unreachable/.test(l.msg)));
  e.clock.advance(5); // it exits; the static pool spawns the replacement
  const w2 = e.wf.workers[1]!;
  w2.becomeReady();
  assert.equal(e.req!.ex.workerPid, w2.pid);
  e.ep(w2).finish();
  assert.equal(e.req!.sink.status, 200);
});

test('held + grace: a failure held later than the grace\'s start waits on (the supervisor\'s wait re-armed)', () => {
  const e = into('held', { groupSize: 2, maxChildren: 2 });
  e.clock.advance(100);
  const [b] = e.send(1); // the group's second seat
  const seat2 = e.slot.seats.find((s) => s !== e.seat) as Seat;
  assert.equal(seat2.current, b!.ex);
  e.ep(e.w).finish(closed);
  assert.equal(seat2.state, 'held');
  e.clock.advance(EXIT_GRACE_MS - 100);
  assert.equal(e.seat.state, 'free', 'the first one\'s grace is over');
  assert.equal(seat2.state, 'held');
  assert.equal(b!.sink.done, false);
  // The supervisor's one timer per worker is armed again, a whole EXIT_GRACE_MS.
  e.clock.advance(EXIT_GRACE_MS - 1);
  assert.equal(seat2.state, 'held');
  e.clock.advance(1);
  assert.equal(b!.sink.error?.code, ErrorCodes.BACKEND_CLOSED);
});

test('ending + outcome → closed: end (the endpoint\'s report after the exit: a finished response is delivered, the exit grace dropped)', () => {
  const e = into('ending');
  const timer = e.seat.exitTimer as FakeTimer;
  e.ep(e.w).finish();
  mark('ending', 'outcome');
  assert.equal(e.seat.state, 'closed');
  assert.equal(e.req!.sink.status, 200);
  assert.equal(e.seat.exitTimer, undefined);
  assert.equal(timer.cleared, true);
  assert.equal(e.ep(e.w).destroyed, true, 'the dead worker\'s endpoint is closed once no seat waits on it');
  e.clock.advance(EXIT_GRACE_MS);
  assert.equal(e.req!.sink.error, undefined, 'no exit grace after the report');
});

test('ending + suspect → closed: end (a closed connection after the exit is not held again: 502 WORKER_CRASHED at once)', () => {
  const e = into('ending');
  const timer = e.seat.exitTimer as FakeTimer;
  e.ep(e.w).finish(closed);
  mark('ending', 'suspect');
  assert.equal(e.seat.state, 'closed');
  assert.equal(e.req!.sink.error?.code, ErrorCodes.WORKER_CRASHED);
  assert.equal(e.seat.exitTimer, undefined);
  assert.equal(timer.cleared, true);
});

test('ending + exit_grace → ending: close (the endpoint is closed; without a report the request ends as closed: 502 WORKER_CRASHED)', () => {
  const e = into('ending');
  e.clock.advance(EXIT_GRACE_MS);
  mark('ending', 'exit_grace');
  assert.equal(e.ep(e.w).destroyed, true);
  assert.equal(e.req!.sink.error?.code, ErrorCodes.WORKER_CRASHED);
  assert.equal(e.seat.state, 'closed');
});

test('ending + exit_grace → ending: close (closing the endpoint makes it report, and its report is the answer)', () => {
  const e = into('running', { maxChildren: 2 });
  const ep = e.ep(e.w);
  // A real endpoint reports its running requests when destroyed: here, the response had begun.
  const begun = closedEarly('unix:/fake/w1.sock', undefined, true, { failure: 'closed', headSent: true, responseBytes: true, reused: false, reset: false, idempotent: false });
  ep.destroy = () => {
    ep.destroyed = true;
    while (ep.active > 0) ep.finish(begun);
  };
  e.wf.workers[1]!.becomeReady(); // another worker a rewound request would go to
  // A clean exit: without the endpoint's word, "closed before any response byte" would go elsewhere.
  e.w.exit(0, null);
  assert.equal(e.seat.state, 'ending');
  e.clock.advance(EXIT_GRACE_MS);
  assert.equal(e.seat.state, 'closed');
  assert.equal(e.req!.sink.error?.code, ErrorCodes.WORKER_CRASHED, 'the application had started answering: not run twice');
  assert.equal(e.req!.ex.workerPid, e.w.pid);
});

test('ending + cut → closed: cut (answered with the error, the exit grace dropped)', () => {
  const e = into('ending');
  const timer = e.seat.exitTimer as FakeTimer;
  e.pool.fire(e.seat, 'cut', cutErr);
  mark('ending', 'cut');
  assert.equal(e.seat.state, 'closed');
  assert.equal(e.req!.sink.error, cutErr);
  assert.equal(e.seat.exitTimer, undefined);
  assert.equal(timer.cleared, true);
  assert.equal(e.ep(e.w).destroyed, false, 'the exit grace did not run');
  e.clock.advance(EXIT_GRACE_MS);
  assert.equal(e.ep(e.w).destroyed, false);
  assert.equal(e.req!.sink.error, cutErr);
});

// Every other cell changes nothing: same state, no answer, nothing run, listed or closed, no timer.
const outcomes: Record<'outcome' | 'suspect', UpstreamOutcome> = { outcome: { kind: 'done' }, suspect: closed };
for (const state of SEAT_STATES) {
  for (const event of SEAT_EVENTS) {
    const cell = SEAT_TABLE[state][event];
    if (cell.action !== 'none') continue;
    test(`${state} + ${event} → ${cell.next}: none (no answer, no run, no listing, no timer)`, () => {
      const e = into(state);
      mark(state, event);
      const idle = [...e.idle];
      const runs = (): number => (e.ep(e.w) as FakeEndpoint | undefined)?.runs ?? 0; // none before ready
      const ran = runs();
      const pending = e.clock.pending;
      const spawned = e.wf.workers.length;
      const fresh = makeRequest({ SCRIPT_FILENAME: '/srv/app/other.php' });
      const lines = e.lines.length;
      switch (event) {
        case 'assign':
          e.pool.fire(e.seat, event, fresh.ex);
          break;
        case 'outcome':
        case 'suspect':
          e.pool.fire(e.seat, event, outcomes[event]);
          break;
        case 'cut':
          e.pool.fire(e.seat, event, cutErr);
          break;
        default:
          e.pool.fire(e.seat, event);
      }
      assert.equal(e.seat.state, state);
      assert.deepEqual(e.idle, idle);
      assert.equal(runs(), ran);
      assert.equal(e.clock.pending, pending);
      assert.equal(e.wf.workers.length, spawned);
      assert.equal(fresh.ex.workerPid, undefined);
      assert.equal(fresh.sink.done, false);
      assert.equal(e.req?.sink.done ?? false, false);
      assert.equal(e.lines.length, lines);
    });
  }
}

test('every cell of SEAT_TABLE is driven by a test above', () => {
  const missing: string[] = [];
  for (const state of SEAT_STATES) for (const event of SEAT_EVENTS) if (!tested.has(`${state}+${event}`)) missing.push(`${state}+${event}`);
  assert.deepEqual(missing, []);
});
