// A reload's hand-over (pool/handover.ts): the new generation's workers take their first
// requests a few at a time while the old generation's idle workers take the rest, and it
// ends once every new worker has served (fake workers, fake clocks).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { canHandOver, HandoverPool } from '../../src/pool/handover.js';
import { PACE_MS } from '../../src/pool/workers/supervisor.js';
import { reloadStart } from '../../src/daemon/reload.js';
import { makeRequest } from './helpers.js';
import { setup } from './spawned-harness.js';

async function started(over = {}) {
  const s = setup({ pm: 'static', maxChildren: 2, ...over });
  const p = s.pool.start();
  s.clock.advance(10);
  await p;
  return s;
}

type Started = Awaited<ReturnType<typeof started>>;

/** A hand-over from `old` to `neu`, one first request at a time; `send` dispatches a request through it, `ended` counts its ends. */
function handOver(neu: Started, old: Started) {
  const counts = { ended: 0 };
  const chain = new HandoverPool(neu.pool, old.pool, { clock: neu.clock, firstAtOnce: 1, quietMs: 1000, maxMs: 10_000, ended: () => void counts.ended++ });
  const send = () => {
    const r = makeRequest({ SCRIPT_FILENAME: '/srv/app/index.php' });
    chain.dispatch(r.ex);
    return r;
  };
  return { send, ended: () => counts.ended };
}

test('hand-over: one first request at a time on the new workers, the rest on the old ones, then the new pool alone', async () => {
  const old = await started();
  const neu = await started();
  const { send, ended } = handOver(neu, old);
  const [a, b, c] = [send(), send(), send()];
  const [n1, n2] = neu.wf.workers;
  const [o1, o2] = old.wf.workers;
  assert.equal(neu.ep(n2!).running[0]?.ex, a.ex, 'the first goes to a new worker (the most recently offered)');
  assert.deepEqual([old.ep(o2!).running[0]?.ex, old.ep(o1!).running[0]?.ex], [b.ex, c.ex], 'the next two to the old generation, while a first request runs');
  // The old generation is busy: a fourth waits in its queue, not on a second first request.
  const d = send();
  assert.equal(neu.ep(n1!).running.length, 0);
  assert.equal(old.pool.snapshot().queued, 1);
  old.ep(o1!).finish();
  assert.equal(old.ep(o1!).running[0]?.ex, d.ex, 'the old worker takes it next');
  neu.ep(n2!).finish();
  old.ep(o1!).finish();
  // n2 has served: warm, it takes the next one.
  const e = send();
  assert.equal(neu.ep(n2!).running[0]?.ex, e.ex);
  assert.equal(ended(), 0, 'n1 has not served yet');
  // Its first request: n2 is busy, no first request runs.
  const g = send();
  assert.equal(neu.ep(n1!).running[0]?.ex, g.ex);
  neu.ep(n1!).finish();
  neu.clock.advance(100);
  assert.equal(ended(), 1, 'every new worker has served: over');
  const f = send();
  assert.equal(neu.ep(n1!).running[0]?.ex, f.ex);
  assert.equal(old.pool.snapshot().completed, 2);
});

test('hand-over: it ends after quietMs without a request, and at stop', async () => {
  const old = await started();
  const neu = await started();
  let ended = 0;
  const chain = new HandoverPool(neu.pool, old.pool, { clock: neu.clock, firstAtOnce: 1, quietMs: 1000, maxMs: 10_000, ended: () => void ended++ });
  neu.clock.advance(900);
  assert.equal(ended, 0);
  neu.clock.advance(200);
  assert.equal(ended, 1, 'no request for a second: the new pool serves alone');
  const again = new HandoverPool(neu.pool, old.pool, { clock: neu.clock, firstAtOnce: 1, quietMs: 1000, maxMs: 10_000, ended: () => void ended++ });
  const stopped = again.stop(0);
  assert.equal(ended, 2);
  neu.clock.advance(10_000);
  await stopped;
  await again.ended;
  void chain;
});

test('hand-over to a php-cgi group: its first request runs alone (it fills the opcache its children share), then all its seats serve', async () => {
  const old = await started();
  const neu = await started({ maxChildren: 4, groupSize: 4 });
  assert.ok(canHandOver(old.pool, neu.pool), 'a reload hands over to a group too');
  const { send, ended } = handOver(neu, old);
  const running = () => neu.seatEps(neu.wf.workers[0]!).flatMap((e) => e.running);
  const [o1, o2] = old.wf.workers;
  const [a, b, c] = [send(), send(), send()];
  assert.deepEqual(running().map((r) => r.ex), [a.ex], 'one request on the group while its first runs');
  assert.deepEqual([old.ep(o2!).running[0]?.ex, old.ep(o1!).running[0]?.ex], [b.ex, c.ex], 'the others on the old generation');
  assert.equal(ended(), 0);
  neu.seatEps(neu.wf.workers[0]!).find((e) => e.running.length > 0)!.finish();
  // The group has served: every seat is warm, and the hand-over is over.
  const more = [send(), send(), send(), send()];
  assert.equal(ended(), 1, 'the group has served: the new pool serves alone');
  assert.deepEqual(new Set(running().map((r) => r.ex)), new Set(more.map((r) => r.ex)), 'all four seats of the group take requests at once');
});

