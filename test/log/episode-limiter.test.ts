import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EpisodeLimiter } from '../../src/log/episode-limiter.js';
import { FakeClock } from '../pool/fake-clock.js';

function limiter(): { l: EpisodeLimiter<string>; clock: FakeClock; summaries: [string, number][] } {
  const clock = new FakeClock();
  const summaries: [string, number][] = [];
  const l = new EpisodeLimiter<string>({ intervalMs: 1000, timers: clock, summary: (k, n) => void summaries.push([k, n]) });
  return { l, clock, summaries };
}

test('EpisodeLimiter: the first occurrence logs at once, repeats become one count per interval', () => {
  const { l, clock, summaries } = limiter();
  assert.equal(l.hit('full'), true);
  for (let i = 0; i < 500; i++) assert.equal(l.hit('full'), false);
  assert.equal(l.hit('timeout'), true, 'keys are separate episodes');
  clock.advance(1000);
  assert.deepEqual(summaries, [['full', 500]]);
  l.hit('full'); // the flood goes on: still the same episode
  clock.advance(1000);
  assert.deepEqual(summaries, [['full', 500], ['full', 1]]);
  clock.advance(1000); // a quiet interval ends it
  assert.equal(l.hit('full'), true, 'the next occurrence starts a new episode');
});

test('EpisodeLimiter: flush() summarises open episodes now and ends them', () => {
  const { l, clock, summaries } = limiter();
  l.hit('a');
  l.hit('a');
  l.hit('b');
  l.flush();
  assert.deepEqual(summaries, [['a', 1]]);
  clock.advance(5000);
  assert.deepEqual(summaries, [['a', 1]], 'no timer left behind');
  assert.equal(l.hit('a'), true);
});
