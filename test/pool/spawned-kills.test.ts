/**
 * Workers killed from outside (OOM killer, an operator's kill -9) against a spawned pool on
 * fake workers and a fake clock: a killed worker costs only its own request, is replaced at
 * once, and does not count toward crash_limit, whenever the kill comes (before ready,
 * before its first request ended, or later); workers that crash by themselves (exit
 * before ready, a crash signal soon after start) do. The breaker never strands a queued request.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ErrorCodes } from '../../src/errors.js';
import { BACKOFF_MAX_MS } from '../../src/worker/exit-policy.js';
import { EARLY_EXIT_MS } from '../../src/pool/workers/exit-verdict.js';
import type { FakeWorker } from './fake-worker.js';
import type { TestRequest } from './helpers.js';
import { closed, refused, setup } from './spawned-harness.js';

type Pool = ReturnType<typeof setup>;

/** SIGKILL from outside: the exit, then the endpoint's report of the closed connection. */
function kill(p: Pool, w: FakeWorker): void {
  w.exit(null, 'SIGKILL');
  const e = p.ep(w);
  while (e !== undefined && e.active > 0) e.finish(closed);
}

/** The application crashes by itself (SEGV): the exit, then the endpoint's report. */
function crash(p: Pool, w: FakeWorker): void {
  w.exit(null, 'SIGSEGV');
  const e = p.ep(w);
  while (e !== undefined && e.active > 0) e.finish(closed);
}

/** Lets every live worker answer what it runs, 10 ms at a time, until `reqs` are answered or `ms` passed. */
function serveFor(p: Pool, reqs: TestRequest[], ms: number): void {
  for (let t = 0; t < ms && reqs.some((r) => !r.sink.done); t += 10) {
    p.clock.advance(10);
    for (const w of p.wf.live) {
      const e = p.ep(w);
      while (e !== undefined && e.active > 0) e.finish();
    }
  }
}

async function started(p: Pool): Promise<void> {
  const s = p.pool.start();
  p.clock.advance(10);
  await s;
}

const statuses = (reqs: TestRequest[]): number[] => reqs.map((r) => r.sink.status);

test('crash_limit 0: every worker killed at once with requests queued, five times: refilled at once, every request answered', async () => {
  const p = setup({ pm: 'static', maxChildren: 4, crashLimit: 0, queueTimeout: 5000 });
  await started(p);
  for (let round = 0; round < 5; round++) {
    const reqs = p.send(20); // 4 running, 16 queued
    const running = p.wf.live.filter((w) => w.state === 'busy');
    assert.equal(running.length, 4);
    // Each serves one first (started fine), then is killed under the next.
    if (round === 0) for (const w of running) p.ep(w).finish();
    for (const w of [...p.wf.live]) kill(p, w);
    assert.equal(p.wf.live.length, 4, `round ${round}: the static pool is refilled at once, no back-off for killed workers`);
    serveFor(p, reqs, p.cfg.queueTimeout);
    assert.equal(reqs.filter((r) => r.sink.status === 502).length, 4, `round ${round}: ${statuses(reqs).join(',')}`);
    assert.equal(reqs.filter((r) => r.sink.status === 200).length, 16, `round ${round}: ${statuses(reqs).join(',')}`);
    for (const r of reqs.filter((x) => x.sink.status === 502)) assert.equal(r.sink.error?.code, ErrorCodes.WORKER_CRASHED);
    assert.equal(p.pool.snapshot().workers.length, 4);
  }
  assert.equal(p.pool.snapshot().state, 'running');
  assert.equal(p.pool.snapshot().crashes, 20, 'still counted as crashes in status');
});

test('crash_limit 0: workers that crash under their first request, again and again: no queued request waits past queue_timeout, the pool is refilled after each back-off', async () => {
  const p = setup({ pm: 'static', maxChildren: 4, crashLimit: 0, queueTimeout: 5000 });
  await started(p);
  const sentAt = new Map<TestRequest, number>();
  const send = (n: number): void => {
    for (const r of p.send(n)) sentAt.set(r, p.clock.now());
  };
  send(40); // 4 running, 36 queued
  for (let round = 0; round < 4; round++) {
    if (p.wf.count('idle') > 0) send(p.wf.count('idle')); // nothing left queued: give each its first request
    const victims = [...p.wf.live];
    assert.ok(victims.every((w) => w.state === 'busy' && w.requests === 1), `round ${round}: each under its first request`);
    for (const w of victims) crash(p, w);
    for (let t = 0; t <= BACKOFF_MAX_MS && !(p.wf.live.length === 4 && p.wf.count('spawning') === 0); t += 10) {
      p.clock.advance(10);
      for (const [r, at] of sentAt) {
        if (!r.sink.done && r.ex.workerPid === undefined) assert.ok(p.clock.now() - at <= p.cfg.queueTimeout, `round ${round}: a request queued past queue_timeout`);
      }
    }
    assert.equal(p.wf.live.length, 4, `round ${round}: refilled`);
  }
  const all = [...sentAt.keys()];
  serveFor(p, all, 1000);
  assert.ok(all.every((r) => r.sink.done));
  assert.equal(all.filter((r) => r.sink.status === 502).length, 16, 'the requests of the dead workers');
  assert.ok(all.some((r) => r.sink.error?.code === ErrorCodes.QUEUE_TIMEOUT), 'the back-off outgrew queue_timeout: those got 503');
  assert.equal(p.pool.snapshot().state, 'running');
});

