// The governor's pure decisions (src/memory/governor.ts, estimate.ts) on made-up
// samples: per-worker caps, spawn admission against a pool limit and a host budget,
// eviction order, relief, estimates and the recommended max_children.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { checkWorker, chargeOf, decideSpawn, evictionOrder, fitCount, planRelief, recommendMaxChildren, type HostView, type SpawnAsk } from '../../src/memory/governor.js';
import { estimateWorker, PeakHistory, percentile } from '../../src/memory/estimate.js';
import type { WorkerRef } from '../../src/memory/types.js';

const MiB = 1024 * 1024;

function ref(pool: string, id: number, charge: number, since: number, value?: number): WorkerRef {
  return { pool, id, pid: 1000 + id, charge, value: value ?? charge, since };
}

function host(over: Partial<HostView> = {}): HostView {
  return { budget: 100 * MiB, committed: 0, freeing: 0, othersWaiting: false, idle: [], busy: [], starving: false, ...over };
}

function ask(over: Partial<SpawnAsk> = {}): SpawnAsk {
  return { want: 1, demand: 1, estimate: 10 * MiB, poolCommitted: 0, poolLimit: 0, host: undefined, ...over };
}

test('checkWorker: hard above max_memory_hard, soft above max_memory, near from 80 % of the lower cap', () => {
  const caps = { soft: 100, hard: 200 };
  assert.equal(checkWorker(201, caps), 'hard');
  assert.equal(checkWorker(200, caps), 'soft', 'at the hard cap is not over it');
  assert.equal(checkWorker(101, caps), 'soft');
  assert.equal(checkWorker(100, caps), 'near');
  assert.equal(checkWorker(80, caps), 'near');
  assert.equal(checkWorker(79, caps), 'ok');
  assert.equal(checkWorker(170, { soft: 0, hard: 200 }), 'near', 'only a hard cap: near it');
  assert.equal(checkWorker(10 ** 12, { soft: 0, hard: 0 }), 'ok', 'no caps');
});

test('a worker is charged its sample, but never less than its pool estimate', () => {
  assert.equal(chargeOf(undefined, 30), 30);
  assert.equal(chargeOf(10, 30), 30);
  assert.equal(chargeOf(50, 30), 50);
  assert.equal(fitCount(99, 10), 9);
  assert.equal(fitCount(-5, 10), 0);
  assert.equal(fitCount(5, 0), Infinity);
});

test('memory_limit: spawns only what fits; without a host budget nothing else applies', () => {
  const d = decideSpawn(ask({ want: 5, demand: 5, poolCommitted: 20 * MiB, poolLimit: 55 * MiB }));
  assert.equal(d.admit, 3);
  assert.equal(d.limitedBy, 'memory_limit');
  assert.deepEqual(d.evict, []);
  assert.equal(decideSpawn(ask({ want: 5, demand: 5 })).admit, 5);
  assert.equal(decideSpawn(ask({ want: 2, poolCommitted: 60 * MiB, poolLimit: 55 * MiB })).admit, 0, 'already over');
});

test('budget: what fits is admitted, demand first; the rest waits', () => {
  const d = decideSpawn(ask({ want: 4, demand: 2, host: host({ committed: 75 * MiB }) }));
  assert.equal(d.admit, 2, '25 MiB free: two 10 MiB workers, both for waiting requests');
  assert.equal(d.limitedBy, 'memory_budget');
  assert.equal(d.unmetDemand, 0);
  const e = decideSpawn(ask({ want: 3, demand: 3, host: host({ committed: 85 * MiB }) }));
  assert.equal(e.admit, 1);
  assert.equal(e.unmetDemand, 2);
});

test('budget: spare spawns yield to another pool whose requests wait; demand spawns do not', () => {
  const h = host({ committed: 50 * MiB, othersWaiting: true });
  assert.equal(decideSpawn(ask({ want: 2, demand: 0, host: h })).admit, 0);
  assert.equal(decideSpawn(ask({ want: 2, demand: 1, host: h })).admit, 1);
});

