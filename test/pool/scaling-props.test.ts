/**
 * Invariants of the scaling policy over random counts (fast-check).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { planIdleStops, planSpawns, type ScalingConfig, type SpawnRound } from '../../src/pool/workers/scaling.js';

const cfgArb = fc
  .record({
    pm: fc.constantFrom('static' as const, 'dynamic' as const, 'ondemand' as const),
    maxChildren: fc.integer({ min: 1, max: 64 }),
    minSpare: fc.integer({ min: 0, max: 16 }),
    spareGap: fc.integer({ min: 0, max: 16 }),
    startChildren: fc.integer({ min: 0, max: 64 }),
    maxSpawnRate: fc.integer({ min: 1, max: 64 }),
    idleTimeout: fc.integer({ min: 0, max: 100_000 }),
  })
  .map(({ spareGap, ...c }): ScalingConfig => ({ ...c, maxSpare: c.minSpare + spareGap }));

const countsArb = fc.record({
  idle: fc.integer({ min: 0, max: 40 }),
  busy: fc.integer({ min: 0, max: 40 }),
  spawning: fc.integer({ min: 0, max: 40 }),
  retiring: fc.integer({ min: 0, max: 40 }),
  queued: fc.integer({ min: 0, max: 200 }),
});

const roundArb: fc.Arbitrary<SpawnRound> = fc.record({
  rate: fc.integer({ min: 0, max: 64 }),
  spawned: fc.integer({ min: 0, max: 64 }),
  endsAt: fc.integer({ min: -5000, max: 5000 }),
});

test('spawns never push live processes past max_children, nor past what the mode wants', () => {
  fc.assert(
    fc.property(cfgArb, countsArb, roundArb, fc.integer({ min: 0, max: 10_000 }), (cfg, c, round, now) => {
      const p = planSpawns(cfg, c, now, round);
      const live = c.idle + c.busy + c.spawning + c.retiring;
      assert.ok(p.spawn >= 0);
      assert.ok(live + p.spawn <= Math.max(live, cfg.maxChildren));
      if (cfg.pm === 'ondemand') assert.ok(p.spawn <= Math.max(0, c.queued - c.idle - c.spawning));
      if (cfg.pm === 'dynamic') {
        assert.ok(p.spawn <= Math.max(cfg.maxSpawnRate, 1));
        assert.ok(p.spawn <= Math.max(0, cfg.minSpare + c.queued - c.idle - c.spawning));
      }
    }),
  );
});

test('idle stops never go below the floor and always take the longest idle first', () => {
  fc.assert(
    fc.property(cfgArb, fc.array(fc.integer({ min: 0, max: 100_000 }), { maxLength: 40 }), fc.integer({ min: 0, max: 300_000 }), (cfg, raw, now) => {
      const since = [...raw].sort((a, b) => a - b);
      const p = planIdleStops(cfg, since, now);
      const floor = cfg.pm === 'static' ? since.length : cfg.pm === 'dynamic' ? cfg.minSpare : 0;
      assert.ok(since.length - p.stop >= Math.min(floor, since.length));
      // Every stopped one has been idle at least as long as every kept one.
      if (p.stop > 0 && p.stop < since.length) assert.ok(since[p.stop - 1]! <= since[p.stop]!);
      if (p.recheckAt !== undefined) assert.ok(p.recheckAt > now);
      // Stopped ones were idle for at least the shortest threshold.
      for (let i = 0; i < p.stop; i++) assert.ok(now - since[i]! >= Math.min(1000, cfg.idleTimeout || Infinity));
    }),
  );
});
