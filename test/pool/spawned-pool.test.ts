/**
 * The spawned pool on fake workers, fake endpoints and a fake clock: dispatch, scaling,
 * recycling, timeouts, crashes and the failing state, without processes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connectFailed, refusedRequest } from '../../src/upstream/failures.js';
import { ErrorCodes } from '../../src/errors.js';
import { EXIT_GRACE_MS } from '../../src/pool/spawned/dispatcher.js';
import type { UpstreamOutcome } from '../../src/upstream/types.js';
import type { FakeWorker } from './fake-worker.js';
import type { TestRequest } from './helpers.js';
import { closed, refused, setup } from './spawned-harness.js';

test('ondemand: no worker until a request, exactly the spawns needed, never past max_children', async () => {
  const { pool, clock, wf, ep, send } = setup({ pm: 'ondemand', maxChildren: 3 });
  await pool.start();
  assert.equal(wf.workers.length, 0);
  clock.advance(60_000);
  assert.equal(wf.workers.length, 0, 'nor a minute later without a request');
  const reqs = send(1);
  assert.equal(wf.workers.length, 1, 'one request, one spawn');
  send(1);
  assert.equal(wf.workers.length, 2);
  // Two more while two are still starting: one more spawn (the third), none for the fourth.
  const more = send(6);
  assert.equal(wf.workers.length, 3);
  assert.equal(pool.snapshot().maxChildrenReached, 1);
  clock.advance(10); // all three ready: each takes the oldest waiting request
  assert.equal(pool.snapshot().queued, 5);
  assert.deepEqual(wf.workers.map((w) => w.state), ['busy', 'busy', 'busy']);
  assert.equal(reqs[0]!.ex.workerPid, wf.workers[0]!.pid);
  // A finished worker takes the next waiting one at once.
  ep(wf.workers[1]!).finish();
  assert.equal(ep(wf.workers[1]!).running[0]!.ex, more[1]!.ex);
  for (let i = 0; i < 20 && pool.snapshot().active > 0; i++) for (const w of wf.workers) if (ep(w).active) ep(w).finish();
  assert.equal(wf.workers.length, 3, 'never more than max_children');
  const s = pool.snapshot();
  assert.equal(s.completed, 8);
  assert.equal(s.maxActive, 3);
});

test('the most recently used idle worker takes the next request (LIFO), so others go idle and stop', async () => {
  const { pool, clock, wf, ep, send } = setup({ pm: 'ondemand', maxChildren: 3, idleTimeout: 1000 });
  send(3);
  clock.advance(10);
  const [a, b, c] = wf.workers as [FakeWorker, FakeWorker, FakeWorker];
  ep(a).finish();
  clock.advance(100);
  ep(b).finish();
  clock.advance(100);
  ep(c).finish(); // c is the most recently used
  // A steady trickle of one request at a time keeps hitting c only.
  for (let i = 0; i < 10; i++) {
    send(1);
    assert.equal(c.state, 'busy');
    ep(c).finish();
    clock.advance(100);
  }
  assert.equal(a.requests, 1);
  assert.equal(b.requests, 1);
  assert.equal(c.requests, 11);
  // a (idle longest) stopped first, then b; c stays while used.
  assert.equal(a.state, 'exited');
  assert.equal(a.retireReason, 'idle_timeout');
  assert.equal(b.state, 'exited');
  assert.notEqual(c.state, 'exited');
  clock.advance(1000);
  assert.equal(c.state, 'exited');
  assert.equal(pool.snapshot().workers.length, 0);
  assert.equal(pool.snapshot().recycles['idle_timeout'], 3);
});

test('idle stops run from one timer re-armed to the next expiry, not a per-second scan', async () => {
  const { pool, clock, wf, ep, send } = setup({ pm: 'ondemand', maxChildren: 4, idleTimeout: 60_000 });
  send(4);
  clock.advance(10);
  for (const w of wf.workers) ep(w).finish();
  void pool;
  // One idle timer for all four, plus the queue's (left armed lazily, it fires once for nothing).
  assert.ok(clock.pending <= 2, `${clock.pending} timers`);
  clock.advance(59_000);
  assert.equal(wf.live.length, 4);
  clock.advance(1_000);
  assert.equal(wf.count('stopping') + wf.count('exited'), 4);
});

test('dynamic: start_children at start, then min_spare idle kept, surplus over max_spare stopped', async () => {
  const { pool, clock, wf, ep, send } = setup({ pm: 'dynamic', maxChildren: 10, startChildren: 3, minSpare: 2, maxSpare: 4, idleTimeout: 10_000 });
  const started = pool.start();
  assert.equal(wf.workers.length, 3);
  clock.advance(10);
  await started;
  assert.equal(wf.count('idle'), 3);
  // Two busy leaves one idle: below min_spare → one spawn (rate 1 in the first round).
  send(2);
  assert.equal(wf.workers.length, 4);
  clock.advance(10);
  assert.equal(wf.count('idle'), 2);
  // Burst: 6 busy at once. Spawning is rate limited: 1, then 2, 4 per second.
  send(6);
  const counts: number[] = [wf.workers.length];
  for (let s = 0; s < 4; s++) {
    clock.advance(1000);
    counts.push(wf.workers.length);
  }
  assert.deepEqual(counts, [4, 6, 10, 10, 10], 'rate 1 used up this second, then 2, 4; capped by max_children; rate doubles each second of need, capped by max_children');
  // All requests end: 10 idle > max_spare 4 → the surplus goes after a second, down to max_spare.
  for (const w of wf.workers) while (ep(w).active) ep(w).finish();
  assert.equal(pool.snapshot().completed, 8);
  clock.advance(1100);
  assert.equal(wf.live.length, 4);
  // After idle_timeout the rest go down to min_spare, not below.
  clock.advance(20_000);
  assert.equal(wf.live.length, 2);
  assert.ok((pool.snapshot().recycles['scale_down'] ?? 0) >= 6);
});

test('static: max_children always running, an exited worker is replaced', async () => {
  const { pool, clock, wf } = setup({ pm: 'static', maxChildren: 3, idleTimeout: 100 });
  const started = pool.start();
  clock.advance(10);
  await started;
  assert.equal(wf.count('idle'), 3);
  clock.advance(10_000);
  assert.equal(wf.count('idle'), 3, 'static workers never idle-stop');
  wf.workers[1]!.exit(0, null); // exits by itself, cleanly: replaced without back-off
  assert.equal(wf.workers.length, 4);
  clock.advance(10);
  assert.equal(wf.count('idle'), 3);
  // A crash of a worker that started fine (idle past EARLY_EXIT_MS): replaced at once too.
  wf.workers[0]!.exit(null, 'SIGSEGV');
  assert.equal(wf.workers.length, 5);
  clock.advance(10);
  assert.equal(wf.count('idle'), 3);
  assert.equal(pool.snapshot().crashes, 1);
});

test('static: a request that queues while every worker lives walks no worker (the scaling plan is known)', async () => {
  const { pool, clock, wf, ep, send } = setup({ pm: 'static', maxChildren: 3 });
  const started = pool.start();
  clock.advance(10);
  await started;
  const sup = pool.supervisor as unknown as { counts(): unknown };
  const counts = sup.counts.bind(sup);
  let walks = 0;
  sup.counts = () => {
    walks++;
    return counts();
  };
  send(10); // 3 run, 7 wait
  assert.equal(pool.snapshot().queued, 7);
  assert.equal(walks, 0, 'no walk over the workers per queued request');
  for (let i = 0; i < 10 && pool.snapshot().active > 0; i++) for (const w of wf.workers) if (ep(w).active) ep(w).finish();
  assert.equal(pool.snapshot().completed, 10);
  assert.equal(wf.workers.length, 3);
  assert.equal(pool.snapshot().maxChildrenReached, 0);
});

test('max_requests (with jitter) recycles a worker between requests', async () => {
  const { pool, clock, wf, ep, send } = setup({ pm: 'ondemand', maxChildren: 1, maxRequests: 3, maxRequestsJitter: 2 });
  // random() = 0.999 → jitter 2 → 5 requests per worker.
  const pids = new Set<number | undefined>();
  for (let i = 0; i < 12; i++) {
    const [r] = send(1);
    clock.advance(10);
    const w = wf.live.find((x) => x.state === 'busy')!;
    pids.add(w.pid);
    ep(w).finish();
    assert.equal(r!.sink.status, 200);
    clock.advance(10);
  }
  assert.equal(wf.workers[0]!.requests, 5);
  assert.equal(wf.workers[0]!.retireReason, 'max_requests');
  assert.equal(pids.size, 3);
  assert.equal(pool.snapshot().recycles['max_requests'], 2);
});

test('max_lifetime: a busy worker finishes its request, then retires', async () => {
  const { pool, clock, wf, ep, send } = setup({ pm: 'ondemand', maxChildren: 1, maxLifetime: 1000 });
  send(1);
  clock.advance(10);
  const w = wf.workers[0]!;
  clock.advance(2000);
  assert.equal(w.state, 'busy', 'not while busy');
  ep(w).finish();
  assert.equal(w.retireReason, 'max_lifetime');
  assert.equal(pool.snapshot().recycles['max_lifetime'], 1);
});

test('request_timeout: 504, worker stopped with reason request_timeout, log names pid, script and duration', async () => {
  const { pool, clock, wf, send, lines } = setup({ pm: 'ondemand', maxChildren: 2, requestTimeout: 3000, slowRequest: 1000 });
  const [r] = send(1);
  clock.advance(10);
  const w = wf.workers[0]!;
  clock.advance(1000);
  assert.equal(pool.snapshot().slowRequests, 1);
  assert.ok(lines.some((l) => l.level === 40 && l.msg.includes('slow request') && l.wpid === w.pid));
  clock.advance(1999);
  assert.equal(r!.sink.done, false);
  clock.advance(1);
  assert.equal(r!.sink.status, 504);
  assert.equal(r!.sink.error?.code, ErrorCodes.REQUEST_TIMEOUT);
  assert.deepEqual(w.stopCalls, ['request_timeout']);
  const line = lines.find((l) => l.msg.includes('past request_timeout'))!;
  assert.equal(line.wpid, w.pid);
  assert.equal(line.script, '/srv/app/index.php');
  assert.equal(line.durationMs, 3000);
  assert.equal(pool.snapshot().errors.timeout, 1);
});

test('a worker dying under a request: 502 WORKER_CRASHED, whichever event comes first', async () => {
  const { pool, clock, wf, ep, send } = setup({ pm: 'ondemand', maxChildren: 2 });
  // 1. The connection closes first, the exit follows.
  const [a] = send(1);
  clock.advance(10);
  const w1 = wf.workers[0]!;
  ep(w1).finish(closed);
  assert.equal(a!.sink.done, false, 'held until the exit is known');
  w1.exit(null, 'SIGKILL');
  assert.equal(a!.sink.status, 502);
  assert.equal(a!.sink.error?.code, ErrorCodes.WORKER_CRASHED);
  assert.match(a!.sink.error!.message, /killed by SIGKILL while serving \/srv\/app\/index.php/);
  // 2. The exit comes first: the endpoint is closed and the request answered.
  clock.advance(1000);
  const [b] = send(1);
  clock.advance(10);
  const w2 = wf.live.find((w) => w.state === 'busy')!;
  w2.exit(255, null);
  assert.equal(b!.sink.done, false, 'the endpoint may still report how it ended');
  clock.advance(EXIT_GRACE_MS);
  assert.equal(b!.sink.error?.code, ErrorCodes.WORKER_CRASHED);
  assert.equal(pool.snapshot().errors.crashed, 2);
  assert.equal(pool.snapshot().crashes, 2);
  // 3. Closed but it lives on: after the grace the endpoint's error is the answer and the worker stays.
  clock.advance(5000);
  const [c] = send(1);
  clock.advance(10);
  const w3 = wf.live.find((w) => w.state === 'busy')!;
  ep(w3).finish(closed);
  clock.advance(EXIT_GRACE_MS);
  assert.equal(c!.sink.error?.code, ErrorCodes.BACKEND_CLOSED);
  assert.equal(w3.state, 'idle');
});

/**
 * Two workers; w2 takes a request, its connect is refused and it then exits `exit` ways:
 * the request is not answered, it waits first in line, and w1 serves it once free.
 */
