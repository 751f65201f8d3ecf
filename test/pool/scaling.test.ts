import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  initialWorkers,
  planIdleStops,
  planSpawns,
  NO_ROUND,
  ROUND_MS,
  SURPLUS_IDLE_MS,
  type ScalingConfig,
  type SpawnRound,
  type WorkerCounts,
} from '../../src/pool/workers/scaling.js';
import { FakeClock } from './fake-clock.js';

const base: ScalingConfig = { pm: 'ondemand', maxChildren: 5, startChildren: 2, minSpare: 1, maxSpare: 3, maxSpawnRate: 8, idleTimeout: 10_000 };
const counts = (c: Partial<WorkerCounts>): WorkerCounts => ({ idle: 0, busy: 0, spawning: 0, retiring: 0, queued: 0, ...c });

test('initial workers per mode', () => {
  assert.equal(initialWorkers({ ...base, pm: 'ondemand' }), 0);
  assert.equal(initialWorkers({ ...base, pm: 'static' }), 5);
  assert.equal(initialWorkers({ ...base, pm: 'dynamic' }), 2);
  assert.equal(initialWorkers({ ...base, pm: 'dynamic', startChildren: 9 }), 5, 'clamped to max_children');
});

test('ondemand spawns exactly one per waiting request that no starting worker will take', () => {
  const cfg = { ...base, pm: 'ondemand' as const };
  assert.equal(planSpawns(cfg, counts({}), 0, NO_ROUND).spawn, 0, 'no demand, no worker');
  assert.equal(planSpawns(cfg, counts({ queued: 1 }), 0, NO_ROUND).spawn, 1);
  // Three waiting, two already starting: one more.
  assert.equal(planSpawns(cfg, counts({ queued: 3, spawning: 2 }), 0, NO_ROUND).spawn, 1);
  // As many starting as waiting: none (never one per waiting request once enough start).
  assert.equal(planSpawns(cfg, counts({ queued: 3, spawning: 3, busy: 2 }), 0, NO_ROUND).spawn, 0);
});

test('ondemand simulated burst of 20 grows to exactly max_children and never past it', () => {
  const cfg = { ...base, pm: 'ondemand' as const, maxChildren: 4 };
  let c = counts({});
  let spawnedTotal = 0;
  for (let i = 0; i < 20; i++) {
    c = { ...c, queued: c.queued + 1 };
    const p = planSpawns(cfg, c, i, NO_ROUND);
    spawnedTotal += p.spawn;
    c = { ...c, spawning: c.spawning + p.spawn };
    assert.ok(c.spawning + c.busy + c.idle <= 4);
    if (i >= 4) assert.equal(p.atMaxChildren, true, 'demand past max_children is reported');
  }
  assert.equal(spawnedTotal, 4);
  // Retiring workers are still processes: they hold slots.
  assert.equal(planSpawns(cfg, counts({ queued: 5, busy: 2, retiring: 2 }), 0, NO_ROUND).spawn, 0);
});

test('static refills to max_children whatever the demand', () => {
  const cfg = { ...base, pm: 'static' as const, maxChildren: 4 };
  assert.equal(planSpawns(cfg, counts({}), 0, NO_ROUND).spawn, 4);
  assert.equal(planSpawns(cfg, counts({ idle: 1, busy: 1 }), 0, NO_ROUND).spawn, 2);
  assert.equal(planSpawns(cfg, counts({ idle: 1, busy: 1, retiring: 1, spawning: 1 }), 0, NO_ROUND).spawn, 0);
  assert.equal(planSpawns(cfg, counts({ busy: 4, queued: 100 }), 0, NO_ROUND).spawn, 0);
});

