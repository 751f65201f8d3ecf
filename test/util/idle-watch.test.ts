import { test } from 'node:test';
import assert from 'node:assert/strict';
import { IdleWatch, DeadlineNode } from '../../src/util/idle-watch.js';
import { FakeClock } from '../pool/fake-clock.js';

interface Conn {
  name: string;
  activeAt: number;
}

function rig(timeoutMs = 1000): { clock: FakeClock; watch: IdleWatch<Conn>; idle: Array<[string, number]> } {
  const clock = new FakeClock();
  const idle: Array<[string, number]> = [];
  const watch = new IdleWatch<Conn>(clock, timeoutMs, (c) => idle.push([c.name, clock.now()]));
  return { clock, watch, idle };
}

test('an item is idle exactly timeoutMs after its last stamp, however often it was stamped', () => {
  const { clock, watch, idle } = rig();
  const start = clock.now();
  const a = new DeadlineNode<Conn>({ name: 'a', activeAt: 0 });
  watch.watch(a);
  for (let i = 0; i < 25; i++) {
    clock.advance(100);
    a.item.activeAt = clock.now(); // I/O: a stamp, no timer touched
  }
  assert.equal(clock.pending, 1);
  clock.advance(999);
  assert.deepEqual(idle, []);
  clock.advance(1);
  assert.deepEqual(idle, [['a', start + 3500]]);
  assert.equal(watch.watching(a), false);
  assert.equal(watch.length, 0);
});

test('a stamped entry goes back in deadline order: the ones behind it that are due first still expire on time', () => {
  const { clock, watch, idle } = rig();
  const start = clock.now();
  const a = new DeadlineNode<Conn>({ name: 'a', activeAt: 0 });
  const b = new DeadlineNode<Conn>({ name: 'b', activeAt: 0 });
  const c = new DeadlineNode<Conn>({ name: 'c', activeAt: 0 });
  watch.watch(a);
  clock.advance(200);
  watch.watch(b);
  clock.advance(200);
  a.item.activeAt = clock.now(); // a due at 1400, after b (1200), before c (1500)
  clock.advance(100);
  watch.watch(c);
  clock.advance(2000);
  assert.deepEqual(idle, [['b', start + 1200], ['a', start + 1400], ['c', start + 1500]]);
});

test('stop: an item no longer watched is never reported; watched again, from then', () => {
  const { clock, watch, idle } = rig();
  const start = clock.now();
  const a = new DeadlineNode<Conn>({ name: 'a', activeAt: 0 });
  watch.watch(a);
  clock.advance(500);
  watch.stop(a);
  clock.advance(1000);
  assert.deepEqual(idle, []);
  watch.watch(a);
  clock.advance(1000);
  assert.deepEqual(idle, [['a', start + 2500]]);
});
