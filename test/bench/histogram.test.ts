// The log-linear histogram against exact percentiles of the same samples.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Histogram } from '../../src/bench/histogram.js';

function exactPercentile(sorted: number[], p: number): number {
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1]!;
}

test('values below 256 µs are exact; min, max, avg are exact', () => {
  const h = new Histogram();
  for (let v = 0; v < 256; v++) h.record(v);
  assert.equal(h.count, 256);
  assert.equal(h.min, 0);
  assert.equal(h.max, 255);
  assert.equal(h.summary().avg, 127.5);
  assert.equal(h.percentile(50), 127);
  assert.equal(h.percentile(99), 253);
  assert.equal(h.percentile(100), 255);
});

test('every percentile is within 1/128 of the exact one, for any samples', () => {
  fc.assert(
    fc.property(fc.array(fc.integer({ min: 0, max: 60_000_000 }), { minLength: 1, maxLength: 400 }), fc.constantFrom(1, 10, 50, 90, 99, 99.9), (xs, p) => {
      const h = new Histogram();
      for (const x of xs) h.record(x);
      const sorted = [...xs].sort((a, b) => a - b);
      const exact = exactPercentile(sorted, p);
      const got = h.percentile(p);
      assert.ok(Math.abs(got - exact) <= exact / 128 + 0.5, `p${p}: got ${got}, exact ${exact}`);
    }),
    { numRuns: 300 },
  );
});

test('merge equals recording everything in one histogram; reset empties', () => {
  const a = new Histogram();
  const b = new Histogram();
  const all = new Histogram();
  for (let i = 0; i < 5000; i++) {
    const v = (i * 7919) % 100_000;
    (i % 2 === 0 ? a : b).record(v);
    all.record(v);
  }
  a.merge(b);
  assert.deepEqual(a.summary(), all.summary());
  assert.deepEqual(a.buckets(), all.buckets());
  a.reset();
  assert.deepEqual(a.summary(), { count: 0, min: 0, avg: 0, p50: 0, p90: 0, p99: 0, max: 0 });
});

test('huge and negative values are clamped, not lost', () => {
  const h = new Histogram();
  h.record(-5);
  h.record(1e15);
  assert.equal(h.count, 2);
  assert.equal(h.min, 0);
  assert.equal(h.max, 0x7fffffff);
});