async function refusedThenExit(exit: (w: FakeWorker) => void): Promise<void> {
  const { clock, wf, ep, send } = setup({ pm: 'ondemand', maxChildren: 2 });
  send(2);
  clock.advance(10);
  const [w1, w2] = wf.workers as [FakeWorker, FakeWorker];
  ep(w2).finish();
  const [r] = send(1);
  assert.equal(w2.state, 'busy', 'LIFO: w2 took it');
  ep(w2).finish(refused);
  exit(w2);
  assert.equal(r!.sink.error, undefined, `not answered: ${r!.sink.error?.code}`);
  assert.equal(r!.sink.done, false);
  ep(w1).finish();
  assert.equal(ep(w1).running[0]!.ex, r!.ex);
  ep(w1).finish();
  assert.equal(r!.sink.status, 200);
}

test('a request that never reached the dying worker goes to another one', async () => {
  await refusedThenExit((w) => w.exit(0, null)); // php-cgi after PHP_FCGI_MAX_REQUESTS
});

test('a crash is never replayed on another worker, even when the endpoint calls it retryable', async () => {
  // The endpoint retries a reused connection that closed before any byte on a fresh one;
  // if that connect is refused it says "retryable", though the page may have run and crashed.
  const { clock, wf, ep, send } = setup({ pm: 'ondemand', maxChildren: 2 });
  const [r] = send(1);
  clock.advance(10);
  const w = wf.workers[0]!;
  const replay = connectFailed('unix:/fake/w.sock', Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }));
  ep(w).finish({ ...replay, facts: { ...replay.facts, replayed: true } });
  w.exit(null, 'SIGKILL');
  assert.equal(r!.sink.error?.code, ErrorCodes.WORKER_CRASHED);
  clock.advance(5000);
  assert.equal(wf.workers.length, 1, 'no worker was started to run it again');
});

