// The governor inside spawned pools, on fake workers, a fake clock and readings set by
// the test: when sampling runs, max_memory / max_memory_hard, the re-check right after a
// request, memory_limit, and the host budget shared by two pools (eviction, a pool with
// no worker, relief), plus the snapshot figures.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { PoolConfig } from '../../src/config/types.js';
import { ErrorCodes } from '../../src/errors.js';
import { linesMatching, MiB, world } from './helpers.js';
import { QUIET_ROUNDS } from '../../src/pool/workers/memory-caps.js';
import { PoolMemory } from '../../src/pool/workers/memory.js';
import type { PoolSnapshot } from '../../src/pool/types.js';
import { poolConfig, recordingLogger } from '../pool/helpers.js';

test('sampling runs only while a pool has workers, at its own interval', async () => {
  const W = world();
  const a = W.pool('a', { idleTimeout: 5000, memorySampleInterval: 250 });
  await a.pool.start();
  W.clock.advance(5000);
  assert.equal(W.sampler.reads, 0, 'no workers: nothing sampled');
  a.send(1);
  W.clock.advance(10);
  const w = a.live()[0]!;
  W.sampler.values.set(w.pid!, 20 * MiB);
  W.clock.advance(1000);
  assert.equal(W.sampler.reads, 5, 'once when ready, then every 250 ms');
  a.finishAll();
  W.clock.advance(6000); // idle_timeout stops it
  assert.equal(w.state, 'exited');
  assert.deepEqual(W.sampler.forgotten, [w.pid], 'its /proc handles are dropped');
  const n = W.sampler.reads;
  W.clock.advance(10_000);
  assert.equal(W.sampler.reads, n, 'no workers left: sampling stopped');
});

/** A pool with one worker, sampled at 20 MiB, idle after one request. */
async function oneIdleWorker(W: ReturnType<typeof world>, over: Partial<PoolConfig> = {}) {
  const a = W.pool('a', over);
  await a.pool.start();
  a.send(1);
  W.clock.advance(10);
  const w = a.live()[0]!;
  W.sampler.values.set(w.pid!, 20 * MiB);
  a.finishAll();
  return { a, w };
}

test('idle revision: a sample that changes what status shows of a worker moves it; samples that change nothing do not', async () => {
  const W = world();
  const { a, w } = await oneIdleWorker(W, { idleTimeout: 60_000, memorySampleInterval: 250 });
  W.clock.advance(1000);
  const r0 = a.pool.idleRevision();
  assert.notEqual(r0, undefined);
  const reads = W.sampler.reads;
  W.clock.advance(5000);
  assert.ok(W.sampler.reads > reads, 'the idle worker is still read');
  assert.equal(a.pool.idleRevision(), r0, 'the same figures: the kept status stands');
  W.sampler.values.set(w.pid!, 24 * MiB);
  W.clock.advance(2000);
  const r1 = a.pool.idleRevision();
  assert.ok(r1 !== undefined && r1 > r0!, `its memory moved (and its peak): ${r1} > ${r0}`);
  W.sampler.values.set(w.pid!, 22 * MiB);
  W.clock.advance(2000);
  assert.ok(a.pool.idleRevision()! > r1, 'smaller again: the memory shown moved, the peak did not');
});

test('every pool\'s rounds on one timer, each at its own interval: one arming and one budget check a beat, not one a pool', async () => {
  const W = world(1000 * MiB);
  let checks = 0;
  const check = W.governor.checkBudget.bind(W.governor);
  W.governor.checkBudget = () => {
    checks++;
    check();
  };
  const pools = [W.pool('a'), W.pool('b'), W.pool('c', { memorySampleInterval: 2000 })];
  for (const p of pools) {
    await p.pool.start();
    p.send(1);
  }
  W.clock.advance(10);
  for (const p of pools) p.setAll(20 * MiB); // busy all along: never a quiet worker skipped
  // Onto the beat: a and b (1 s) fall on every second, c (2 s) on every other.
  W.clock.advance(2000 - (W.clock.now() % 2000) + 500);
  let armed = 0;
  const setTimer = W.clock.setTimer.bind(W.clock);
  W.clock.setTimer = (fn, ms) => {
    armed++;
    return setTimer(fn, ms);
  };
  const reads = W.sampler.reads;
  checks = 0;
  W.clock.advance(2000);
  assert.equal(W.sampler.reads - reads, 5, 'a and b sampled twice, c once');
  assert.equal(checks, 2, 'the budget checked once a pass, not once a pool');
  assert.equal(armed, 2, 'one timer armed a beat, not one a pool');
});

