/**
 * PoolRegistry.get keeps the pool it found last at hand: every change of the live pools
 * (put, swap, retire, obtain) must show in the next get, as a Map look-up would.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PoolGenerations } from '../../src/control/generations.js';
import type { PoolConfig } from '../../src/config/types.js';
import { silentLogger } from '../../src/log/log.js';
import { PoolRegistry } from '../../src/daemon/pool-registry.js';
import type { Pool } from '../../src/pool/types.js';

function fakePool(name: string, tag: string): Pool {
  return { name, tag, start: () => Promise.resolve(), stop: () => Promise.resolve(), snapshot: () => ({}) } as unknown as Pool;
}

test('get follows put, swap, retire and obtain, the pool found last included', async () => {
  let made = 0;
  const registry = new PoolRegistry(new PoolGenerations(), (cfg) => fakePool(cfg.name, `made${++made}`), silentLogger());
  const a1 = fakePool('a', 'a1');
  const b1 = fakePool('b', 'b1');
  registry.put(a1, () => Promise.resolve());
  registry.put(b1, () => Promise.resolve());
  assert.equal(registry.get('a'), a1);
  assert.equal(registry.get('a'), a1); // at hand now
  assert.equal(registry.get('b'), b1);
  assert.equal(registry.get('c'), undefined);

  const a2 = fakePool('a', 'a2');
  assert.equal(registry.get('a'), a1);
  registry.put(a2, () => Promise.resolve());
  assert.equal(registry.get('a'), a2, 'a replacement put in service');

  const a3 = fakePool('a', 'a3');
  registry.swap(a2, a3);
  assert.equal(registry.get('a'), a3, 'swapped in');

  let stopped!: () => void;
  registry.retire('a', () => new Promise<void>((resolve) => (stopped = resolve)));
  assert.equal(registry.get('a'), a3, 'still draining: reached by a closing listener');
  stopped();
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(registry.get('a'), undefined, 'gone once stopped');

  const a4 = registry.obtain('a', () => ({ name: 'a' }) as PoolConfig);
  assert.equal((a4 as unknown as { tag: string }).tag, 'made1');
  assert.equal(registry.get('a'), a4, 'made on first use');
});