test('a request handed to a worker killed before the pool heard of it, whose connect was refused, goes to another worker', async () => {
  // A forked worker killed while idle: its socket refuses the next request at once, and the
  // pool hears of the exit (from the preload parent) only after.
  await refusedThenExit((w) => w.exit(null, 'SIGKILL'));
});

test('ondemand: requests waiting for a starting worker do not use up queue_limit', async () => {
  const { clock, send } = setup({ pm: 'ondemand', maxChildren: 1, queueLimit: 2 });
  const reqs = send(10);
  const rejected = reqs.filter((r) => r.sink.error?.code === ErrorCodes.QUEUE_FULL);
  assert.equal(rejected.length, 7, 'one for the starting worker, two queued');
  clock.advance(10);
  assert.equal(reqs[0]!.ex.workerPid !== undefined, true);
});

test('a request a starting worker will take waits for it past queue_timeout, up to spawn_timeout (a cold start); one behind it does not', async () => {
  const { wf, clock, ep, send } = setup({ pm: 'ondemand', maxChildren: 1, queueTimeout: 5000, spawnTimeout: 10_000 });
  // The worker takes 8 s to be ready (Django importing its application on a busy machine).
  wf.plan = { readyAfter: 8000 };
  const [first, second] = send(2) as [TestRequest, TestRequest];
  clock.advance(5000);
  assert.equal(second.sink.error?.code, ErrorCodes.QUEUE_TIMEOUT, 'the second would wait for the first one\'s page too: 503 at queue_timeout');
  assert.equal(first.sink.error, undefined, 'the first waits on for the worker');
  clock.advance(3000);
  ep(wf.workers[0]!).finish();
  assert.equal(first.sink.status, 200);
  // A worker that never gets ready: the request waits no longer than spawn_timeout.
  const w = setup({ pm: 'ondemand', maxChildren: 1, queueTimeout: 5000, spawnTimeout: 10_000 });
  w.wf.plan = { readyAfter: undefined };
  const [stuck] = w.send(1) as [TestRequest];
  w.clock.advance(9999);
  assert.equal(stuck.sink.error, undefined);
  w.clock.advance(1);
  assert.equal(stuck.sink.status, 503, 'answered at spawn_timeout');
});

/** When each refused request got its 503, after how long in the pool: pass every batch sent through `sent` (sheds happen as requests are sent). */
function refusalWaits(clock: { now(): number }): { sent(rs: TestRequest[]): TestRequest[]; max(): number; count(): number } {
  const open = new Map<TestRequest, number>();
  const waits: number[] = [];
  return {
    sent(rs) {
      for (const r of rs) open.set(r, clock.now());
      for (const [r, at] of open) {
        if (r.sink.error !== undefined) waits.push(clock.now() - at);
        if (r.sink.error !== undefined || r.sink.status !== 0) open.delete(r);
      }
      return rs;
    },
    max: () => Math.max(0, ...waits),
    count: () => waits.length,
  };
}

/** Runs every worker's oldest request to its end (a step of one service time). */
function finishAll(wf: { workers: FakeWorker[] }, ep: (w: FakeWorker) => { active: number; finish(): unknown }): number {
  let n = 0;
  for (const w of wf.workers) if (ep(w).active) {
    ep(w).finish();
    n++;
  }
  return n;
}

/** A static pool of 4 workers with queue_max_wait 300 ms (and room and time to queue past it), started, each worker's first page of `pageMs` served. */
async function queueOnFourWorkers(pageMs = 20) {
  const h = setup({ pm: 'static', maxChildren: 4, queueLimit: 1024, queueTimeout: 60_000, queueMaxWait: 300 });
  const started = h.pool.start();
  h.clock.advance(10);
  await started;
  h.send(4);
  h.clock.advance(pageMs);
  finishAll(h.wf, h.ep);
  return h;
}

/**
 * queueOnFourWorkers of a 5 ms page, warmed 500 ms at 3 arrivals a step and then idle 3 s;
 * then `perStep` arrive every 5 ms step for `steps` steps, the workers finishing a page on
 * the steps `finishes` picks. The requests served, the longest of their queue waits, and
 * how long the refused ones waited for their 503.
 */