test('max_memory: a worker over it finishes its request, then is replaced; one log line with the numbers', async () => {
  const W = world();
  const a = W.pool('a', { maxMemory: 100 * MiB });
  await a.pool.start();
  const [r] = a.send(1);
  W.clock.advance(10);
  const w = a.live()[0]!;
  a.setAll(120 * MiB);
  W.clock.advance(1000);
  assert.equal(w.state, 'draining', 'busy: recycled after its request');
  assert.equal(w.retireReason, 'memory');
  const [line] = linesMatching(W.lines, /over max_memory/);
  assert.ok(line, 'logged');
  assert.match(line.msg, new RegExp(`worker ${w.pid} of pool a uses 120\\.0MiB \\(pss\\), over max_memory 100\\.0MiB: recycling it after its current request`));
  assert.equal(line.value, 120 * MiB);
  assert.equal(line.maxMemory, 100 * MiB);
  assert.equal(line.reason, 'memory');
  assert.equal(linesMatching(W.lines, /retiring worker/).length, 0, 'one line per decision');
  a.ep(w).finish();
  assert.equal(r!.sink.status, 200, 'the request itself completes');
  W.clock.advance(10);
  assert.equal(w.state, 'exited');
  a.send(1);
  W.clock.advance(10);
  assert.notEqual(a.live()[0]!.pid, w.pid, 'a new worker serves the next request');
  assert.equal(a.pool.snapshot().recycles.memory, 1);
  assert.equal(a.pool.snapshot().memory!.recycled, 1);
});

test('max_memory: a worker that is that big before serving anything is not recycled in a loop', async () => {
  const W = world();
  const a = W.pool('a', { pm: 'static', maxChildren: 1, maxMemory: 50 * MiB });
  void a.pool.start(); // resolves once the worker is ready, on the fake clock
  W.clock.advance(10);
  a.setAll(80 * MiB);
  W.clock.advance(3000);
  assert.equal(a.live()[0]!.state, 'idle');
  assert.equal(linesMatching(W.lines, /before serving any request/).length, 1, 'said once');
});

test('max_memory_hard: the worker is stopped at once and its client gets 503 MEMORY_HARD_LIMIT', async () => {
  const W = world();
  const a = W.pool('a', { maxMemoryHard: 200 * MiB });
  await a.pool.start();
  const [r] = a.send(1);
  W.clock.advance(10);
  const w = a.live()[0]!;
  a.setAll(250 * MiB);
  W.clock.advance(1000);
  assert.ok(r!.sink.done, 'answered without waiting for the script');
  assert.equal(r!.sink.status, 503);
  assert.equal(r!.sink.error!.code, ErrorCodes.MEMORY_HARD_LIMIT);
  assert.deepEqual(w.stopCalls, ['memory_hard']);
  const [line] = linesMatching(W.lines, /over max_memory_hard/);
  assert.equal(line!.level, 40);
  assert.match(line!.msg, /uses 250\.0MiB \(pss\), over max_memory_hard 200\.0MiB: killing it now; its request to \/srv\/a\/index\.php gets 503 MEMORY_HARD_LIMIT/);
  const s = a.pool.snapshot();
  assert.equal(s.recycles.memory_hard, 1);
  assert.equal(s.memory!.killed, 1);
  assert.equal(s.active, 0);
});

test('near a cap, a worker is measured again right after its request and recycled before taking another', async () => {
  const W = world();
  const a = W.pool('a', { maxMemory: 100 * MiB });
  await a.pool.start();
  a.send(1);
  W.clock.advance(10);
  const w = a.live()[0]!;
  a.setAll(85 * MiB); // 85 % of the cap: near
  W.clock.advance(1000);
  assert.equal(w.state, 'busy');
  a.setAll(130 * MiB); // grew during the rest of the request
  const fresh = W.sampler.freshReads;
  a.ep(w).finish();
  assert.equal(W.sampler.freshReads, fresh + 1, 're-read at request end');
  assert.equal(w.state, 'stopping', 'not put back to work');
  assert.equal(w.retireReason, 'memory');
  // A worker far from its cap is re-read after its first request only (to learn its size).
  const b = W.pool('b', { maxMemory: 100 * MiB });
  b.send(1);
  W.clock.advance(10);
  b.setAll(10 * MiB);
  W.clock.advance(1000);
  const first = W.sampler.freshReads;
  b.finishAll();
  assert.equal(W.sampler.freshReads, first + 1, 'after its first request');
  b.send(1);
  W.clock.advance(10);
  b.finishAll();
  assert.equal(W.sampler.freshReads, first + 1, 'not after the next');
});

