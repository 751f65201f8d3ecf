// The host's memory rounds (src/memory/rounds.ts) on a fake clock: one timer for every
// pool's round, the budget check once a pass and only after asynchronous reads settle,
// and a round that throws costs the other pools nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryRounds, type RoundTaker } from '../../src/memory/rounds.js';
import { FakeClock } from '../pool/fake-clock.js';

function taker(rounds: MemoryRounds, clock: FakeClock, every: number, body: () => Promise<void> | void = () => undefined): RoundTaker & { runs: number[] } {
  const t = {
    runs: [] as number[],
    round(): Promise<void> | void {
      t.runs.push(clock.now());
      rounds.schedule(t, clock.now() + every);
      return body();
    },
  };
  return t;
}

test('memory rounds: rounds due together run in one pass; each keeps its own interval', () => {
  const clock = new FakeClock();
  let checks = 0;
  const rounds = new MemoryRounds(clock, () => void checks++);
  const a = taker(rounds, clock, 1000);
  const b = taker(rounds, clock, 3000);
  const t0 = clock.now();
  rounds.schedule(a, t0 + 1000);
  rounds.schedule(b, t0 + 1000);
  assert.equal(clock.pending, 1, 'one timer for both');
  clock.advance(3000);
  assert.deepEqual(a.runs, [t0 + 1000, t0 + 2000, t0 + 3000]);
  assert.deepEqual(b.runs, [t0 + 1000]);
  assert.equal(rounds.passes, 3);
  assert.equal(checks, 3, 'the budget once a pass');
  rounds.cancel(a);
  clock.advance(1000);
  assert.deepEqual(b.runs, [t0 + 1000, t0 + 4000]);
  assert.equal(a.runs.length, 3, 'cancelled: no round');
  rounds.dispose();
  clock.advance(10_000);
  assert.equal(b.runs.length, 2, 'disposed: nothing runs');
});

test('memory rounds: the budget check waits for asynchronous reads; a throwing round is thrown after the others ran', async () => {
  const clock = new FakeClock();
  let checks = 0;
  const rounds = new MemoryRounds(clock, () => void checks++);
  let release!: () => void;
  const slow = taker(rounds, clock, 1000, () => new Promise<void>((r) => (release = r)));
  const bad = { round: (): void => { throw new Error('round failed'); } };
  const after = taker(rounds, clock, 1000);
  rounds.schedule(slow, clock.now() + 1000);
  rounds.schedule(bad, clock.now() + 1000);
  rounds.schedule(after, clock.now() + 1000);
  assert.throws(() => clock.advance(1000), /round failed/);
  assert.equal(after.runs.length, 1, 'the round after the throwing one ran');
  await Promise.resolve();
  assert.equal(checks, 0, 'reads in flight: no check yet');
  release();
  await new Promise((r) => setImmediate(r));
  assert.equal(checks, 1);
  clock.advance(1000);
  assert.equal(after.runs.length, 2, 'the timer was armed again after the throw');
});
