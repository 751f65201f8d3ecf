// busy_cpu_slice's switch: on at the first request that has to wait, held while requests
// keep waiting, off once none has waited for HOLD_MS; one call to the kernel per switch.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BusySlice, HOLD_MS } from '../../src/pool/workers/busy-slice.js';
import { FakeClock } from './fake-clock.js';

test('the long slice goes on when a request waits and off a hold after the last one', () => {
  const clock = new FakeClock();
  const calls: boolean[] = [];
  const s = new BusySlice(clock, (on) => calls.push(on));
  assert.equal(s.busy, false);
  s.queued();
  assert.deepEqual(calls, [true]);
  // Requests keep waiting: no switch, however long.
  for (let i = 0; i < 10; i++) {
    clock.advance(HOLD_MS / 2);
    s.queued();
  }
  assert.deepEqual(calls, [true], 'held while requests wait');
  clock.advance(HOLD_MS - 1);
  assert.deepEqual(calls, [true], 'not before a whole hold without a waiting request');
  clock.advance(1);
  assert.deepEqual(calls, [true, false]);
  assert.equal(s.busy, false);
  assert.equal(clock.pending, 0, 'no timer left');
  s.queued();
  assert.deepEqual(calls, [true, false, true], 'on again at the next wait');
  s.dispose();
  assert.equal(clock.pending, 0, 'dispose clears the timer');
  assert.deepEqual(calls, [true, false, true, false], 'and gives the default slice back (workers handed on)');
});