test('workers killed from outside under their first request, again and again: replaced at once, no back-off, no 503', async () => {
  for (const crashLimit of [0, 5]) {
    const p = setup({ pm: 'static', maxChildren: 4, crashLimit, queueTimeout: 5000 });
    await started(p);
    const reqs = p.send(40); // 4 running, 36 queued
    for (let round = 0; round < 6; round++) {
      const victims = [...p.wf.live];
      assert.ok(victims.every((w) => w.state === 'busy' && w.requests === 1), `round ${round}: each under its first request`);
      for (const w of victims) kill(p, w);
      assert.equal(p.wf.live.length, 4, `crash_limit ${crashLimit}, round ${round}: replaced at once`);
      p.clock.advance(10); // the replacements are ready and take the next queued requests
    }
    serveFor(p, reqs, 1000);
    assert.equal(reqs.filter((r) => r.sink.status === 502).length, 24, 'the requests of the killed workers');
    assert.equal(reqs.filter((r) => r.sink.status === 200).length, 16, statuses(reqs).join(','));
    const s = p.pool.snapshot();
    assert.deepEqual([s.state, s.rejected.failing, s.rejected.queueTimeout, s.crashes], ['running', 0, 0, 24]);
  }
});

test('ondemand: workers killed from outside before ready: no start failure, no breaker, the queued requests wait for the replacement', async () => {
  const p = setup({ pm: 'ondemand', maxChildren: 2, crashLimit: 2, queueTimeout: 5000 });
  p.wf.plan = { readyAfter: 50 };
  const reqs = p.send(2);
  for (let i = 0; i < 5; i++) {
    const fresh = [...p.wf.live];
    assert.ok(fresh.length > 0 && fresh.every((w) => w.state === 'spawning'), `round ${i}: workers starting`);
    for (const w of fresh) w.exit(null, i % 2 === 0 ? 'SIGKILL' : 'SIGTERM');
    assert.equal(p.wf.live.length, 2, `round ${i}: replaced at once`);
    assert.ok(reqs.every((r) => !r.sink.done), `round ${i}: nothing refused`);
  }
  serveFor(p, reqs, 1000);
  assert.deepEqual(statuses(reqs), [200, 200]);
  assert.equal(p.pool.snapshot().state, 'running');
  assert.equal(p.lines.find((l) => l.code === ErrorCodes.SPAWN_FAILED || l.code === ErrorCodes.POOL_FAILING), undefined);
});

test('a failing pool whose probe is killed from outside tries the next probe at once', async () => {
  const p = setup({ pm: 'ondemand', maxChildren: 1, crashLimit: 1, queueTimeout: 60_000 });
  p.wf.plan = { spawnFailAfter: 5, spawnErrno: 'EXITED' };
  p.send(1);
  p.clock.advance(5);
  assert.equal(p.pool.snapshot().state, 'failing');
  p.wf.plan = { readyAfter: undefined };
  p.clock.advance(BACKOFF_MAX_MS); // the pause is over: one probe starts
  const probe = p.wf.live[0]!;
  probe.exit(null, 'SIGKILL');
  assert.equal(p.wf.live.length, 1, 'the next probe at once');
  p.wf.live[0]!.becomeReady();
  assert.equal(p.pool.snapshot().state, 'running');
});

test('dynamic: workers killed after serving are replaced back to min_spare', async () => {
  const p = setup({ pm: 'dynamic', maxChildren: 6, startChildren: 3, minSpare: 2, maxSpare: 4, crashLimit: 2 });
  await started(p);
  serveFor(p, p.send(3), 100);
  for (const w of [...p.wf.live]) kill(p, w);
  p.clock.advance(2000); // dynamic spawning is rate limited per one-second round
  assert.ok(p.wf.count('idle') >= 2, `${p.wf.count('idle')} idle`);
  assert.equal(p.pool.snapshot().state, 'running');
});

test('workers killed after serving never open the breaker: each costs only its own request', async () => {
  const p = setup({ pm: 'static', maxChildren: 2, crashLimit: 3, crashWindow: 60_000 });
  await started(p);
  const all: TestRequest[] = [];
  for (let i = 0; i < 10; i++) {
    const reqs = p.send(4);
    all.push(...reqs);
    const w = p.wf.live.find((x) => x.state === 'busy' && x.requests > 1) ?? p.wf.live.find((x) => x.state === 'busy')!;
    if (i === 0) p.ep(w).finish(); // it has served one
    const before = p.wf.workers.length;
    kill(p, w);
    assert.equal(p.wf.workers.length, before + 1, `kill ${i}: replaced at once`);
    serveFor(p, reqs, 1000);
  }
  const s = p.pool.snapshot();
  assert.equal(s.state, 'running');
  assert.equal(s.rejected.failing, 0);
  assert.equal(all.filter((r) => r.sink.status === 503).length, 0);
  assert.equal(all.filter((r) => r.sink.status === 502).length, 10, 'one request per killed worker');
  assert.equal(all.filter((r) => r.sink.status === 200).length, 30);
});