test('dynamic keeps min_spare idle and doubles its spawn rate each second of need', () => {
  const cfg: ScalingConfig = { ...base, pm: 'dynamic', maxChildren: 50, minSpare: 20, maxSpare: 30, maxSpawnRate: 8 };
  const clock = new FakeClock();
  let round: SpawnRound = NO_ROUND;
  let idle = 0;
  const perRound: number[] = [];
  for (let s = 0; s < 6; s++) {
    const p = planSpawns(cfg, counts({ idle }), clock.now(), round);
    round = p.round;
    perRound.push(p.spawn);
    // Asking again within the same second spawns nothing more and says when to ask.
    const again = planSpawns(cfg, counts({ idle, spawning: p.spawn }), clock.now() + 10, round);
    assert.equal(again.spawn, 0);
    assert.equal(again.recheckAt, idle + p.spawn < 20 ? round.endsAt : undefined);
    idle += p.spawn; // they became ready
    clock.advance(ROUND_MS);
  }
  assert.deepEqual(perRound, [1, 2, 4, 8, 5, 0], '1, 2, 4, then capped at max_spawn_rate, then what is missing');
  assert.equal(idle, 20);

  // After a quiet second the rate starts again at 1.
  clock.advance(3 * ROUND_MS);
  const p = planSpawns(cfg, counts({ idle: 10 }), clock.now(), round);
  assert.equal(p.spawn, 1);
});

test('dynamic spawns for queued requests on top of min_spare, within max_children', () => {
  const cfg: ScalingConfig = { ...base, pm: 'dynamic', maxChildren: 6, minSpare: 2, maxSpare: 4, maxSpawnRate: 32 };
  let round: SpawnRound = { rate: 16, spawned: 0, endsAt: 0 };
  const p = planSpawns(cfg, counts({ busy: 3, queued: 4 }), 500, round);
  assert.equal(p.spawn, 3, 'wanted 6, room for 3');
  assert.equal(p.atMaxChildren, true);
  round = p.round;
  assert.equal(planSpawns(cfg, counts({ idle: 2, busy: 1 }), 600, NO_ROUND).spawn, 0, 'min_spare met');
});

test('idle stop order: longest idle first, ondemand after idle_timeout', () => {
  const cfg = { ...base, pm: 'ondemand' as const, idleTimeout: 500 };
  // idleSince oldest first.
  const since = [100, 200, 300];
  assert.deepEqual(planIdleStops(cfg, since, 550), { stop: 0, recheckAt: 600 });
  assert.deepEqual(planIdleStops(cfg, since, 600), { stop: 1, recheckAt: 700 });
  assert.deepEqual(planIdleStops(cfg, since, 799), { stop: 2, recheckAt: 800 });
  assert.deepEqual(planIdleStops(cfg, since, 10_000), { stop: 3, recheckAt: undefined });
  assert.deepEqual(planIdleStops(cfg, [], 10_000), { stop: 0, recheckAt: undefined });
  assert.deepEqual(planIdleStops({ ...cfg, idleTimeout: 0 }, since, 1e9), { stop: 0, recheckAt: undefined }, '0 = never');
});

test('idle stops never go below min_spare (dynamic) or max_children (static)', () => {
  const dyn: ScalingConfig = { ...base, pm: 'dynamic', minSpare: 2, maxSpare: 3, idleTimeout: 5000 };
  assert.equal(planIdleStops(dyn, [0, 0], 1e9).stop, 0);
  assert.equal(planIdleStops(dyn, [0, 0, 0], 1e9).stop, 1);
  // Above max_spare: the surplus goes after a second, the rest only after idle_timeout.
  const since = [0, 10, 20, 30, 40]; // 5 idle, max_spare 3 → 2 surplus
  assert.deepEqual(planIdleStops(dyn, since, SURPLUS_IDLE_MS - 1), { stop: 0, recheckAt: SURPLUS_IDLE_MS });
  assert.deepEqual(planIdleStops(dyn, since, SURPLUS_IDLE_MS + 10), { stop: 2, recheckAt: 20 + 5000 });
  assert.deepEqual(planIdleStops(dyn, since, 5030), { stop: 3, recheckAt: undefined }, 'down to min_spare, not below');
  const st: ScalingConfig = { ...base, pm: 'static', idleTimeout: 1 };
  assert.deepEqual(planIdleStops(st, [0, 0, 0, 0, 0], 1e9), { stop: 0, recheckAt: undefined });
});