async function surgeOnWarmWorkers(perStep: number, steps: number, finishes: (step: number) => boolean) {
  const { clock, wf, ep, send } = await queueOnFourWorkers(5);
  for (let t = 0; t < 100; t++) {
    send(3);
    clock.advance(5);
    finishAll(wf, ep);
  }
  clock.advance(3000);
  const waitedFor503 = refusalWaits(clock);
  const all: TestRequest[] = [];
  for (let t = 0; t < steps; t++) {
    all.push(...waitedFor503.sent(send(perStep)));
    clock.advance(5);
    if (finishes(t)) finishAll(wf, ep);
  }
  const served = all.filter((r) => r.sink.status === 200);
  return { served, worst: Math.max(...served.map((r) => r.ex.queuedMs)), waitedFor503 };
}

test('queue_max_wait: a closed loop of 20 clients on 4 workers of a 100 ms page is served whole, its standing queue waits', async () => {
  const { pool, clock, wf, ep, send } = setup({ pm: 'static', maxChildren: 4, queueLimit: 1024, queueTimeout: 5000, queueMaxWait: 300 });
  const started = pool.start();
  clock.advance(10);
  await started;
  // Measure the service time first, as a warm pool has.
  send(4);
  clock.advance(100);
  finishAll(wf, ep);
  // All 20 clients at once; each answer brings its client straight back (8 s).
  const all = send(20);
  for (let t = 0; t < 80; t++) {
    clock.advance(100);
    all.push(...send(finishAll(wf, ep)));
  }
  const refused = all.filter((r) => r.sink.error !== undefined);
  assert.deepEqual(refused.map((r) => r.sink.error!.code), [], 'nothing refused');
  assert.equal(pool.snapshot().queued, 16, 'a standing queue of 16, past the 12 served within queue_max_wait');
});

test('queue_max_wait: a closed loop in rounds (16 clients on 4 workers, each round sent once the last is answered) is served whole after its pages slowed from 40 to 200 ms', async () => {
  const { pool, clock, wf, ep, send } = setup({ pm: 'static', maxChildren: 4, queueLimit: 1024, queueTimeout: 5000, queueMaxWait: 300 });
  const started = pool.start();
  clock.advance(10);
  await started;
  send(4);
  clock.advance(40);
  finishAll(wf, ep);
  // A busy machine: each page now takes 200 ms, so a round's last request waits 600 ms.
  // The last answers of a round and the next round's requests meet in one sub-window.
  const all: ReturnType<typeof send> = [];
  for (let round = 0; round < 8; round++) {
    all.push(...send(16));
    for (let step = 0; step < 4; step++) {
      clock.advance(200);
      finishAll(wf, ep);
    }
    clock.advance(2);
  }
  const refused = all.filter((r) => r.sink.error !== undefined);
  assert.deepEqual(refused.map((r) => r.sink.error!.code), [], 'nothing refused');
});

test('queue_max_wait: an open loop at 2× what the workers serve is refused at admission once it grows, and only the excess', async () => {
  const { pool, clock, wf, ep, send } = setup({ pm: 'static', maxChildren: 2, queueLimit: 1024, queueTimeout: 5000, queueMaxWait: 300 });
  const started = pool.start();
  clock.advance(10);
  await started;
  send(2);
  clock.advance(20);
  finishAll(wf, ep);
  // Each request takes 20 ms: 2 workers serve 30 within 300 ms. Arrivals: 4 per 20 ms, 3 s.
  const all: ReturnType<typeof send> = [];
  let maxQueued = 0;
  for (let t = 0; t < 150; t++) {
    all.push(...send(4));
    maxQueued = Math.max(maxQueued, pool.snapshot().queued);
    clock.advance(20);
    finishAll(wf, ep);
  }
  const refused = all.filter((r) => r.sink.error !== undefined);
  assert.ok(refused.every((r) => r.sink.error!.code === ErrorCodes.QUEUE_FULL && r.sink.status === 503), 'refused at admission, never after queue_timeout');
  // Half of the arrivals are beyond what 2 workers serve; those before the growth was seen wait.
  assert.ok(refused.length > 250 && refused.length < 300, `${refused.length} of 600 refused`);
  // The queue grows for 3 sub-windows of 100 ms (10 requests each) before the growth is seen.
  assert.ok(maxQueued >= 30 && maxQueued <= 30 + 40, `the queue stayed near 30, at most ${maxQueued}`);
});

test('queue_max_wait: a growing queue is bounded by the rate the pool really drains, not by its seats (two of four workers stuck)', async () => {
  const { pool, clock, wf, ep, send } = setup({ pm: 'static', maxChildren: 4, queueLimit: 1024, queueTimeout: 60_000, queueMaxWait: 300 });
  const started = pool.start();
  clock.advance(10);
  await started;
  // Two workers take a page that never ends; the other two serve 20 ms pages.
  send(4);
  clock.advance(20);
  const serving = wf.workers.slice(0, 2);
  for (const w of serving) ep(w).finish();
  // 2 served per 20 ms; 4 arrive (2×) for 3 s. Within 300 ms the two serve 30, not the 60 four seats would.
  const all: ReturnType<typeof send> = [];
  for (let t = 0; t < 150; t++) {
    all.push(...send(4));
    clock.advance(20);
    for (const w of serving) if (ep(w).active) ep(w).finish();
  }
  const served = all.filter((r) => r.sink.error === undefined && r.ex.workerPid !== undefined);
  const worst = Math.max(...served.map((r) => r.ex.queuedMs));
  // Queued up to the bound, and what queued past it by a quarter shed: 1.25 × 300 ms and a step at most.
  assert.ok(worst <= 300 * 1.25 + 20, `the longest wait of a request served: ${worst} ms`);
  const refused = all.filter((r) => r.sink.error !== undefined);
  assert.ok(refused.every((r) => r.sink.error!.code === ErrorCodes.QUEUE_FULL && r.sink.status === 503));
});

