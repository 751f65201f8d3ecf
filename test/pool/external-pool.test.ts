import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connectFailed, endpointClosed, readTimedOut } from '../../src/upstream/failures.js';
import { ErrorCodes } from '../../src/errors.js';
import { ExternalPool } from '../../src/pool/external/external-pool.js';
import type { UpstreamOutcome } from '../../src/upstream/types.js';
import { FakeClock } from './fake-clock.js';
import { FakeEndpoint, addr, makeRequest, poolConfig, recordingLogger } from './helpers.js';

function setup(over: Parameters<typeof poolConfig>[0] = {}, n = 3) {
  const clock = new FakeClock();
  const eps: FakeEndpoint[] = [];
  const { logger, lines } = recordingLogger();
  const backends = Array.from({ length: n }, (_, i) => addr(`127.0.0.1:${9001 + i}`));
  const pool = new ExternalPool(poolConfig({ backends, ...over }), logger, clock, (a, opts) => {
    const ep = new FakeEndpoint(a, opts);
    eps.push(ep);
    return ep;
  });
  return { pool, eps, clock, lines };
}

const refused = (port: number): UpstreamOutcome => connectFailed(`127.0.0.1:${port}`, Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }));

test('least busy backend first, ties round-robin', () => {
  const { pool, eps } = setup();
  for (let i = 0; i < 3; i++) pool.dispatch(makeRequest().ex);
  assert.deepEqual(eps.map((e) => e.active), [1, 1, 1], 'ties go round-robin');
  eps[0]!.finish();
  // Backend 0 now has the fewest running: it gets the next one.
  const r = makeRequest();
  pool.dispatch(r.ex);
  assert.equal(r.ex.backend, '127.0.0.1:9001');
  eps[1]!.finish();
  eps[2]!.finish();
  // All at 1, 0, 0 → the next two go to 1 and 2 (not 0).
  pool.dispatch(makeRequest().ex);
  pool.dispatch(makeRequest().ex);
  assert.deepEqual(eps.map((e) => e.active), [1, 1, 1]);
  const s = pool.snapshot();
  assert.equal(s.completed, 3);
  assert.equal(s.active, 3);
  assert.equal(s.maxActive, 3);
});

test('max_conns_per_backend caps each backend; the rest queue in order', () => {
  const { pool, eps } = setup({ maxConnsPerBackend: 2 }, 2);
  const reqs = Array.from({ length: 6 }, () => makeRequest());
  for (const r of reqs) pool.dispatch(r.ex);
  assert.deepEqual(eps.map((e) => e.active), [2, 2]);
  assert.equal(pool.snapshot().queued, 2);
  eps[1]!.finish();
  assert.equal(reqs[4]!.ex.backend, '127.0.0.1:9002', 'the oldest queued request took the freed slot');
  assert.equal(pool.snapshot().queued, 1);
});

test('a refusing backend is marked down and the request retried on the next one', async () => {
  const { pool, eps, clock, lines } = setup({ backendDownTime: 5000 }, 3);
  eps[0]!.auto = () => refused(9001);
  const r = makeRequest();
  pool.dispatch(r.ex);
  assert.equal(eps[0]!.runs, 1);
  assert.equal(eps[1]!.active, 1, 'retried on the next backend');
  eps[1]!.finish();
  assert.equal(r.sink.status, 200);
  assert.equal(r.sink.text(), '127.0.0.1:9002');
  assert.ok(lines.some((l) => l.level === 40 && l.msg.includes('127.0.0.1:9001 marked down')));
  assert.deepEqual(pool.snapshot().backends.map((b) => b.down), [true, false, false]);

  // While down it is skipped.
  for (let i = 0; i < 4; i++) pool.dispatch(makeRequest().ex);
  assert.equal(eps[0]!.runs, 1);
  // After its down time the next request probes it, and it is used again when it answers.
  clock.advance(5000);
  eps[0]!.auto = () => ({ kind: 'done' });
  const probe = makeRequest();
  pool.dispatch(probe.ex);
  assert.equal(eps[0]!.runs, 2);
  assert.equal(probe.sink.status, 200);
  assert.ok(lines.some((l) => l.msg.includes('127.0.0.1:9001 is answering again')));
});

test('every backend down → 502 ALL_BACKENDS_DOWN, also for queued requests', () => {
  const { pool, eps } = setup({ maxConnsPerBackend: 1 }, 2);
  const a = makeRequest();
  const b = makeRequest();
  const q = makeRequest();
  pool.dispatch(a.ex);
  pool.dispatch(b.ex);
  pool.dispatch(q.ex); // both full: queued
  assert.equal(pool.snapshot().queued, 1);
  eps[0]!.finish(refused(9001)); // not retryable any more? it is: rewinds and tries 9002 (full) → requeued
  assert.equal(a.sink.done, false, 'requeued at the head, not answered');
  assert.equal(pool.snapshot().queued, 2);
  eps[1]!.finish(refused(9002));
  // Now both are down: everything waiting is answered 502.
  for (const r of [a, b, q]) {
    assert.equal(r.sink.status, 502);
    assert.equal(r.sink.error?.code, ErrorCodes.ALL_BACKENDS_DOWN);
  }
  const late = makeRequest();
  pool.dispatch(late.ex);
  assert.equal(late.sink.error?.code, ErrorCodes.ALL_BACKENDS_DOWN, 'new requests fail fast');
  const s = pool.snapshot();
  assert.equal(s.errors.unreachable, 4);
  assert.equal(s.queued, 0);
  assert.equal(s.active, 0);
});