test('memory_limit: no spawn past it, requests queue and all get served; measured sizes move the limit', async () => {
  const W = world();
  const a = W.pool('a', { maxChildren: 10, memoryLimit: 100 * MiB }); // expected 30 MiB: three fit
  await a.pool.start();
  const reqs = a.send(10);
  assert.equal(a.workers().length, 3);
  const [line] = linesMatching(W.lines, /not spawning/);
  assert.match(line!.msg, /pool a: not spawning 1 worker\(s\): 90\.0MiB committed \+ 30\.0MiB per worker would pass memory_limit 100\.0MiB; requests wait in the queue/);
  assert.equal(linesMatching(W.lines, /not spawning/).length, 1, 'at most one line a second');
  assert.equal(line!.limitedBy, 'memory_limit');
  W.clock.advance(10);
  a.finishAll(); // each finished worker takes the next waiting request
  assert.equal(reqs.filter((r) => r.sink.status === 200).length, 10);
  assert.equal(a.workers().length, 3, 'never a fourth');
  // Measured: 20 MiB each once they served. Two more fit now.
  a.setAll(20 * MiB);
  W.clock.advance(1000);
  assert.equal(a.pool.snapshot().memory!.estimate, 20 * MiB);
  assert.equal(a.pool.snapshot().memory!.estimateSource, 'measured');
  a.send(5); // three take the idle workers, two need new ones
  assert.equal(a.workers().length, 5, '5 × 20 MiB = memory_limit');
  a.send(1);
  assert.equal(a.workers().length, 5);
  assert.equal(a.pool.snapshot().memory!.recommendedMaxChildren, 5);
});

test('memory_limit: over it by measurement, the longest-idle workers go first, busy ones stay', async () => {
  const W = world();
  const a = W.pool('a', { maxChildren: 5, memoryLimit: 130 * MiB, expectedWorkerMemory: 20 * MiB });
  await a.pool.start();
  a.send(3);
  W.clock.advance(10);
  const [w0, w1, w2] = a.live();
  a.ep(w0!).finish();
  W.clock.advance(100);
  a.ep(w1!).finish();
  a.setAll(50 * MiB); // 150 MiB > 130 MiB
  W.clock.advance(1000);
  assert.equal(w0!.retireReason, 'memory_budget', 'longest idle: retired');
  assert.equal(w0!.state, 'exited');
  assert.equal(w1!.state, 'idle');
  assert.equal(w2!.state, 'busy');
  assert.match(linesMatching(W.lines, /over its memory_limit/)[0]!.msg, new RegExp(`pool a uses 150\\.0MiB, over its memory_limit 130\\.0MiB: retiring idle worker ${w0!.pid}`));
});

test('host budget: a pool with waiting requests evicts the least recently used idle worker of another pool', async () => {
  const W = world(100 * MiB); // daemon 10 MiB + three 30 MiB workers
  const a = W.pool('a');
  const b = W.pool('b');
  await a.pool.start();
  await b.pool.start();
  a.send(3);
  assert.equal(a.workers().length, 3);
  W.clock.advance(10);
  const [w0, w1, w2] = a.live();
  a.ep(w1!).finish();
  W.clock.advance(100);
  a.ep(w0!).finish();
  W.clock.advance(100);
  a.ep(w2!).finish();
  const [rb] = b.send(1);
  assert.equal(b.workers().length, 0, 'no room yet: the request waits');
  assert.equal(w1!.state, 'stopping', 'the least recently used idle worker of pool a is evicted');
  assert.equal(w1!.retireReason, 'memory_budget');
  assert.equal(w0!.state, 'idle');
  const [ev] = linesMatching(W.lines, /evicting idle worker/);
  assert.match(ev!.msg, new RegExp(`evicting idle worker ${w1!.pid} of pool a \\(least recently used, idle 200 ms, 30\\.0MiB counted\\) to make room for pool b: 100\\.0MiB committed \\+ 30\\.0MiB needed > budget 100\\.0MiB`));
  assert.equal(ev!.forPool, 'b');
  W.clock.advance(5); // it exits; b retries at once
  assert.equal(w1!.state, 'exited');
  assert.equal(b.workers().length, 1);
  W.clock.advance(10);
  b.finishAll();
  assert.equal(rb!.sink.status, 200);
  assert.equal(W.governor.snapshot().evictions, 1);
  assert.equal(a.pool.snapshot().memory!.evicted, 1);
});