test('queue_max_wait: when the rate falls (two of four workers stuck mid-run), the newest of a growing queue are refused down to the new bound', async () => {
  const { pool, clock, wf, ep, send } = await queueOnFourWorkers();
  // 20 ms pages; 6 arrive per 20 ms (1.5× four workers) for 2 s: the queue stands at its bound, 60.
  const all: ReturnType<typeof send> = [];
  for (let t = 0; t < 100; t++) {
    all.push(...send(6));
    clock.advance(20);
    finishAll(wf, ep);
  }
  const before = pool.snapshot().queued;
  assert.ok(before >= 55 && before <= 65, `the queue at its bound: ${before}`);
  // Two workers now hang on their page; the other two go on.
  const serving = wf.workers.slice(0, 2);
  // What arrives once the rate is measured again (4 sub-windows of 100 ms, and the queue's turnover).
  const late: ReturnType<typeof send> = [];
  for (let t = 0; t < 100; t++) {
    const sent = send(6);
    if (t >= 40) late.push(...sent);
    clock.advance(20);
    for (const w of serving) if (ep(w).active) ep(w).finish();
  }
  const after = pool.snapshot().queued;
  assert.ok(after <= 30 * 1.25 + 6, `the queue follows the two workers' bound, 30: ${after}`);
  const served = late.filter((r) => r.sink.error === undefined && r.ex.workerPid !== undefined && r.sink.status === 200);
  const worst = Math.max(...served.map((r) => r.ex.queuedMs));
  assert.ok(worst <= 300 * 1.25 + 20, `the longest wait of a request served: ${worst} ms`);
});

test('queue_max_wait: a growth seen holds while the queue is still half its bound, so arrivals that meet completions there, then outrun them by less than a fifth, neither fill it nor get 503s after a wait', async () => {
  const { clock, wf, ep, send } = await queueOnFourWorkers();
  // 20 ms pages on 4 workers: 20 served per 100 ms sub-window, 60 within queue_max_wait.
  // As a loaded machine swings what reaches the daemon: 2× (seen), then 1× with the queue
  // at its bound, then 1.15× (more than completions, never a fifth more), then 2× again.
  const phases: Array<[steps: number, perStep: readonly number[]]> = [[100, [8]], [50, [4]], [200, [5, 5, 5, 4, 4]], [50, [8]]];
  const all: ReturnType<typeof send> = [];
  const waitedFor503 = refusalWaits(clock);
  for (const [steps, per] of phases) {
    for (let t = 0; t < steps; t++) {
      all.push(...waitedFor503.sent(send(per[t % per.length]!)));
      clock.advance(20);
      finishAll(wf, ep);
    }
  }
  const served = all.filter((r) => r.sink.status === 200);
  const worst = Math.max(...served.map((r) => r.ex.queuedMs));
  // Without the hold the verdict ended at 1×, the queue grew to 180 at 1.15× (900 ms of
  // waiting) and 2× shed it back to 60 from the tail, requests that had waited 600 ms.
  assert.ok(worst <= 300 * 1.25 + 20, `the longest wait of a request served: ${worst} ms`);
  assert.ok(waitedFor503.max() <= 50, `the longest wait before a 503: ${waitedFor503.max()} ms`);
});

test('queue_max_wait: arrivals that stop for two sub-windows (a front end stalled on a loaded machine) do not end a growth, so the queue does not fill unseen when they resume', async () => {
  const { clock, wf, ep, send } = await queueOnFourWorkers();
  // 20 ms pages on 4 workers (sub-windows of 100 ms, a bound of 60); 1.5× for 1 s (the
  // growth seen, the queue within its bound meanwhile), 3× for 1 s, nothing for 200 ms
  // (the queue drains to 20), then 3× again.
  const all: ReturnType<typeof send> = [];
  for (const [steps, per] of [[50, 6], [50, 12], [10, 0], [50, 12]] as const) {
    for (let t = 0; t < steps; t++) {
      all.push(...send(per));
      clock.advance(20);
      finishAll(wf, ep);
    }
  }
  const served = all.filter((r) => r.sink.status === 200);
  const worst = Math.max(...served.map((r) => r.ex.queuedMs));
  // Ended by the stall, the growth was seen again 3 sub-windows later, the queue at 140.
  assert.ok(worst <= 300 * 1.25 + 20, `the longest wait of a request served: ${worst} ms`);
});

test('queue_max_wait: an overload that reaches the pool in lumps, nothing between them while requests wait, is seen: the sub-windows without an arrival do not count against it', async () => {
  const { clock, wf, ep, send } = await queueOnFourWorkers();
  // 20 ms pages on 4 workers (sub-windows of 100 ms, a bound of 60): 120 requests at once
  // every 300 ms (2×, as a loaded machine's front end passes an open loop on), for 4 s.
  const lumps: Array<ReturnType<typeof send>> = [];
  for (let t = 0; t < 200; t++) {
    if (t % 15 === 0) lumps.push(send(120));
    clock.advance(20);
    finishAll(wf, ep);
  }
  // Seen after 3 lumps (what queued meanwhile was served, up to 1.2 s later); from then on
  // the queue holds its bound. Read as 1 growing sub-window in 3, it was never seen: the
  // queue grew by 60 each lump.
  const later = lumps.slice(4).flat().filter((r) => r.sink.status === 200);
  const worst = Math.max(...later.map((r) => r.ex.queuedMs));
  assert.ok(later.length > 400 && worst <= 300 * 1.25 + 20, `${later.length} served after the first second, the longest wait ${worst} ms`);
});

test('queue_max_wait: after every worker stalled, the excess of a growing queue is refused at admission, not from its tail after the stall', async () => {
  const { clock, wf, ep, send } = await queueOnFourWorkers();
  // 20 ms pages, 1.5× four workers for 2 s: the queue stands at its bound, 60.
  const waitedFor503 = refusalWaits(clock);
  for (let t = 0; t < 100; t++) {
    waitedFor503.sent(send(6));
    clock.advance(20);
    finishAll(wf, ep);
  }
  // Every page stalls 200 ms (a lock, a machine short of CPU), and nothing reaches the
  // daemon meanwhile; then both resume. The head's wait lowers the bound past what waits.
  clock.advance(200);
  for (let t = 0; t < 50; t++) {
    waitedFor503.sent(send(6));
    clock.advance(20);
    finishAll(wf, ep);
  }
  assert.ok(waitedFor503.count() > 0, 'the excess is refused');
  // Shed from the tail, the requests queued before the stall got their 503 200 ms late.
  assert.ok(waitedFor503.max() <= 50, `the longest wait before a 503: ${waitedFor503.max()} ms`);
});