test('eviction: idle workers of other pools, least recently used first, exactly as many as needed', () => {
  const idle = [ref('b', 1, 12 * MiB, 300), ref('c', 2, 8 * MiB, 100), ref('b', 3, 20 * MiB, 200)];
  // 5 MiB free; two spawns of 10 MiB need 15 MiB more: c#2 (8, oldest) + b#3 (20) cover both.
  const d = decideSpawn(ask({ want: 2, demand: 2, host: host({ committed: 95 * MiB, idle }) }));
  assert.equal(d.admit, 0);
  assert.deepEqual(d.evict.map((w) => w.id), [2, 3]);
  assert.equal(d.covered, 2);
  // One spawn needs 5 MiB more: the oldest alone is enough.
  const one = decideSpawn(ask({ want: 1, demand: 1, host: host({ committed: 95 * MiB, idle }) }));
  assert.deepEqual(one.evict.map((w) => w.id), [2]);
});

test('eviction: the idle preload parent of a pool with no worker goes first, before older idle workers; alone when it frees enough', () => {
  // The parent went idle last (since 900) and is still first; the workers follow, least recently used first.
  const parent: WorkerRef = { ...ref('py', -1, 30 * MiB, 900), parent: true };
  const idle = [ref('b', 1, 12 * MiB, 300), parent, ref('c', 2, 8 * MiB, 100)];
  const one = decideSpawn(ask({ want: 1, demand: 1, host: host({ committed: 95 * MiB, idle }) }));
  assert.deepEqual(one.evict, [parent], 'the parent alone covers the 5 MiB short');
  assert.equal(one.covered, 1);
  // Four spawns need 35 MiB more: the parent (30), then the oldest worker (c#2, 8).
  const four = decideSpawn(ask({ want: 4, demand: 4, host: host({ committed: 95 * MiB, idle }) }));
  assert.deepEqual(four.evict.map((w) => w.pid), [parent.pid, 1002]);
  assert.deepEqual(evictionOrder(idle).map((w) => w.id), [-1, 2, 1]);
});

test('eviction: memory already being freed counts first; spare spawns never evict', () => {
  const idle = [ref('b', 1, 12 * MiB, 100)];
  const d = decideSpawn(ask({ want: 1, demand: 1, host: host({ committed: 95 * MiB, freeing: 10 * MiB, idle }) }));
  assert.deepEqual(d.evict, [], 'a retiring worker will free enough');
  assert.equal(d.covered, 1);
  const spare = decideSpawn(ask({ want: 1, demand: 0, host: host({ committed: 95 * MiB, idle }) }));
  assert.deepEqual(spare.evict, []);
  assert.equal(spare.unmetDemand, 0);
});

test('eviction: when even every idle worker is not enough, none is stopped for nothing', () => {
  const idle = [ref('b', 1, 3 * MiB, 100)];
  const d = decideSpawn(ask({ want: 1, demand: 1, estimate: 40 * MiB, host: host({ committed: 90 * MiB, idle }) }));
  assert.deepEqual(d.evict, []);
  assert.equal(d.unmetDemand, 1);
  assert.deepEqual(d.retire, []);
});

test('a pool with no worker at all gets one: the biggest busy worker of a bigger pool retires after its request', () => {
  const busy = [ref('b', 1, 30 * MiB, 5), ref('b', 2, 45 * MiB, 9)];
  const d = decideSpawn(ask({ want: 1, demand: 1, host: host({ committed: 98 * MiB, busy, starving: true }) }));
  assert.deepEqual(d.retire.map((w) => w.id), [2]);
  const notStarving = decideSpawn(ask({ want: 1, demand: 1, host: host({ committed: 98 * MiB, busy, starving: false }) }));
  assert.deepEqual(notStarving.retire, [], 'a pool with workers waits for its own');
  const freeing = decideSpawn(ask({ want: 1, demand: 1, host: host({ committed: 98 * MiB, freeing: 20 * MiB, busy, starving: true }) }));
  assert.deepEqual(freeing.retire, [], 'memory on its way back: no second retirement');
});

