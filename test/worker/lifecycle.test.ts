import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  LIFECYCLE_EVENTS,
  LifecycleError,
  TRANSITIONS,
  WORKER_STATES,
  listTransitions,
  nextState,
  transition,
  type Lifecycle,
  type LifecycleEvent,
} from '../../src/worker/lifecycle.js';
import type { WorkerState } from '../../src/worker/types.js';

// Written out independently of the table: the table must say exactly this.
const EXPECTED: Array<[WorkerState, LifecycleEvent, WorkerState]> = [
  ['spawning', 'ready', 'idle'],
  ['spawning', 'retire', 'stopping'],
  ['spawning', 'stop', 'stopping'],
  ['spawning', 'spawn_timeout', 'stopping'],
  ['spawning', 'exit', 'exited'],
  ['idle', 'assign', 'busy'],
  ['idle', 'retire', 'stopping'],
  ['idle', 'stop', 'stopping'],
  ['idle', 'exit', 'exited'],
  ['busy', 'release', 'idle'],
  ['busy', 'retire', 'draining'],
  ['busy', 'stop', 'stopping'],
  ['busy', 'exit', 'exited'],
  ['draining', 'release', 'stopping'],
  ['draining', 'retire', 'draining'],
  ['draining', 'stop', 'stopping'],
  ['draining', 'exit', 'exited'],
  ['stopping', 'release', 'stopping'],
  ['stopping', 'retire', 'stopping'],
  ['stopping', 'stop', 'stopping'],
  ['stopping', 'exit', 'exited'],
  ['exited', 'release', 'exited'],
  ['exited', 'retire', 'exited'],
  ['exited', 'stop', 'exited'],
];

const key = (t: readonly string[]): string => t.join(' ');

test('the table holds exactly the documented transitions', () => {
  assert.deepEqual(listTransitions().map(key).sort(), EXPECTED.map(key).sort());
});

test('every listed transition gives the listed next state', () => {
  for (const [from, ev, to] of EXPECTED) {
    const r = transition({ state: from, reason: undefined }, ev, 'shutdown');
    assert.equal(r.state, to, `${from} --${ev}-->`);
    assert.equal(nextState(from, ev), to);
  }
});

test('every other (state, event) pair throws a LifecycleError naming both', () => {
  const legal = new Set(EXPECTED.map(([s, e]) => `${s} ${e}`));
  let illegal = 0;
  for (const s of WORKER_STATES) {
    for (const e of LIFECYCLE_EVENTS) {
      if (legal.has(`${s} ${e}`)) continue;
      illegal++;
      assert.equal(nextState(s, e), undefined);
      assert.throws(
        () => transition({ state: s, reason: undefined }, e),
        (err: unknown) => err instanceof LifecycleError && err.state === s && err.event === e && err.message.includes(`"${e}" in state "${s}"`),
      );
    }
  }
  assert.equal(illegal, WORKER_STATES.length * LIFECYCLE_EVENTS.length - EXPECTED.length);
  // The ones that matter most: no double exit, no work for a worker that is not idle.
  assert.throws(() => transition({ state: 'exited', reason: undefined }, 'exit'), LifecycleError);
  assert.throws(() => transition({ state: 'busy', reason: undefined }, 'assign'), LifecycleError);
  assert.throws(() => transition({ state: 'draining', reason: 'max_requests' }, 'assign'), LifecycleError);
  assert.throws(() => transition({ state: 'spawning', reason: undefined }, 'assign'), LifecycleError);
  assert.throws(() => transition({ state: 'idle', reason: undefined }, 'release'), LifecycleError);
});

test('table rows cover every state', () => {
  assert.deepEqual(Object.keys(TRANSITIONS).sort(), [...WORKER_STATES].sort());
});

test('the retire reason is kept beside the state from retire to exit', () => {
  let lc: Lifecycle = { state: 'spawning', reason: undefined };
  lc = transition(lc, 'ready');
  lc = transition(lc, 'assign');
  assert.equal(lc.reason, undefined);
  lc = transition(lc, 'retire', 'max_requests');
  assert.deepEqual(lc, { state: 'draining', reason: 'max_requests' });
  lc = transition(lc, 'retire', 'idle_timeout'); // the first ask stays
  assert.deepEqual(lc, { state: 'draining', reason: 'max_requests' });
  lc = transition(lc, 'release');
  assert.deepEqual(lc, { state: 'stopping', reason: 'max_requests' });
  lc = transition(lc, 'stop', 'shutdown'); // already on its way out
  lc = transition(lc, 'exit');
  assert.deepEqual(lc, { state: 'exited', reason: 'max_requests' });
  lc = transition(lc, 'retire', 'reload');
  assert.deepEqual(lc, { state: 'exited', reason: 'max_requests' });
});

test('stop on a draining worker replaces the reason (the forced stop is what ends it)', () => {
  const lc = transition({ state: 'draining', reason: 'max_requests' }, 'stop', 'request_timeout');
  assert.deepEqual(lc, { state: 'stopping', reason: 'request_timeout' });
});

test('spawn_timeout records itself as the reason; an exit without retire has none', () => {
  assert.deepEqual(transition({ state: 'spawning', reason: undefined }, 'spawn_timeout'), { state: 'stopping', reason: 'spawn_timeout' });
  assert.deepEqual(transition({ state: 'busy', reason: undefined }, 'exit'), { state: 'exited', reason: undefined });
});

test('retire on an idle worker stops it; on a busy one it drains', () => {
  assert.deepEqual(transition({ state: 'idle', reason: undefined }, 'retire', 'idle_timeout'), { state: 'stopping', reason: 'idle_timeout' });
  assert.deepEqual(transition({ state: 'busy', reason: undefined }, 'retire', 'reload'), { state: 'draining', reason: 'reload' });
});