test('a failure that is not retryable is answered with the endpoint error', () => {
  const { pool, eps } = setup({}, 2);
  const r = makeRequest();
  pool.dispatch(r.ex);
  const timedOut = readTimedOut('127.0.0.1:9001', 60_000);
  const err = timedOut.error;
  eps[0]!.finish(timedOut);
  assert.equal(r.sink.error, err);
  assert.equal(eps[1]!.runs, 0);
  assert.equal(pool.snapshot().errors.timeout, 1);
});

test('queue_limit: past it 503 QUEUE_FULL at once, with one warning line', () => {
  const { pool, lines } = setup({ maxConnsPerBackend: 1, queueLimit: 2 }, 1);
  const reqs = Array.from({ length: 6 }, () => makeRequest());
  for (const r of reqs) pool.dispatch(r.ex);
  const full = reqs.filter((r) => r.sink.error?.code === ErrorCodes.QUEUE_FULL);
  assert.equal(full.length, 3);
  assert.equal(full[0]!.sink.status, 503);
  assert.equal(full[0]!.sink.error!.retryAfter, 1);
  assert.equal(pool.snapshot().rejected.queueFull, 3);
  const warn = lines.filter((l) => l.code === ErrorCodes.QUEUE_FULL);
  assert.equal(warn.length, 1, 'rejections within a second share one line');
  assert.equal(warn[0]!.queueLimit, 2);
});

test('a flood of refusals is one line per episode: the first at once, then the count, then quiet', () => {
  const { pool, clock, lines } = setup({ maxConnsPerBackend: 1, queueLimit: 1 }, 1);
  for (let i = 0; i < 502; i++) pool.dispatch(makeRequest().ex); // 1 running, 1 queued, 500 refused
  const warns = (): typeof lines => lines.filter((l) => l.code === ErrorCodes.QUEUE_FULL);
  assert.equal(warns().length, 1);
  clock.advance(1000);
  assert.equal(warns().length, 2, 'the interval ends with one summary line');
  assert.equal(warns()[1]!.repeats, 499);
  assert.match(String(warns()[1]!.msg), /499 more requests refused \(ERR_QUEUE_FULL\)/);
  clock.advance(5000);
  assert.equal(warns().length, 2, 'nothing more while nothing is refused');
});

test('queue_timeout: a waiting request gets 503 QUEUE_TIMEOUT; one timer serves the queue', () => {
  const { pool, clock, lines } = setup({ maxConnsPerBackend: 1, queueTimeout: 1000 }, 1);
  pool.dispatch(makeRequest().ex);
  const a = makeRequest();
  pool.dispatch(a.ex);
  clock.advance(400);
  const b = makeRequest();
  pool.dispatch(b.ex);
  assert.equal(clock.pending, 1, 'one timer for the whole queue');
  clock.advance(599);
  assert.equal(a.sink.done, false);
  clock.advance(1);
  assert.equal(a.sink.error?.code, ErrorCodes.QUEUE_TIMEOUT);
  assert.equal(b.sink.done, false);
  clock.advance(400);
  assert.equal(b.sink.error?.code, ErrorCodes.QUEUE_TIMEOUT);
  assert.equal(pool.snapshot().rejected.queueTimeout, 2);
  assert.ok(lines.some((l) => l.code === ErrorCodes.QUEUE_TIMEOUT && l.waitedMs === 1000));
});

test('a client that aborts while queued leaves the queue', () => {
  const { pool, eps } = setup({ maxConnsPerBackend: 1 }, 1);
  pool.dispatch(makeRequest().ex);
  const a = makeRequest();
  const b = makeRequest();
  pool.dispatch(a.ex);
  pool.dispatch(b.ex);
  a.ex.abort();
  assert.equal(pool.snapshot().queued, 1);
  eps[0]!.finish();
  assert.equal(eps[0]!.running[0]!.ex, b.ex, 'the aborted one was skipped');
  assert.equal(pool.snapshot().aborted, 1);
});

test('stop: new requests 503 SHUTTING_DOWN, running and queued ones finish', async () => {
  const { pool, eps } = setup({ maxConnsPerBackend: 1 }, 1);
  const a = makeRequest();
  const b = makeRequest();
  pool.dispatch(a.ex);
  pool.dispatch(b.ex);
  const stopped = pool.stop(10_000);
  const late = makeRequest();
  pool.dispatch(late.ex);
  assert.equal(late.sink.error?.code, ErrorCodes.SHUTTING_DOWN);
  eps[0]!.finish();
  eps[0]!.finish();
  await stopped;
  assert.equal(a.sink.status, 200);
  assert.equal(b.sink.status, 200);
  assert.equal(eps[0]!.destroyed, true);
  const s = pool.snapshot();
  assert.equal(s.state, 'stopped');
  assert.equal(s.accepted, 3);
  assert.equal(s.completed, 2);
  assert.equal(s.rejected.shuttingDown, 1);
});

test('stop: after the timeout queued requests get 503 and running ones are cut', async () => {
  const { pool, eps, clock } = setup({ maxConnsPerBackend: 1 }, 1);
  const a = makeRequest();
  const b = makeRequest();
  pool.dispatch(a.ex);
  pool.dispatch(b.ex);
  // The fake endpoint reports a destroy as a closed connection.
  eps[0]!.destroy = function () {
    this.destroyed = true;
    for (const r of this.running.splice(0)) {
      r.done(endpointClosed('127.0.0.1:9001', true));
    }
  };
  const stopped = pool.stop(20);
  clock.advance(19);
  await new Promise((r) => setImmediate(r));
  assert.ok(a.sink.answeredAt === 0 && b.sink.answeredAt === 0, 'not before the timeout');
  clock.advance(1);
  await stopped;
  assert.equal(b.sink.error?.code, ErrorCodes.SHUTTING_DOWN);
  assert.equal(a.sink.error?.code, ErrorCodes.SHUTTING_DOWN);
});