test('admission never plans past the budget, and evicts no more than the spawns need', () => {
  const arb = fc.record({
    budget: fc.integer({ min: 10, max: 1000 }),
    committed: fc.integer({ min: 0, max: 1000 }),
    freeing: fc.integer({ min: 0, max: 200 }),
    est: fc.integer({ min: 1, max: 200 }),
    want: fc.integer({ min: 0, max: 8 }),
    demand: fc.integer({ min: 0, max: 8 }),
    idle: fc.array(fc.record({ charge: fc.integer({ min: 1, max: 300 }), since: fc.integer({ min: 0, max: 1000 }) }), { maxLength: 8 }),
    othersWaiting: fc.boolean(),
  });
  fc.assert(
    fc.property(arb, (a) => {
      const idle = a.idle.map((w, i) => ref('other', i, w.charge, w.since));
      const h = host({ budget: a.budget, committed: a.committed, freeing: a.freeing, othersWaiting: a.othersWaiting, idle });
      const d = decideSpawn(ask({ want: a.want, demand: Math.min(a.demand, a.want), estimate: a.est, host: h }));
      assert.ok(d.admit >= 0 && d.admit <= a.want);
      // Admitted workers fit in what was free (nothing admitted when already over).
      assert.ok(a.committed + d.admit * a.est <= Math.max(a.budget, a.committed));
      // Victims are the oldest idle workers, and dropping the last one would leave a covered spawn uncovered.
      const sorted = [...idle].sort((x, y) => x.since - y.since);
      assert.deepEqual(d.evict.map((w) => w.id), sorted.slice(0, d.evict.length).map((w) => w.id));
      if (d.evict.length > 0) {
        const have = a.budget - a.committed - d.admit * a.est + a.freeing;
        const got = d.evict.reduce((s, w) => s + w.charge, 0);
        assert.ok(have + got >= d.covered * a.est);
        assert.ok(have + got - d.evict[d.evict.length - 1]!.charge < d.covered * a.est, 'no needless victim');
      }
    }),
    { numRuns: 500 },
  );
});

test('relief: an idle preload parent before any idle worker', () => {
  const parent: WorkerRef = { ...ref('py', -1, 10, 99, 25), parent: true };
  const idle = [ref('a', 1, 10, 50), parent, ref('b', 2, 10, 10)];
  assert.deepEqual(planRelief(20, idle, []).map((w) => w.id), [-1], 'its 25 measured cover 20');
  assert.deepEqual(planRelief(30, idle, []).map((w) => w.id), [-1, 2]);
});

test('relief: idle workers first, least recently used; then busy ones, largest first', () => {
  const idle = [ref('a', 1, 10, 50), ref('b', 2, 10, 10)];
  const busy = [ref('a', 3, 10, 0, 5), ref('b', 4, 10, 0, 40)];
  assert.deepEqual(planRelief(0, idle, busy), []);
  assert.deepEqual(planRelief(15, idle, busy).map((w) => w.id), [2, 1]);
  assert.deepEqual(planRelief(21, idle, busy).map((w) => w.id), [2, 1, 4]);
  assert.deepEqual(planRelief(1000, idle, busy).map((w) => w.id), [2, 1, 4, 3]);
});

test('estimate: expected_worker_memory until a worker that served was measured, then p90 of peaks, capped', () => {
  assert.deepEqual(estimateWorker([], [], 32 * MiB), { bytes: 32 * MiB, source: 'configured' });
  const peaks = [10, 11, 12, 13, 14, 15, 16, 17, 18, 100].map((n) => n * MiB);
  assert.equal(percentile(peaks, 0.9), 18 * MiB, 'one outlier in ten does not set the estimate');
  assert.deepEqual(estimateWorker(peaks.slice(0, 5), peaks.slice(5), 32 * MiB), { bytes: 18 * MiB, source: 'measured' });
  assert.equal(estimateWorker([500 * MiB], [], 32 * MiB, 128 * MiB).bytes, 128 * MiB, 'no worker stays above max_memory_hard');
  const h = new PeakHistory(3);
  for (const v of [1, 2, 3, 4]) h.record(v);
  assert.deepEqual(h.values().sort(), [2, 3, 4], 'the oldest peaks age out');
});

test('recommended max_children: what fits the limit and the budget share at the estimate', () => {
  assert.equal(recommendMaxChildren({ estimate: 30, poolLimit: 0, budgetShare: undefined }), undefined);
  assert.equal(recommendMaxChildren({ estimate: 30, poolLimit: 100, budgetShare: undefined }), 3);
  assert.equal(recommendMaxChildren({ estimate: 30, poolLimit: 100, budgetShare: 65 }), 2);
  assert.equal(recommendMaxChildren({ estimate: 30, poolLimit: 0, budgetShare: -5 }), 0);
});
