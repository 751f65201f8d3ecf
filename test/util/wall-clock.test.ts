/**
 * WallClock: the epoch time status shows for a monotonic time, read against the wall
 * clock when asked.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WallClock } from '../../src/util/clock.js';
import { FakeClock } from '../pool/fake-clock.js';

test('a monotonic time maps to the epoch time that long before now', () => {
  const clock = new FakeClock();
  const wall = new WallClock(clock);
  const spawned = clock.now();
  clock.advance(60_000);
  const before = Date.now();
  const at = wall.at(spawned);
  const after = Date.now();
  assert.ok(at >= before - 60_000 - 1 && at <= after - 60_000 + 1, `${at} is a minute before ${before}..${after}`);
  assert.ok(Math.abs(wall.at(clock.now()) - Date.now()) <= 1, 'now is now');
});
