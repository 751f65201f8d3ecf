/**
 * SharedTimer: many periodic jobs on one timer, driven by the fake clock: each runs at its
 * own time, one timer is pending however many jobs wait, and jobs that schedule or
 * cancel while the timer fires are honoured.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SharedTimer, type TimedJob } from '../../src/util/clock.js';
import { FakeClock } from '../pool/fake-clock.js';

function job(log: string[], name: string, then?: () => void): TimedJob {
  return { dueAt: Infinity, run: () => { log.push(name); then?.(); } };
}

test('jobs run at their own times, on one pending timer', () => {
  const clock = new FakeClock();
  const t = new SharedTimer(clock);
  const log: string[] = [];
  const jobs = Array.from({ length: 50 }, (_, i) => job(log, `j${i}`));
  jobs.forEach((j, i) => t.schedule(j, clock.now() + 100 + (i % 2) * 100));
  assert.equal(clock.pending, 1, 'one timer for fifty jobs');
  clock.advance(99);
  assert.deepEqual(log, []);
  clock.advance(1);
  assert.deepEqual(log, jobs.filter((_, i) => i % 2 === 0).map((_, k) => `j${2 * k}`), 'the due half, in the order they asked');
  assert.equal(clock.pending, 1);
  clock.advance(100);
  assert.equal(log.length, 50);
  assert.equal(clock.pending, 0, 'nothing armed once no job asked again');
  assert.equal(t.scheduled(jobs[0]!), false);
});

test('a job that asks again from its run keeps its beat; an earlier ask moves the timer', () => {
  const clock = new FakeClock();
  const t = new SharedTimer(clock);
  const log: string[] = [];
  const every: TimedJob = job(log, 'tick', () => t.schedule(every, clock.now() + 1000));
  t.schedule(every, clock.now() + 1000);
  const late = job(log, 'late');
  t.schedule(late, clock.now() + 5000);
  const early = job(log, 'early');
  t.schedule(early, clock.now() + 10); // earlier than the pending time
  clock.advance(3000);
  assert.deepEqual(log, ['early', 'tick', 'tick', 'tick']);
  t.schedule(late, clock.now() + 1); // a new time replaces the old one
  clock.advance(1);
  assert.deepEqual(log.slice(-1), ['late']);
  clock.advance(2000);
  assert.deepEqual(log.filter((x) => x === 'late'), ['late'], 'not again at its old time');
});

test('cancel: before its time, and from another job run at the same moment', () => {
  const clock = new FakeClock();
  const t = new SharedTimer(clock);
  const log: string[] = [];
  const b = job(log, 'b');
  const a = job(log, 'a', () => t.cancel(b));
  const c = job(log, 'c');
  t.schedule(a, clock.now() + 100);
  t.schedule(b, clock.now() + 100);
  t.schedule(c, clock.now() + 50);
  t.cancel(c);
  clock.advance(200);
  assert.deepEqual(log, ['a'], 'c cancelled before, b by a in the same firing');
  assert.equal(clock.pending, 0);
  t.schedule(b, clock.now() + 10);
  clock.advance(10);
  assert.deepEqual(log, ['a', 'b'], 'a cancelled job may ask again');
});

test('afterFire runs once after the due jobs; the times they ask for are armed once; a job that throws costs the others nothing', () => {
  const clock = new FakeClock();
  let after = 0;
  const t = new SharedTimer(clock, () => void after++);
  const log: string[] = [];
  let armed = 0;
  const setTimer = clock.setTimer.bind(clock);
  clock.setTimer = (fn, ms) => {
    armed++;
    return setTimer(fn, ms);
  };
  // Each asks again as it runs, the later interval first: armed while firing, that would be two timers.
  const slow: TimedJob = job(log, 'slow', () => t.schedule(slow, clock.now() + 300));
  const fast: TimedJob = job(log, 'fast', () => t.schedule(fast, clock.now() + 100));
  t.schedule(slow, clock.now() + 100);
  t.schedule(fast, clock.now() + 100);
  armed = 0;
  clock.advance(100);
  assert.deepEqual(log, ['slow', 'fast']);
  assert.equal(after, 1, 'once for the two jobs');
  assert.equal(armed, 1, 'one arming for what they asked');
  const bad: TimedJob = { dueAt: Infinity, run: () => { throw new Error('job failed'); } };
  t.schedule(bad, clock.now() + 100);
  assert.throws(() => clock.advance(100), /job failed/);
  clock.advance(200);
  assert.deepEqual(log, ['slow', 'fast', 'fast', 'fast', 'slow', 'fast'], 'the others keep their times after the throw');
});
