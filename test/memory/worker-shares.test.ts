// max_children_total divided fairly (src/memory/worker-shares.ts): free room first; a pool
// below its share takes places from pools above theirs, idle workers first, and never
// takes a pool below its share; workers already leaving are waited for.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { WorkerRef } from '../../src/memory/types.js';
import { decideShare, type ShareMember } from '../../src/memory/worker-shares.js';

function refs(pool: string, n: number, from = 0): WorkerRef[] {
  return Array.from({ length: n }, (_, i) => ({ pool, id: from + i, pid: 1000 + from + i, charge: 1, value: undefined, since: from + i }));
}

function member(name: string, count: number, idle: number, leaving = 0, waiting = false): ShareMember<string> {
  return { member: name, count, leaving, waiting, idle: refs(name, idle), busy: refs(name, count - idle, idle) };
}

test('free room is taken first, spare spawns included', () => {
  const d = decideShare({ want: 3, demand: 1, mine: 1, mineLeaving: 0, max: 10, others: [member('b', 4, 0)] });
  assert.deepEqual({ admit: d.admit, unmet: d.unmet, evict: d.evict.length, share: d.share }, { admit: 3, unmet: 0, evict: 0, share: 5 });
});

test('host full: a pool below its share takes idle workers of the pool above its share, least recently used first', () => {
  // max 8, two active pools: share 4. The noisy pool holds 7 (3 idle), the quiet one 1 and has 2 requests waiting.
  const d = decideShare({ want: 2, demand: 2, mine: 1, mineLeaving: 0, max: 8, others: [member('noisy', 7, 3)] });
  assert.equal(d.admit, 0);
  assert.equal(d.unmet, 2);
  assert.equal(d.share, 4);
  assert.deepEqual(d.evict.map((e) => [e.member, e.ref.id]), [['noisy', 0], ['noisy', 1]], 'the two oldest idle ones');
  assert.deepEqual(d.retire, []);
});

test('never takes a pool below its share, and never more than the asking pool\'s share', () => {
  const d = decideShare({ want: 4, demand: 4, mine: 2, mineLeaving: 0, max: 8, others: [member('b', 5, 5), member('c', 1, 1)] });
  // share floor(8/3) = 2: this pool already has its share; nothing is taken.
  assert.equal(d.share, 2);
  assert.deepEqual(d.evict, []);
  assert.equal(d.unmet, 4);
  const e = decideShare({ want: 4, demand: 4, mine: 0, mineLeaving: 0, max: 8, others: [member('b', 5, 5), member('c', 3, 3)] });
  // Share 2: two places, both from b (5 > 2) and c (3 > 2 gives one at most); b's oldest first.
  assert.equal(e.evict.length, 2);
  const taken = new Map<string, number>();
  for (const x of e.evict) taken.set(x.member, (taken.get(x.member) ?? 0) + 1);
  assert.ok((taken.get('c') ?? 0) <= 1, 'c keeps its share');
});

test('a pool with no worker and nothing idle to take: the busiest pool above its share retires one after its request', () => {
  const d = decideShare({ want: 1, demand: 1, mine: 0, mineLeaving: 0, max: 4, others: [member('noisy', 4, 0)] });
  assert.deepEqual(d.evict, []);
  assert.deepEqual(d.retire.map((r) => r.member), ['noisy']);
});

test('workers already leaving are waited for: no second eviction while one is on its way out', () => {
  const d = decideShare({ want: 1, demand: 1, mine: 1, mineLeaving: 0, max: 8, others: [member('noisy', 6, 3, 1)] });
  assert.deepEqual(d.evict, []);
  assert.deepEqual(d.retire, []);
  assert.equal(d.unmet, 1);
});

test('spare spawns never evict: only requests waiting claim a share', () => {
  const d = decideShare({ want: 2, demand: 0, mine: 1, mineLeaving: 0, max: 8, others: [member('noisy', 7, 7)] });
  assert.deepEqual({ admit: d.admit, evict: d.evict.length }, { admit: 0, evict: 0 });
});

test('a pool at its share does not take back the place a pool below its share waits for', () => {
  // The noisy pool gave a worker up for the quiet one (which waits with 0 workers); that
  // worker has exited and the noisy pool's queue asks for a replacement first.
  const d = decideShare({ want: 1, demand: 1, mine: 3, mineLeaving: 0, max: 4, others: [member('quiet', 0, 0, 0, true)] });
  assert.equal(d.admit, 0);
  assert.deepEqual(d.evict, []);
  const q = decideShare({ want: 1, demand: 1, mine: 0, mineLeaving: 0, max: 4, others: [member('noisy', 3, 0)] });
  assert.equal(q.admit, 1, 'the quiet pool takes the free place');
});