test('a reload during a hand-over: the newest generation hands over from the warm old one, not from the one still taking its first request; the old one is released only when the newest is warm', async () => {
  const old = await started();
  const mid = await started();
  const neu = await started();
  const opts = (s: Started) => ({ clock: s.clock, firstAtOnce: 1, quietMs: 1000, maxMs: 10_000, ended: () => {} });
  const first = new HandoverPool(mid.pool, old.pool, opts(mid));
  const send = (p: HandoverPool) => {
    const r = makeRequest({ SCRIPT_FILENAME: '/srv/app/index.php' });
    p.dispatch(r.ex);
    return r;
  };
  const a = send(first);
  const [m1] = mid.wf.workers.filter((w) => mid.ep(w).running.length > 0);
  assert.equal(mid.ep(m1!).running[0]?.ex, a.ex, 'the middle generation takes its first request');
  let released = false;
  void first.released.then(() => (released = true));
  // The next reload commits while that first request runs (daemon/reload.ts: from = cur.prev).
  const second = new HandoverPool(neu.pool, first.prev, { ...opts(neu), since: first.since });
  first.passPrevTo(second);
  await first.ended;
  const [b, c, d] = [send(second), send(second), send(second)];
  const onNew = neu.wf.workers.flatMap((w) => neu.ep(w).running.map((r) => r.ex));
  const onOld = old.wf.workers.flatMap((w) => old.ep(w).running.map((r) => r.ex));
  assert.deepEqual(onNew, [b.ex], 'one first request on the newest');
  assert.deepEqual(new Set(onOld), new Set([c.ex, d.ex]), 'the rest on the warm old generation');
  assert.equal(mid.wf.workers.flatMap((w) => mid.ep(w).running).length, 1, 'none more on the middle one');
  await Promise.resolve();
  assert.equal(released, false, 'the old generation serves on: not released when the replaced hand-over ended');
  second.end('warm');
  await second.released;
  await first.released;
  assert.equal(released, true);
});

test('a reload paced by first requests (afterServed): its start resolves with one worker, the next starts once that one has served, and the hand-over lasts until the last has served', async () => {
  const old = await started();
  const neu = setup({ pm: 'ondemand', maxChildren: 3 });
  const tick = async (ms: number) => {
    neu.clock.advance(ms);
    await new Promise((r) => setImmediate(r));
  };
  const start = neu.pool.start({ seats: 3, step: 1, afterServed: true });
  for (let i = 0; i < 3; i++) await tick(10);
  await start;
  assert.equal(neu.wf.workers.length, 1, 'one worker before the commit (the code before spawned the next as each got ready)');
  const { send, ended } = handOver(neu, old);
  const [a, b] = [send(), send()];
  const [n1] = neu.wf.workers;
  assert.equal(neu.ep(n1!).running[0]?.ex, a.ex, 'its first request');
  assert.ok(old.wf.workers.some((w) => old.ep(w).running[0]?.ex === b.ex), 'the next on the old generation');
  await tick(500);
  assert.equal(neu.wf.workers.length, 1, 'no second cold worker while the first loads the application');
  neu.ep(n1!).finish();
  assert.equal(neu.wf.workers.length, 2, 'the first has served: the next step starts');
  const c = send();
  assert.equal(ended(), 0, 'the next worker is starting: the hand-over goes on (not over when the first served)');
  assert.equal(neu.ep(n1!).running[0]?.ex, c.ex, 'the warm one takes it');
  neu.ep(n1!).finish();
  await tick(10);
  await tick(100);
  assert.equal(ended(), 0, 'a worker is still to come: the old generation still serves beside');
  // No request reaches the second one: it is not waited for longer than PACE_MS.
  await tick(PACE_MS);
  assert.equal(neu.wf.workers.length, 3, 'the third starts after PACE_MS without a first request on the second');
  await tick(10);
  // Two requests at a time: a warm worker takes one, a cold one (no first request runs) the other.
  const finishAll = (g: Started | typeof neu) => {
    for (const w of g.wf.workers) while (g.ep(w).running.length > 0) g.ep(w).finish();
  };
  for (let i = 0; i < 3 && neu.pool.warmth()!.unserved > 0; i++) {
    send();
    send();
    finishAll(neu);
    finishAll(old);
  }
  await tick(100);
  assert.equal(ended(), 1, 'every new worker has served and none is to come: over');
  assert.equal(neu.wf.workers.length, 3, 'never more than the seats asked for');
});

test('a reload during a hand-over: the newest generation is as wide as the old generation that serves (not the replaced one still starting), and paced by first requests', async () => {
  const old = await started();
  const neu = setup({ pm: 'ondemand', maxChildren: 2 });
  const start = neu.pool.start({ seats: 2, step: 1, afterServed: true });
  neu.clock.advance(10);
  await start;
  const chain = new HandoverPool(neu.pool, old.pool, { clock: neu.clock, firstAtOnce: 1, quietMs: 1000, maxMs: 10_000, ended: () => {} });
  for (let i = 0; i < 2; i++) chain.dispatch(makeRequest({ SCRIPT_FILENAME: '/srv/app/index.php' }).ex);
  assert.equal(old.pool.snapshot().active, 1, 'the old generation serves');
  const w = reloadStart(chain);
  assert.equal(w?.seats, 2, 'two seats: the old generation has two ready (the new one one)');
  assert.equal(w?.afterServed, true);
  assert.equal(reloadStart(undefined), undefined, 'a new pool: its own initial workers');
});
