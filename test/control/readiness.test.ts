import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readiness } from '../../src/control/readiness.js';
import { zeroCounters } from '../../src/pool/counters.js';
import type { PoolSnapshot } from '../../src/pool/types.js';

const snap = (over: Partial<PoolSnapshot>): PoolSnapshot => ({
  ...zeroCounters(),
  name: 'p', kind: 'spawned', pm: 'static', state: 'running', queued: 0, queueLimit: 2, maxChildren: 2, capacity: 2, active: 0, workers: [], backends: [],
  ...over,
});

test('readiness: the daemon state, then a named pool that is failing, stopping or full', () => {
  assert.deepEqual(readiness('running'), { ready: true, status: 200, reason: 'ready' });
  assert.equal(readiness('reloading').status, 200, 'a reload takes requests throughout');
  for (const s of ['starting', 'stopping', 'stopped']) assert.equal(readiness(s).status, 503, s);
  assert.equal(readiness('stopping', { name: 'p', snap: snap({}) }).status, 503, 'stopping wins over a ready pool');
  assert.equal(readiness('running', { name: 'x', snap: undefined }).status, 404);
  assert.equal(readiness('running', { name: 'p', snap: snap({ state: 'failing' }) }).status, 503);
  assert.equal(readiness('running', { name: 'p', snap: snap({ state: 'stopping' }) }).status, 503);
  // Busy but room in the queue: a request would wait, not be refused.
  assert.equal(readiness('running', { name: 'p', snap: snap({ active: 2, queued: 1 }) }).status, 200);
  assert.equal(readiness('running', { name: 'p', snap: snap({ active: 2, queued: 2 }) }).status, 503);
  assert.equal(readiness('running', { name: 'p', snap: snap({ active: 1, queued: 0, queueLimit: 0 }) }).status, 200, 'a free seat');
  assert.equal(readiness('running', { name: 'p', snap: snap({ active: 2, queued: 0, queueLimit: 0 }) }).status, 503);
  // External pool (no capacity): full only with a queue at its limit.
  const ext = { kind: 'external' as const, capacity: undefined, maxChildren: undefined };
  assert.equal(readiness('running', { name: 'p', snap: snap({ ...ext, active: 50, queued: 0 }) }).status, 200);
  assert.equal(readiness('running', { name: 'p', snap: snap({ ...ext, active: 50, queued: 2 }) }).status, 503);
});
