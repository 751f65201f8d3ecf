import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { BACKOFF_MAX_MS, CrashWindow, backoffDelay, restartDelay } from '../../src/worker/exit-policy.js';

test('back-off: 100 ms doubling, capped at 30 s', () => {
  assert.deepEqual([0, 1, 2, 3, 4, 5].map(backoffDelay), [0, 100, 200, 400, 800, 1600]);
  assert.equal(backoffDelay(9), 25_600);
  assert.equal(backoffDelay(10), BACKOFF_MAX_MS);
  assert.equal(backoffDelay(1000), BACKOFF_MAX_MS);
});

test('no restart sooner than a second after the last start, but only after crashes', () => {
  assert.equal(restartDelay(0, 10_000, 9_990), 0);
  assert.equal(restartDelay(1, 10_000, 9_950), 950); // started 50 ms ago
  assert.equal(restartDelay(1, 10_000, 5_000), 100); // long ago: plain back-off
  assert.equal(restartDelay(6, 10_000, 9_950), 3200);
});

test('CrashWindow: failing at crash_limit within crash_window, recovering as crashes age out (fake clock)', () => {
  const w = new CrashWindow(3, 60_000);
  let now = 1_000_000;
  assert.equal(w.failing(now), false);
  assert.equal(w.delay(now, now - 5000), 0);
  w.record(now);
  assert.equal(w.delay(now, now - 5000), 100);
  now += 10_000;
  w.record(now);
  assert.equal(w.count(now), 2);
  assert.equal(w.failing(now), false);
  now += 10_000;
  w.record(now);
  assert.equal(w.failing(now), true);
  assert.equal(w.delay(now, now - 5000), 400);
  // The first crash leaves the window 60 s after it happened.
  now = 1_000_000 + 60_000;
  assert.equal(w.count(now), 2);
  assert.equal(w.failing(now), false);
  now += 60_000;
  assert.equal(w.count(now), 0);
  assert.equal(w.delay(now, now - 10), 0);
  assert.equal(w.last, 1_020_000);
});

test('CrashWindow: limit 0 never fails; more crashes than the ring holds still count as failing', () => {
  const off = new CrashWindow(0, 60_000);
  for (let i = 0; i < 100; i++) off.record(i);
  assert.equal(off.failing(100), false);
  const w = new CrashWindow(5, 60_000);
  for (let i = 0; i < 100; i++) w.record(i * 10);
  assert.equal(w.failing(1000), true);
  assert.equal(w.delay(1000, 990), BACKOFF_MAX_MS);
});

test('CrashWindow.count matches a brute-force count over the recent crashes (property)', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 30 }),
      fc.integer({ min: 1, max: 10_000 }),
      fc.array(fc.integer({ min: 0, max: 5000 }), { maxLength: 60 }),
      fc.integer({ min: 0, max: 20_000 }),
      (limit, windowMs, gaps, after) => {
        const w = new CrashWindow(limit, windowMs);
        const times: number[] = [];
        let t = 0;
        for (const g of gaps) {
          t += g;
          times.push(t);
          w.record(t);
        }
        const now = t + after;
        const cap = Math.max(limit, 16);
        const expected = times.slice(-cap).filter((x) => x > now - windowMs).length;
        assert.equal(w.count(now), expected);
        assert.equal(w.failing(now), expected >= limit);
      },
    ),
  );
});