test('queue_max_wait: while the rate swings between sub-windows, the bound holds what the slowest of them serves, so no one waits much past queue_max_wait', async () => {
  const { clock, wf, ep, send } = await queueOnFourWorkers(5);
  // Steps of 5 ms; the four workers finish a page every step for 100 ms, then every third
  // step for 100 ms (0.8 and 0.27 a ms, as on a machine whose CPU other work takes in
  // turns); 11 arrive every 10 ms, 2× the mean, for 4 s.
  const all: ReturnType<typeof send> = [];
  for (let t = 0; t < 800; t++) {
    all.push(...send(t % 2 === 0 ? 5 : 6));
    clock.advance(5);
    if (t % 40 < 20 || t % 3 === 0) finishAll(wf, ep);
  }
  const served = all.filter((r) => r.sink.status === 200);
  const worst = Math.max(...served.map((r) => r.ex.queuedMs));
  // At the mean of the sub-windows the bound held twice as many: waits up to 345 ms (185 now).
  assert.ok(worst <= 300, `the longest wait of a request served: ${worst} ms`);
  assert.ok(served.length > 0.95 * (4 / 5 + 4 / 15) * 0.5 * 4000, `the workers kept busy: ${served.length} served`);
});

test('queue_max_wait: an open loop at 2× whose workers serve a third of their rate as it begins (its own work takes their CPU) is seen soon enough that no request served waits much past queue_max_wait', async () => {
  // 8 arrive every 5 ms (2× the four workers' 5 ms pages), for 3 s; for the first second
  // the workers finish a page every third step only.
  const { served, worst, waitedFor503 } = await surgeOnWarmWorkers(8, 600, (t) => t >= 200 || t % 3 === 0);
  // Before the surge was seen a sub-window sooner, the first 300 ms queued twice what the
  // starved workers then served in 300 ms: waits up to 755 ms.
  assert.ok(worst <= 330, `the longest wait of a request served: ${worst} ms`);
  assert.ok(waitedFor503.max() <= 50, `the longest wait before a 503: ${waitedFor503.max()} ms`);
  assert.ok(served.length > 0.95 * (200 * 4 / 3 + 400 * 4) * 0.9, `the workers kept busy: ${served.length} served`);
});

test('queue_max_wait: an open loop whose workers serve a tenth of their rate as it begins: what queued while the growth was being seen is refused down to the bound, so no request served waits far past queue_max_wait', async () => {
  // 7 arrive every 5 ms (1.4 a ms, 2× a warm machine's 0.7), for 2 s; for the first second
  // the workers finish a page every tenth step only (0.08 a ms): as the daemon's trace of a
  // loaded machine's 2× showed, 141 queued in the 100 ms before the growth was seen, and
  // the 73 of them older than 50 ms were served after up to a second.
  const { served, worst, waitedFor503 } = await surgeOnWarmWorkers(7, 400, (t) => t >= 200 || t % 10 === 0);
  assert.ok(worst <= 300 * 1.25 + 5, `the longest wait of a request served: ${worst} ms`);
  // A 503 within half of queue_max_wait of its request, or none.
  assert.ok(waitedFor503.max() <= 150, `the longest wait before a 503: ${waitedFor503.max()} ms`);
  assert.ok(served.length > 0.9 * (200 * 4 / 10 + 200 * 4), `the workers kept busy: ${served.length} served`);
});

test('queue_max_wait: an open loop whose workers finish nothing as it begins is bounded by the head\'s wait, not by the warm pool\'s mean service time', async () => {
  // 7 arrive every 5 ms (2× a warm machine's rate), for 2 s; the workers finish nothing for
  // 200 ms, then every tenth step until 1 s (as a loaded machine's 2× began: not one page
  // finished in its first 150 ms, and 166 requests queued, served after up to 3.5 s).
  const { served, worst, waitedFor503 } = await surgeOnWarmWorkers(7, 400, (t) => t >= 200 || (t >= 40 && t % 10 === 0));
  // Before, with no rate counted the bound was the warm pool's: 4 seats over 5 ms, 240
  // requests within queue_max_wait.
  assert.ok(worst <= 300 * 1.25 + 5, `the longest wait of a request served: ${worst} ms`);
  assert.ok(waitedFor503.max() <= 150, `the longest wait before a 503: ${waitedFor503.max()} ms`);
  assert.ok(served.length > 0.9 * (160 * 4 / 10 + 200 * 4), `the workers kept busy: ${served.length} served`);
});

test('queue_max_wait: a burst is queued whole, it is not an overload', async () => {
  const { pool, clock, wf, ep, send } = setup({ pm: 'static', maxChildren: 2, queueLimit: 1024, queueTimeout: 5000, queueMaxWait: 300 });
  const started = pool.start();
  clock.advance(10);
  await started;
  for (let t = 0; t < 20; t++) {
    send(2);
    clock.advance(20);
    finishAll(wf, ep);
  }
  const burst = send(100);
  assert.deepEqual(burst.filter((r) => r.sink.error !== undefined).map((r) => r.sink.error!.code), []);
  assert.equal(pool.snapshot().queued, 98);
});

test('queue_max_wait: slow pages still queue two requests per worker while the queue grows', async () => {
  const { pool, clock, wf, ep, send } = setup({ pm: 'static', maxChildren: 2, queueMaxWait: 300, queueTimeout: 600_000 });
  const started = pool.start();
  clock.advance(10);
  await started;
  send(2);
  clock.advance(2000);
  finishAll(wf, ep);
  // 2 s pages, 2 workers: 2 arrive every second, 1 finishes; sub-windows of 10 s, so the
  // growth is seen after about 40 s, and what queued meanwhile drains before more may wait.
  const all: ReturnType<typeof send> = [];
  for (let t = 0; t < 150; t++) {
    all.push(...send(2));
    clock.advance(1000);
    if (t % 2 === 1) finishAll(wf, ep);
  }
  assert.ok(all.some((r) => r.sink.error?.code === ErrorCodes.QUEUE_FULL), 'the growing queue is refused');
  assert.ok(pool.snapshot().queued <= 2 * 2, `no more than two per worker wait: ${pool.snapshot().queued}`);
});

