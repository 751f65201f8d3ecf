/**
 * The operator's pool actions on a SpawnedPool of fake workers and a fake clock:
 * rollingRestart() (one worker at a time, never more than one worker's capacity missing,
 * each old worker retired only once replacements keep up) and drain() (idle workers at
 * once, busy ones after their request, the queue kept).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ErrorCodes, ProxyError } from '../../src/errors.js';
import type { PoolActionReport } from '../../src/pool/types.js';
import type { FakeWorker } from './fake-worker.js';
import { setup } from './spawned-harness.js';

type Env = ReturnType<typeof setup>;

const flush = (): Promise<void> => new Promise((r) => setImmediate(r));

async function started(over: Parameters<typeof setup>[0]): Promise<Env> {
  const env = setup(over);
  const s = env.pool.start();
  env.clock.advance(10);
  await s;
  return env;
}

/** Workers that are up and not on their way out (the pool's capacity). */
function serving(env: Env): FakeWorker[] {
  return env.wf.workers.filter((w) => w.state === 'idle' || w.state === 'busy');
}

interface Trace {
  minServing: number;
  /** At each retire of an old worker: how many replacements were ready then. */
  readyAtRetire: number[];
  report: PoolActionReport;
}

/** Runs the action 1 ms at a time; a draining worker's request is finished, as its client would see it end. */
async function trace(env: Env, action: Promise<PoolActionReport>, old: FakeWorker[]): Promise<Trace> {
  let report: PoolActionReport | undefined;
  let failure: unknown;
  action.then((r) => (report = r), (e: unknown) => (failure = e));
  const t = { minServing: Infinity, readyAtRetire: [] as number[] };
  const retired = new Set<FakeWorker>();
  for (let i = 0; i < 500 && report === undefined && failure === undefined; i++) {
    env.clock.advance(1);
    await flush();
    for (const w of old) {
      if (w.retireReason === undefined || retired.has(w)) continue;
      retired.add(w);
      t.readyAtRetire.push(env.wf.workers.filter((n) => !old.includes(n) && n.state !== 'spawning' && n.state !== 'exited').length);
      if (w.state === 'draining') env.ep(w).finish();
    }
    t.minServing = Math.min(t.minServing, serving(env).length);
  }
  if (failure !== undefined) throw failure;
  assert.ok(report, 'the action ended');
  return { ...t, report };
}

test('rolling restart of a static pool: one worker at a time, never fewer than N-1 serving, a busy one after its request', async () => {
  const env = await started({ pm: 'static', maxChildren: 3 });
  const old = [...env.wf.workers];
  const [busy] = env.send(1);
  assert.equal(old.filter((w) => w.state === 'busy').length, 1);
  const t = await trace(env, env.pool.rollingRestart(), old);
  assert.ok(t.minServing >= 2, `at most one worker's capacity missing (min ${t.minServing})`);
  // At max_children the old worker goes first; the k-th goes only once k-1 replacements are ready.
  assert.deepEqual(t.readyAtRetire, [0, 1, 2]);
  for (const w of old) {
    assert.equal(w.state, 'exited');
    assert.equal(w.retireReason, 'restart');
  }
  assert.equal(serving(env).length, 3);
  assert.deepEqual(t.report.retired.sort(), old.map((w) => w.pid).sort());
  assert.equal(t.report.started.length, 3);
  assert.equal(busy!.sink.status, 200, 'the request running on an old worker finished there');
  assert.equal(env.pool.snapshot().recycles['restart'], 3);
});

test('rolling restart with room under max_children: a replacement is ready before each old worker goes', async () => {
  const env = await started({ pm: 'ondemand', maxChildren: 4 });
  env.send(2);
  env.clock.advance(10);
  for (const w of env.wf.workers) env.ep(w).finish();
  const old = [...env.wf.workers];
  assert.equal(serving(env).length, 2);
  const t = await trace(env, env.pool.rollingRestart(), old);
  assert.ok(t.minServing >= 2, `capacity never drops (min ${t.minServing})`);
  assert.deepEqual(t.readyAtRetire, [1, 2]);
  assert.ok(env.wf.workers.length <= 4);
  assert.deepEqual(serving(env).map((w) => old.includes(w)), [false, false]);
});

test('rolling restart: a replacement that does not start stops it, the old workers left keep serving', async () => {
  const env = await started({ pm: 'static', maxChildren: 2 });
  const old = [...env.wf.workers];
  env.wf.plan = { spawnFailAfter: 5 };
  await assert.rejects(trace(env, env.pool.rollingRestart(), old), (e: unknown) => e instanceof ProxyError && e.code === ErrorCodes.RESTART_ABORTED);
  assert.equal(old.filter((w) => w.state === 'idle').length, 1, 'the second old worker was not retired');
  assert.ok(env.lines.some((l) => l.code === ErrorCodes.RESTART_ABORTED));
});

test('two rolling restarts asked at once are one', async () => {
  const env = await started({ pm: 'static', maxChildren: 2 });
  const a = env.pool.rollingRestart();
  assert.equal(env.pool.rollingRestart(), a);
  const t = await trace(env, a, [...env.wf.workers.slice(0, 2)]);
  assert.equal(t.report.started.length, 2);
});

test('drain: idle workers retired at once, busy ones after their request, a queued request is served by a new worker', async () => {
  const env = await started({ pm: 'ondemand', maxChildren: 3 });
  const first = env.send(3);
  env.clock.advance(10);
  const [w1, w2, w3] = env.wf.workers as [FakeWorker, FakeWorker, FakeWorker];
  env.ep(w1).finish();
  assert.equal(w1.state, 'idle');
  const report = await env.pool.drain();
  assert.equal(w1.state, 'stopping', 'the idle worker goes at once');
  assert.deepEqual([w2.state, w3.state], ['draining', 'draining'], 'busy ones finish their request first');
  assert.equal(report.retired.length, 3);
  assert.equal(env.wf.workers.length, 3, 'ondemand: nothing started while nothing waits');
  // A request arriving now waits (every place under max_children is still held) and is not dropped.
  const [late] = env.send(1);
  assert.equal(env.pool.snapshot().queued, 1);
  env.ep(w2).finish();
  env.clock.advance(5); // w1 and w2 exit; a fresh worker starts for the waiting request
  assert.equal(env.wf.workers.length, 4);
  env.clock.advance(10);
  const fresh = env.wf.workers[3]!;
  assert.equal(fresh.state, 'busy');
  env.ep(fresh).finish();
  env.ep(w3).finish();
  env.clock.advance(5);
  for (const r of [...first, late!]) assert.equal(r.sink.status, 200);
  assert.equal(w3.state, 'exited');
  assert.equal(w3.retireReason, 'drain');
});

test('drain of a static pool is a rolling restart: it never stops serving', async () => {
  const env = await started({ pm: 'static', maxChildren: 2 });
  const old = [...env.wf.workers];
  const t = await trace(env, env.pool.drain(), old);
  assert.equal(t.report.action, 'restart');
  assert.ok(t.minServing >= 1);
  assert.equal(serving(env).length, 2);
});