test('host budget: spare workers never evict, and yield to a pool whose requests wait', async () => {
  const W = world(100 * MiB);
  const a = W.pool('a');
  await a.pool.start();
  a.send(3);
  W.clock.advance(10);
  a.finishAll();
  const d = W.pool('d', { pm: 'dynamic', minSpare: 1, maxSpare: 2, startChildren: 1, maxChildren: 3 });
  void d.pool.start();
  assert.equal(d.workers().length, 0, 'no room for its spare; nobody evicted for it');
  assert.ok(a.live().every((w) => w.state === 'idle'));
  assert.equal(linesMatching(W.lines, /not spawning 1 spare worker/).length, 1);
});

test('host budget: a pool with no worker at all gets one when the others are all busy', async () => {
  const W = world(100 * MiB);
  const a = W.pool('a', { expectedWorkerMemory: 25 * MiB });
  const b = W.pool('b');
  await a.pool.start();
  a.send(3);
  W.clock.advance(10);
  const ws = a.live();
  assert.equal(ws.length, 3);
  // 10 + 88 MiB: not even the smallest plausible worker (MIN_WORKER_MEMORY) fits.
  W.sampler.values.set(ws[0]!.pid!, 28 * MiB);
  W.sampler.values.set(ws[1]!.pid!, 31 * MiB);
  W.sampler.values.set(ws[2]!.pid!, 29 * MiB);
  W.clock.advance(1000);
  const [rb] = b.send(1);
  assert.equal(ws[1]!.state, 'draining', 'the biggest busy worker steps down after its request');
  assert.equal(ws[0]!.state, 'busy');
  assert.match(linesMatching(W.lines, /retiring busy worker/)[0]!.msg, /pool b has no worker/);
  assert.equal(b.workers().length, 0);
  a.ep(ws[1]!).finish();
  W.clock.advance(5);
  assert.equal(b.workers().length, 1, 'spawned once it exited');
  W.clock.advance(10);
  b.finishAll();
  assert.equal(rb!.sink.status, 200);
});

test('host budget: measured use over it retires idle workers, least recently used first', async () => {
  const W = world(100 * MiB);
  const a = W.pool('a');
  await a.pool.start();
  a.send(3);
  W.clock.advance(10);
  const [w0, w1, w2] = a.live();
  a.ep(w2!).finish();
  W.clock.advance(50);
  a.ep(w0!).finish();
  W.clock.advance(50);
  a.ep(w1!).finish();
  a.setAll(40 * MiB); // 10 + 120 = 130 MiB
  W.clock.advance(1000);
  assert.equal(w2!.retireReason, 'memory_budget');
  assert.equal(w0!.state, 'idle');
  assert.equal(w1!.state, 'idle');
  const [line] = linesMatching(W.lines, /is over the budget/);
  assert.match(line!.msg, new RegExp(`memory use 130\\.0MiB is over the budget 100\\.0MiB by 30\\.0MiB: retiring idle worker ${w2!.pid} of pool a \\(40\\.0MiB\\)`));
  assert.equal(W.governor.snapshot().overBudget, 1);
  W.clock.advance(1000);
  assert.equal(W.governor.snapshot().overBudget, 1, 'back under the budget: no second victim');
});

