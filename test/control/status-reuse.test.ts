// The dashboard's samples keep an idle pool's status between them (control/snapshot.ts
// StatusReuse): made again after an event (Pool.idleRevision grew), while requests run,
// when a generation retires, and REUSE_MAX_AGE_MS after it was made.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { REUSE_MAX_AGE_MS, StatusReuse } from '../../src/control/snapshot.js';
import type { PoolGroup } from '../../src/control/generations.js';
import type { PoolStatus } from '../../src/control/types.js';
import type { Pool } from '../../src/pool/types.js';

function rig() {
  let revision: number | undefined = 1;
  const pool = { name: 'p', idleRevision: () => revision } as unknown as Pool;
  const group: PoolGroup = { name: 'p', current: pool, retiring: [], base: undefined };
  let made = 0;
  const make = (): PoolStatus => ({ name: 'p', made: ++made }) as unknown as PoolStatus;
  const reuse = new StatusReuse();
  const at = (now: number): number => (reuse.status(group, now, make) as unknown as { made: number }).made;
  return { group, at, set: (r: number | undefined) => (revision = r) };
}

test('an idle pool whose revision did not move keeps its status; an event, a run or a retiring generation makes it again', () => {
  const { group, at, set } = rig();
  assert.equal(at(0), 1);
  assert.equal(at(2000), 1, 'nothing happened: the same status');
  set(2);
  assert.equal(at(4000), 2, 'an event: made again');
  assert.equal(at(6000), 2);
  set(undefined);
  assert.equal(at(8000), 3, 'requests running: made at every sample');
  assert.equal(at(8100), 4);
  set(2);
  assert.equal(at(8200), 5, 'idle again: made once more, then kept');
  assert.equal(at(8300), 5);
  group.retiring.push({ name: 'p' } as unknown as Pool);
  assert.equal(at(8400), 6, 'a generation draining beside it: its totals move');
  group.retiring.length = 0;
  group.base = { accepted: 1 } as unknown as PoolGroup['base'];
  assert.equal(at(8500), 7, 'a generation gone since (its counters folded in): made again');
  assert.equal(at(8600), 7);
});

test('a kept status is made again REUSE_MAX_AGE_MS after it was made, whatever its revision says', () => {
  const { at } = rig();
  assert.equal(at(0), 1);
  assert.equal(at(REUSE_MAX_AGE_MS - 1), 1);
  assert.equal(at(REUSE_MAX_AGE_MS), 2);
});

test('a pool that cannot tell its revision (external, direct) is made at every sample', () => {
  const pool = { name: 'x' } as unknown as Pool;
  const group: PoolGroup = { name: 'x', current: pool, retiring: [], base: undefined };
  const reuse = new StatusReuse();
  let made = 0;
  const make = (): PoolStatus => ({ made: ++made }) as unknown as PoolStatus;
  reuse.status(group, 0, make);
  reuse.status(group, 1, make);
  assert.equal(made, 2);
});
