// A reload that changes only a pool's scaling keys retunes the running pool: the same
// workers serve on, and the new keys rule from the commit (fake workers, fake clock).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { keysRetuned, retunesInPlace } from '../../src/pool/retune.js';
import { setup } from './spawned-harness.js';

test('scaling keys alone retune in place; anything else, or no change, does not', () => {
  const { cfg } = setup({ pm: 'ondemand', maxChildren: 4 });
  assert.equal(retunesInPlace(cfg, { ...cfg, maxChildren: 8, idleTimeout: 1000 }), true);
  assert.deepEqual(keysRetuned(cfg, { ...cfg, maxChildren: 8, idleTimeout: 1000 }), ['max_children', 'idle_timeout']);
  assert.equal(retunesInPlace(cfg, { ...cfg }), false, 'nothing changed: nothing to retune');
  assert.equal(retunesInPlace(cfg, { ...cfg, maxChildren: 8, env: { A: '1' } }), false, 'env too: a new generation');
  assert.equal(retunesInPlace(cfg, { ...cfg, pm: 'dynamic' }), false, 'pm: a new generation');
  assert.equal(retunesInPlace(cfg, { ...cfg, maxRequests: 10 }), false, 'max_requests: what workers started with');
});

test('retune: a static pool keeps its workers, grows to a higher max_children and retires the idle surplus of a lower one first', async () => {
  const { pool, clock, wf, ep, send, cfg } = setup({ pm: 'static', maxChildren: 3 });
  const started = pool.start();
  clock.advance(10);
  await started;
  const first = wf.workers.map((w) => w.pid);
  pool.retune!({ ...cfg, maxChildren: 5 })!();
  assert.equal(wf.workers.length, 5, 'two more started at once');
  clock.advance(10);
  assert.equal(wf.count('idle'), 5);
  assert.deepEqual(wf.workers.slice(0, 3).map((w) => w.pid), first);
  assert.ok(wf.workers.slice(0, 3).every((w) => w.state === 'idle'), 'the first three serve on');
  assert.equal(pool.snapshot().maxChildren, 5);

  // Three busy, two idle; down to 2: both idle ones go now, one busy one after its request.
  send(3);
  const busy = wf.workers.filter((w) => w.state === 'busy');
  assert.equal(busy.length, 3);
  pool.retune!({ ...cfg, maxChildren: 2 })!();
  clock.advance(10);
  assert.equal(wf.workers.filter((w) => w.state === 'exited').length, 2, 'the idle surplus stopped');
  assert.deepEqual(busy.map((w) => w.state).sort(), ['busy', 'busy', 'draining'], 'one busy worker goes after its request');
  for (const w of busy) ep(w).finish();
  clock.advance(10);
  assert.equal(wf.live.length, 2);
  assert.equal(wf.workers.length, 5, 'and nothing new was started');
  assert.equal(pool.snapshot().completed, 3);
});

test('retune: a longer idle_timeout keeps idle ondemand workers that the old one would have stopped', async () => {
  const { pool, clock, wf, ep, send, cfg } = setup({ pm: 'ondemand', maxChildren: 2, idleTimeout: 1000 });
  send(2);
  clock.advance(10);
  for (const w of wf.workers) ep(w).finish();
  pool.retune!({ ...cfg, idleTimeout: 60_000 })!();
  clock.advance(5_000);
  assert.equal(wf.live.length, 2, 'idle 5 s under the new 60 s timeout');
  clock.advance(60_000);
  assert.equal(wf.live.length, 0);
  assert.equal(pool.retune!({ ...cfg, idleTimeout: 60_000, env: { X: '1' } }), undefined, 'an env change is not taken in place');
});