test('snapshot: per-worker and per-pool figures, and the daemon-level budget', async () => {
  const W = world(200 * MiB);
  const a = W.pool('a', { memoryLimit: 100 * MiB, maxMemory: 60 * MiB, maxMemoryHard: 90 * MiB });
  const b = W.pool('b', { pm: 'static', maxChildren: 2 });
  await a.pool.start();
  void b.pool.start();
  W.clock.advance(10);
  a.send(2);
  W.clock.advance(10);
  a.setAll(25 * MiB);
  b.setAll(12 * MiB);
  W.clock.advance(1000);
  const s = a.pool.snapshot();
  assert.equal(s.workers.length, 2);
  const wm = s.workers[0]!.memory!;
  assert.equal(wm.pss, 25 * MiB);
  assert.equal(wm.rss, Math.round(25 * MiB * 1.5));
  assert.equal(wm.measure, 'pss');
  assert.equal(wm.peak, 25 * MiB);
  assert.ok(wm.cpu > 0);
  const m = s.memory!;
  assert.equal(m.measure, 'pss');
  assert.equal(m.total, 50 * MiB);
  assert.equal(m.estimate, 25 * MiB);
  assert.equal(m.committed, 50 * MiB);
  assert.equal(m.limit, 100 * MiB);
  assert.equal(m.maxMemory, 60 * MiB);
  assert.equal(m.maxMemoryHard, 90 * MiB);
  assert.equal(m.sampleInterval, 1000);
  // Budget share: 200 - 10 (daemon) - 2 × 30 (pool b keeps its static workers) = 130; limit 100 → 4.
  assert.equal(m.recommendedMaxChildren, 4);
  const g = W.governor.snapshot();
  assert.equal(g.budget, 200 * MiB);
  assert.equal(g.measure, 'pss');
  assert.equal(g.daemon.value, 10 * MiB);
  assert.equal(g.used, 10 * MiB + 50 * MiB + 24 * MiB);
  assert.deepEqual(g.pools.map((p) => [p.name, p.workers]), [['a', 2], ['b', 2]]);
  assert.equal(g.available, 200 * MiB - g.committed);
});

test('no memory cap: a small measured size does not hold spawns back one at a time, and nothing warns', async () => {
  const W = world();
  const a = W.pool('a', { maxChildren: 4 }); // no budget, no memory_limit, no cgroup
  await a.pool.start();
  a.send(1);
  W.clock.advance(10);
  a.setAll(5 * MiB); // far below expected_worker_memory: the size is "being learnt"
  a.finishAll();
  W.clock.advance(1000);
  assert.equal(a.pool.snapshot().memory!.estimateSource, 'measured');
  a.send(4);
  assert.equal(a.workers().length, 4, 'all spawned at once');
  assert.deepEqual(linesMatching(W.lines, /not spawning/), []);
});

test('a quiet worker (idle, given nothing since its last sample) is read once in QUIET_ROUNDS rounds; one given a request at the next round', async () => {
  const W = world();
  const { a, w } = await oneIdleWorker(W);
  W.clock.advance(2000); // sampled once idle
  const reads = (rounds: number): number => {
    const n = W.sampler.reads;
    W.clock.advance(rounds * 1000);
    return W.sampler.reads - n;
  };
  assert.equal(reads(QUIET_ROUNDS), 1, 'quiet: one read in QUIET_ROUNDS rounds');
  assert.equal(reads(2 * QUIET_ROUNDS), 2);
  W.sampler.values.set(w.pid!, 25 * MiB); // grew while idle (it cannot, but then it is still seen)
  W.clock.advance(QUIET_ROUNDS * 1000);
  assert.equal(a.pool.snapshot().workers[0]!.memory!.pss, 25 * MiB, 'a quiet worker is still measured');
  a.send(1);
  W.clock.advance(10);
  a.finishAll();
  W.clock.advance(10);
  assert.equal(reads(1), 1, 'given a request: read at the next round');
  assert.equal(reads(QUIET_ROUNDS), 1, 'then quiet again');
});