test('workers that crash before ready, or soon after start before finishing a request, open the breaker and back off', async () => {
  // Exit with an error, or a crash signal, while starting.
  for (const [code, signal] of [[1, null], [null, 'SIGSEGV'], [null, 'SIGABRT']] as const) {
    const a = setup({ pm: 'static', maxChildren: 3, crashLimit: 3 });
    a.wf.plan = { readyAfter: undefined };
    void a.pool.start();
    for (const w of [...a.wf.live]) w.exit(code, signal);
    assert.equal(a.pool.snapshot().state, 'failing', String(code ?? signal));
  }

  // Ready, then dead under its first request within EARLY_EXIT_MS: its request gets 502,
  // and the replacement waits for the back-off even though a request is queued behind it.
  const b = setup({ pm: 'static', maxChildren: 1, crashLimit: 2, queueTimeout: 60_000 });
  await started(b);
  const [first, second] = b.send(2);
  const w1 = b.wf.live[0]!;
  b.ep(w1).finish(closed); // the connection closes first: held for the exit
  w1.exit(null, 'SIGSEGV');
  assert.equal(first!.sink.error?.code, ErrorCodes.WORKER_CRASHED);
  assert.equal(b.wf.workers.length, 1, 'no replacement before the back-off');
  b.clock.advance(1000);
  assert.equal(b.wf.workers.length, 2);
  b.clock.advance(10);
  const w2 = b.wf.live[0]!;
  assert.equal(second!.ex.workerPid, w2.pid);
  crash(b, w2);
  assert.equal(second!.sink.error?.code, ErrorCodes.WORKER_CRASHED);
  assert.equal(b.pool.snapshot().state, 'failing');

  // Ready and idle past EARLY_EXIT_MS, then killed: started fine, not a crash loop.
  const c = setup({ pm: 'static', maxChildren: 3, crashLimit: 3 });
  await started(c);
  c.clock.advance(EARLY_EXIT_MS);
  for (const w of [...c.wf.live]) kill(c, w);
  assert.equal(c.pool.snapshot().state, 'running');
  assert.equal(c.wf.live.length, 3, 'replaced at once');
});

test('while the breaker is open a live worker still serves, also a request put back in the queue', async () => {
  const p = setup({ pm: 'ondemand', maxChildren: 4, crashLimit: 2, queueTimeout: 30_000 });
  p.send(2);
  p.clock.advance(10);
  const [a, b] = p.wf.live as [FakeWorker, FakeWorker];
  p.ep(b).finish();
  const [r] = p.send(1); // LIFO: b, which has served one, takes it
  assert.equal(r!.ex.workerPid, b.pid);
  p.wf.plan = { spawnFailAfter: 5, spawnErrno: 'EXITED' };
  const doomed = p.send(2);
  p.clock.advance(5);
  assert.equal(p.pool.snapshot().state, 'failing');
  for (const x of doomed) assert.equal(x.sink.error?.code, ErrorCodes.POOL_FAILING, 'queued requests get 503 at once');
  p.ep(a).finish(); // a goes idle
  // b goes away cleanly before reading r: r is put back at the head of the queue.
  p.ep(b).finish(refused);
  b.exit(0, null);
  assert.equal(r!.ex.workerPid, a.pid, 'the idle worker takes it');
  p.ep(a).finish();
  assert.equal(r!.sink.status, 200);
  const [late] = p.send(1);
  assert.equal(late!.ex.workerPid, a.pid, 'a new request goes to the idle worker, not 503');
  p.ep(a).finish();
  assert.equal(late!.sink.status, 200);
  assert.equal(p.pool.snapshot().state, 'failing');
});

test('while the breaker is open with no worker left, a queued request waits for the retry: served when it starts, 503 when it fails', async () => {
  for (const recovers of [true, false]) {
    const p = setup({ pm: 'ondemand', maxChildren: 2, crashLimit: 2, queueTimeout: 10_000 });
    serveFor(p, p.send(1), 100);
    const w = p.wf.live[0]!;
    const [r] = p.send(1);
    p.wf.plan = { spawnFailAfter: 5, spawnErrno: 'EXITED' };
    for (let i = 0; i < 2; i++) {
      p.send(1);
      p.clock.advance(1100); // past the restart back-off: the next spawn fails too
    }
    assert.equal(p.pool.snapshot().state, 'failing');
    p.ep(w).finish(refused);
    w.exit(0, null); // the last worker goes cleanly before reading r: back in the queue
    assert.equal(p.pool.snapshot().queued, 1);
    if (recovers) p.wf.plan = { readyAfter: 10 };
    serveFor(p, [r!], p.cfg.queueTimeout);
    assert.equal(r!.sink.done, true, `recovers=${recovers}: answered within queue_timeout`);
    assert.equal(r!.sink.status, recovers ? 200 : 503);
    if (!recovers) assert.equal(r!.sink.error?.code, ErrorCodes.POOL_FAILING);
  }
});
