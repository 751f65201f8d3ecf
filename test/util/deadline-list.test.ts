import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DeadlineList, DeadlineNode } from '../../src/util/deadline-list.js';
import { FakeClock } from '../pool/fake-clock.js';

test('entries expire in order from one timer; removed ones never fire', () => {
  const clock = new FakeClock();
  const fired: string[] = [];
  const list = new DeadlineList<string>(clock, 100, (s) => fired.push(s));
  const a = new DeadlineNode('a');
  const b = new DeadlineNode('b');
  const c = new DeadlineNode('c');
  list.push(a);
  clock.advance(30);
  list.push(b);
  clock.advance(30);
  list.push(c);
  assert.equal(clock.pending, 1);
  list.remove(b);
  clock.advance(40);
  assert.deepEqual(fired, ['a']);
  clock.advance(60);
  assert.deepEqual(fired, ['a', 'c']);
  assert.equal(list.length, 0);
  assert.equal(clock.pending, 0);
});

test('unshift puts an entry first without breaking deadline order; a node can be reused', () => {
  const clock = new FakeClock();
  const fired: string[] = [];
  const list = new DeadlineList<string>(clock, 100, (s) => fired.push(s));
  const a = new DeadlineNode('a');
  const r = new DeadlineNode('r');
  list.push(a);
  clock.advance(50);
  list.unshift(r); // deadline capped at a's
  assert.equal(list.first, r);
  clock.advance(50);
  assert.deepEqual(fired, ['r', 'a']);
  list.push(a); // reused
  clock.advance(100);
  assert.deepEqual(fired, ['r', 'a', 'a']);
});

test('timeout 0 never expires and arms no timer', () => {
  const clock = new FakeClock();
  const list = new DeadlineList<number>(clock, 0, () => assert.fail('expired'));
  list.push(new DeadlineNode(1));
  clock.advance(1e9);
  assert.equal(clock.pending, 0);
  assert.equal(list.length, 1);
});