test('the daemon counts at its peak of the last 30 s: a garbage collection\'s dip is not room a worker may take', async () => {
  const W = world(110 * MiB);
  const a = W.pool('a', { maxChildren: 4, expectedWorkerMemory: 30 * MiB, idleTimeout: 600_000, queueTimeout: 120_000 });
  await a.pool.start();
  W.sampler.selfValue = 40 * MiB;
  W.governor.self();
  const settle = async (): Promise<void> => {
    // The background read of the daemon lands on the next turn; the reading after it counts.
    W.clock.advance(1000);
    W.governor.self();
    await new Promise((r) => setImmediate(r));
    W.governor.self();
  };
  // 40 MiB of daemon and two 30 MiB workers leave 10 MiB of 110: a third does not fit.
  a.send(3);
  W.clock.advance(10);
  assert.equal(a.live().length, 2);
  // A collection frees 20 MiB: read, but the daemon still counts at 40.
  W.sampler.selfValue = 20 * MiB;
  await settle();
  assert.equal(W.governor.self().value, 40 * MiB, 'the peak of the last 30 s');
  assert.equal(W.governor.self().pss, 20 * MiB, 'the reading itself is kept');
  W.clock.advance(10);
  assert.equal(a.live().length, 2, 'no worker admitted into the dip');
  // Thirty seconds later the peak has aged out: 20 + 3 × 30 fits 110, and the third worker starts.
  for (let i = 0; i < 31; i++) await settle();
  assert.equal(W.governor.self().value, 20 * MiB);
  W.clock.advance(10);
  assert.equal(a.live().length, 3, JSON.stringify(W.lines.map((l) => l.msg)));
});

test('host budget: a pool\'s last busy worker is never retired for it (the pool would serve nothing)', async () => {
  const W = world(50 * MiB);
  const a = W.pool('a', { expectedWorkerMemory: 10 * MiB });
  await a.pool.start();
  a.send(1);
  W.clock.advance(10);
  const [only] = a.live();
  a.setAll(60 * MiB); // 10 of the daemon + 60 > 50
  W.clock.advance(1000);
  assert.equal(only!.retireReason, undefined, 'the only worker stays');
  assert.equal(W.governor.snapshot().overBudget, 0);
});

test("status of many pools under a budget sums their floors once, not once for each pool", async (t) => {
  const W = world(2000 * MiB);
  const pools = Array.from({ length: 40 }, (_, i) => W.pool(`p${i}`, { pm: 'dynamic', minSpare: 1, maxSpare: 2, startChildren: 1, maxChildren: 8 }));
  // One at a time, each in a task of its own: what every pool's recommendation is.
  const alone: Array<number | undefined> = [];
  for (const p of pools) {
    alone.push(p.pool.snapshot().memory!.recommendedMaxChildren);
    await new Promise((r) => setImmediate(r));
  }
  assert.ok(alone.every((n) => n !== undefined && n > 0), 'the budget gives each pool a recommendation');
  const floor = t.mock.method(PoolMemory.prototype, 'floor');
  // As a status snapshot takes them: all in one run.
  const together = pools.map((p) => p.pool.snapshot().memory!.recommendedMaxChildren);
  assert.deepEqual(together, alone);
  assert.ok(floor.mock.callCount() <= 3 * pools.length, `floor() called ${floor.mock.callCount()} times for ${pools.length} pools`);
});

test('a resident parent in status is the measure the pool\'s committed memory holds, even when a sample interval passes between the two', () => {
  const W = world();
  const PARENT = 4242;
  let grown = 8 * MiB;
  W.sampler.values.set(PARENT, grown);
  // A loaded machine: every look at the clock is one sample interval later, so each
  // value() finds its reading stale and reads again, and the parent grew in between.
  const clock = { now: () => (W.clock.advance(1000), W.clock.now()), setTimer: W.clock.setTimer.bind(W.clock), clearTimer: W.clock.clearTimer.bind(W.clock) };
  const hooks = {
    slots: () => [],
    handsRequests: true,
    retire: () => undefined,
    kill: () => undefined,
    scale: () => undefined,
    queued: () => 0,
    preloadParent: () => PARENT,
    stopPreloadParent: () => Promise.resolve(),
  };
  const mem = new PoolMemory(poolConfig({ name: 'php', memorySampleInterval: 1000 }), W.governor, hooks, clock, recordingLogger().logger);
  for (let i = 0; i < 3; i++) {
    const s = { workers: [] } as unknown as PoolSnapshot;
    mem.fill(s);
    W.sampler.values.set(PARENT, (grown += MiB));
    const shown = mem.preloadParent();
    assert.ok(shown !== undefined);
    assert.ok(s.memory!.committed >= shown.memory, `the parent shown (${shown.memory}) counts in the pool's committed ${s.memory!.committed}`);
    assert.equal(shown.memory, s.memory!.total);
  }
  mem.dispose();
});