test('crash loop: after crash_limit crashes in crash_window the pool fails fast with 503, then tries one worker again', async () => {
  const { pool, clock, wf, send, lines } = setup({ pm: 'ondemand', maxChildren: 2, crashLimit: 3, crashWindow: 60_000 });
  wf.plan = { spawnFailAfter: 5, spawnErrno: 'EXITED' };
  const answered: TestRequest[] = [];
  for (let i = 0; i < 3; i++) {
    if (i > 0) clock.advance(2_000); // past the restart back-off
    answered.push(...send(1));
    clock.advance(5); // the start fails
  }
  assert.equal(wf.workers.length, 3);
  for (const r of answered) assert.equal(r.sink.status, 503, 'a queued request is not left hanging when no worker can start');
  assert.equal(pool.snapshot().state, 'failing');
  assert.ok(lines.some((l) => l.level === 50 && l.msg.includes('is failing: 3 crashes')));
  // New requests: 503 at once, no spawn.
  const [r] = send(1);
  assert.equal(r!.sink.error?.code, ErrorCodes.POOL_FAILING);
  assert.ok(r!.sink.error!.retryAfter! >= 1);
  assert.equal(wf.workers.length, 3);
  // The pause passes: one probe; it fails: still failing, longer pause.
  clock.advance(1000);
  assert.equal(wf.workers.length, 4);
  clock.advance(10);
  assert.equal(pool.snapshot().state, 'failing');
  // The command is fixed: the next probe starts and the pool recovers.
  wf.plan = { readyAfter: 10 };
  clock.advance(1000);
  assert.equal(wf.workers.length, 5);
  clock.advance(10);
  assert.equal(pool.snapshot().state, 'running');
  assert.ok(lines.some((l) => l.msg.includes('recovered')));
  const [ok] = send(1);
  assert.equal(ok!.ex.workerPid, wf.workers[4]!.pid);
  assert.ok(pool.snapshot().rejected.failing >= 1);
});

test('a command that cannot start is reported once, not in a tight loop, and queued requests get 503', async () => {
  const { pool, clock, wf, send, lines } = setup({ pm: 'static', maxChildren: 4, crashLimit: 5 });
  wf.plan = { spawnFailAfter: 0, spawnErrno: 'ENOENT' };
  const started = pool.start();
  clock.advance(0);
  await started;
  const reqs = send(2);
  for (let i = 0; i < 60; i++) clock.advance(1000);
  for (const r of reqs) assert.equal(r.sink.status, 503);
  const reports = lines.filter((l) => l.level === 50 && l.msg.includes('cannot start workers'));
  assert.equal(reports.length, 1, 'one clear error line');
  assert.match(reports[0]!.msg, /ENOENT/);
  // Back-off and failing pauses: a handful of attempts in a minute, not thousands.
  assert.ok(wf.workers.length < 20, `${wf.workers.length} attempts`);
  assert.equal(pool.snapshot().state, 'failing');
});

test('stop: running requests finish, new ones 503, workers stopped with reason shutdown', async () => {
  const { pool, clock, wf, ep, send } = setup({ pm: 'ondemand', maxChildren: 2 });
  const [a, b, q] = send(3);
  clock.advance(10);
  const stopped = pool.stop(10_000);
  let done = false;
  void stopped.then(() => (done = true));
  const [late] = send(1);
  assert.equal(late!.sink.error?.code, ErrorCodes.SHUTTING_DOWN);
  ep(wf.workers[0]!).finish();
  ep(wf.workers[0]!).finish(); // the queued one ran on the freed worker
  ep(wf.workers[1]!).finish();
  await new Promise((r) => setImmediate(r));
  clock.advance(100);
  await stopped;
  assert.equal(done, true);
  for (const r of [a, b, q]) assert.equal(r!.sink.status, 200);
  for (const w of wf.workers) {
    assert.equal(w.state, 'exited');
    assert.equal(w.retireReason, 'shutdown');
  }
});

// ---- regression tests: client aborts, held retryable failures, queue_limit 0 ----------

test('client abort that leaves the script running (backendBusy): the worker is retired, not handed the next request', async () => {
  const { pool, clock, wf, ep, send } = setup({ pm: 'ondemand', maxChildren: 2 });
  const [a] = send(1);
  clock.advance(10);
  const w = wf.workers[0]!;
  a!.ex.abort();
  ep(w).finish({ kind: 'aborted', backendBusy: true });
  assert.notEqual(w.state, 'idle');
  assert.equal(w.retireReason, 'client_abort');
  const [b] = send(1);
  clock.advance(10);
  assert.notEqual(b!.ex.workerPid, w.pid, 'the next request went to a fresh worker');
  assert.equal(pool.snapshot().aborted, 1);
  assert.equal(pool.snapshot().recycles['client_abort'], 1);
});

test('client abort reported once the cancelled request ended: the worker was busy until then, then is reused', async () => {
  const { pool, clock, wf, ep, send } = setup({ pm: 'ondemand', maxChildren: 2 });
  const [a] = send(1);
  clock.advance(10);
  const w = wf.workers[0]!;
  a!.ex.abort();
  // The endpoint is draining the orphaned request: the worker stays busy meanwhile.
  const [b] = send(1);
  clock.advance(10);
  assert.notEqual(b!.ex.workerPid, w.pid);
  ep(w).finish({ kind: 'aborted' });
  assert.equal(w.state, 'idle');
  const [c] = send(1);
  assert.equal(c!.ex.workerPid, w.pid);
  assert.equal(pool.snapshot().aborted, 1);
});

test('request_timeout also covers a script left running by a client abort', async () => {
  const { pool, clock, wf, send } = setup({ pm: 'ondemand', maxChildren: 1, requestTimeout: 1000 });
  const [a] = send(1);
  clock.advance(10);
  const w = wf.workers[0]!;
  a!.ex.abort();
  clock.advance(999);
  assert.equal(w.state, 'busy');
  clock.advance(1);
  assert.deepEqual(w.stopCalls, ['request_timeout']);
  assert.equal(pool.snapshot().active, 0);
});

