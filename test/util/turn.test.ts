import { test } from 'node:test';
import assert from 'node:assert/strict';
import { atTurnEnd, closeTurn, openTurn, turnNow, type TurnEnd } from '../../src/util/turn.js';

function recorder(log: string[], name: string, then?: () => void): TurnEnd {
  return {
    endOfTurn() {
      log.push(name);
      then?.();
    },
  };
}

test('inside a turn: what is due runs when the outermost turn closes, in order, before the ticks queued in it', async () => {
  const log: string[] = [];
  openTurn();
  process.nextTick(() => log.push('tick'));
  atTurnEnd(recorder(log, 'a'));
  openTurn(); // a nested handler (a listener called from another)
  atTurnEnd(recorder(log, 'b'));
  closeTurn();
  assert.deepEqual(log, [], 'a nested close runs nothing');
  closeTurn();
  assert.deepEqual(log, ['a', 'b']);
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(log, ['a', 'b', 'tick']);
});

test('what asks while the turn end runs is run in the same loop', () => {
  const log: string[] = [];
  openTurn();
  atTurnEnd(recorder(log, 'a', () => atTurnEnd(recorder(log, 'b'))));
  closeTurn();
  assert.deepEqual(log, ['a', 'b']);
});

test('outside a turn it is a process.nextTick', async () => {
  const log: string[] = [];
  atTurnEnd(recorder(log, 'a'));
  assert.deepEqual(log, []);
  await new Promise((r) => process.nextTick(r));
  assert.deepEqual(log, ['a']);
});

test('one that throws: the others still run (on the next tick) and the next turn works', async () => {
  const log: string[] = [];
  openTurn();
  atTurnEnd(recorder(log, 'a', () => {
    throw new Error('boom');
  }));
  atTurnEnd(recorder(log, 'b'));
  assert.throws(() => closeTurn(), /boom/);
  assert.deepEqual(log, ['a']);
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(log, ['a', 'b']);
  openTurn();
  atTurnEnd(recorder(log, 'c'));
  closeTurn();
  assert.deepEqual(log, ['a', 'b', 'c']);
});

test('the clock is read once a turn: every reading inside one gets the time of the first', () => {
  const spin = (ms: number): void => {
    const end = performance.now() + ms;
    while (performance.now() < end);
  };
  openTurn();
  const first = turnNow();
  spin(3);
  assert.equal(turnNow(), first);
  closeTurn();
  assert.ok(turnNow() >= first + 3, 'outside a turn: the time now');
  openTurn();
  assert.ok(turnNow() >= first + 3, 'a new turn reads it again');
  closeTurn();
});
