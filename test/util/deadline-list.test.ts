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

test('extend keeps a due entry in place with a later deadline; the entries behind it still expire on time, and `ahead` counts the kept ones', () => {
  const clock = new FakeClock();
  const t0 = clock.now();
  const fired: Array<[string, number]> = [];
  const asked: Array<[string, number]> = [];
  // The first two due are kept until t0 + 250; the rest go.
  const list = new DeadlineList<string>(clock, 100, (s) => fired.push([s, clock.now() - t0]), (s, _n, ahead) => {
    asked.push([s, ahead]);
    return ahead < 2 && clock.now() < t0 + 250 ? t0 + 250 : undefined;
  });
  for (const s of ['a', 'b', 'c']) {
    list.push(new DeadlineNode(s));
    clock.advance(10);
  }
  clock.advance(100);
  assert.deepEqual(fired, [['c', 120]]);
  assert.deepEqual(asked, [['a', 0], ['b', 1], ['c', 2]]);
  assert.deepEqual([list.first?.item, list.last?.item], ['a', 'b']);
  clock.advance(130);
  assert.deepEqual(fired, [['c', 120], ['a', 250], ['b', 250]]);
  assert.equal(list.length, 0);
});