test('a live worker that refuses a request (retryable, e.g. FCGI_OVERLOADED) is stopped, not left draining; the request goes to its replacement', async () => {
  const { pool, clock, wf, ep, send } = setup({ pm: 'ondemand', maxChildren: 1, queueTimeout: 60_000 });
  const overloaded: UpstreamOutcome = refusedRequest('unix:/fake/w1.sock', 'FCGI_OVERLOADED');
  const [r] = send(1);
  clock.advance(10);
  const w1 = wf.workers[0]!;
  ep(w1).finish(overloaded);
  clock.advance(EXIT_GRACE_MS);
  assert.equal(w1.state, 'stopping', 'released and stopped, not draining forever');
  assert.equal(pool.snapshot().workers.filter((x) => x.state === 'draining').length, 0);
  clock.advance(10); // w1 exits; its replacement spawns
  clock.advance(10); // and becomes ready: it takes the request put back at the head
  assert.equal(w1.state, 'exited');
  const w2 = wf.workers[1]!;
  assert.equal(r!.ex.workerPid, w2.pid);
  ep(w2).finish();
  assert.equal(r!.sink.status, 200);
});

test('queue_limit 0, ondemand: a request spawns a worker and waits for it; one beyond max_children is refused', async () => {
  const { pool, clock, wf, ep, send } = setup({ pm: 'ondemand', maxChildren: 2, queueLimit: 0 });
  const [a, b, c] = send(3);
  assert.equal(wf.workers.length, 2);
  assert.equal(a!.sink.done, false);
  assert.equal(b!.sink.done, false);
  assert.equal(c!.sink.error?.code, ErrorCodes.QUEUE_FULL);
  clock.advance(10);
  for (const w of wf.workers) ep(w).finish();
  assert.equal(a!.sink.status, 200);
  assert.equal(b!.sink.status, 200);
  // Both idle now: more requests are served at once, none queued.
  const more = send(2);
  for (const w of wf.workers) ep(w).finish();
  for (const r of more) assert.equal(r.sink.status, 200);
  assert.equal(pool.snapshot().rejected.queueFull, 1);
});

test('queue_max_wait: when the workers slow down, the head\'s wait lowers the bound as it happens, so the excess is refused at admission rather than after waiting', async () => {
  const { clock, wf, ep, send } = await queueOnFourWorkers();
  // 20 ms pages; 6 arrive per 20 ms (1.5× four workers) for 2 s: the queue stands at its bound, 60.
  for (let t = 0; t < 100; t++) {
    send(6);
    clock.advance(20);
    finishAll(wf, ep);
  }
  // Every page now takes 80 ms: the workers serve a quarter of what they did. The
  // sub-windows count the new rate only after 4 × 100 ms; the head's wait shows it at once.
  const slow: ReturnType<typeof send> = [];
  const atAdmission = new Set<(typeof slow)[number]>();
  for (let t = 0; t < 100; t++) {
    const sent = send(6);
    for (const r of sent) if (r.sink.error !== undefined) atAdmission.add(r);
    slow.push(...sent);
    clock.advance(20);
    if (t % 4 === 3) finishAll(wf, ep);
  }
  const refused = slow.filter((r) => r.sink.error !== undefined);
  const late = refused.filter((r) => !atAdmission.has(r));
  assert.ok(refused.length > 500, `the excess refused: ${refused.length} of ${slow.length}`);
  // Queued while the bound still held the old rate, then refused from the tail: 37 without the head's wait.
  assert.ok(late.length <= 10, `${late.length} refused after waiting`);
});

test('queue_max_wait: a burst that comes over a few sub-windows while ondemand workers start is queued whole (their start is not a slower rate)', async () => {
  const { clock, wf, ep, send } = setup({ pm: 'ondemand', maxChildren: 4, queueLimit: 100, queueTimeout: 60_000, queueMaxWait: 300, idleTimeout: 60_000 });
  // Fast pages first: a short mean service time, and the workers go idle and stop.
  for (let i = 0; i < 8; i++) {
    send(1);
    clock.advance(10);
    for (const w of wf.workers) if (ep(w)?.active) ep(w)!.finish();
  }
  wf.plan = { readyAfter: 100 };
  clock.advance(120_000);
  // 50 requests over 250 ms (10 every 50 ms, as through a busy front end) while new
  // workers take 100 ms to start and their first pages 200 ms more: no completion yet.
  const burst: ReturnType<typeof send> = [];
  for (let t = 0; t < 5; t++) {
    burst.push(...send(10));
    clock.advance(50);
  }
  for (let t = 0; t < 40; t++) {
    clock.advance(200);
    // Workers still starting have no endpoint yet.
    for (const w of wf.workers) if (ep(w)?.active) ep(w)!.finish();
  }
  assert.deepEqual(burst.filter((r) => r.sink.error !== undefined).map((r) => r.sink.error!.code), []);
  assert.equal(burst.filter((r) => r.sink.status === 200).length, 50);
});

test('idle revision: grows with each arrival and worker event, none while a request runs, and not with time', async () => {
  const { pool, clock, wf, ep, send, cfg } = setup({ pm: 'ondemand', maxChildren: 2, idleTimeout: 1000 });
  await pool.start();
  const r0 = pool.idleRevision();
  assert.notEqual(r0, undefined, 'an idle running pool has one');
  clock.advance(500);
  assert.equal(pool.idleRevision(), r0, 'time alone changes nothing');
  send(1);
  assert.equal(pool.idleRevision(), undefined, 'a request waits for its worker');
  clock.advance(10);
  assert.equal(pool.idleRevision(), undefined, 'and then runs');
  ep(wf.workers[0]!).finish();
  const r1 = pool.idleRevision();
  assert.ok(r1 !== undefined && r1 > r0!, `after the request: ${r1} > ${r0}`);
  clock.advance(1500); // the worker stops after idle_timeout: an event, status shows one worker fewer
  assert.equal(wf.workers[0]!.state, 'exited');
  const r2 = pool.idleRevision();
  assert.ok(r2 !== undefined && r2 > r1, `after the idle stop: ${r2} > ${r1}`);
  const retune = pool.retune({ ...cfg, maxChildren: 3 });
  assert.ok(retune !== undefined);
  retune();
  assert.ok(pool.idleRevision()! > r2, 'a retune in place shows in status');
});
