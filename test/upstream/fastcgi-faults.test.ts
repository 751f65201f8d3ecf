/**
 * The FastCGI endpoint against a fixture backend that misbehaves on command
 * (test/fixtures/upstream/fastcgi-server.ts): classification of every failure, the
 * stale keep-alive retry, abort, idle handling, destroy.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { ErrorCodes } from '../../src/errors.js';
import { silentLogger } from '../../src/log/log.js';
import type { SocketAddress } from '../../src/protocol/address.js';
import { Exchange } from '../../src/protocol/exchange.js';
import { CgiParams } from '../../src/protocol/params.js';
import { UpstreamEndpoint } from '../../src/upstream/endpoint.js';
import type { UpstreamOptions, UpstreamOutcome } from '../../src/upstream/types.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor, withTimeout } from '../helpers/wait.js';
import { FastcgiFixture } from '../fixtures/upstream/fastcgi-server.js';
import { RecordingSink, runExchange, type RunOptions, type RunResult } from '../fixtures/upstream/sink.js';

interface Setup {
  fixture: FastcgiFixture;
  endpoint: UpstreamEndpoint;
  run(mode: string, opts?: RunOptions): Promise<RunResult>;
}

async function setup(t: TestContext, over: Partial<UpstreamOptions> = {}): Promise<Setup> {
  const dir = makeTempDir(t, 'fpm-upf-');
  const path = join(dir, 'fcgi.sock');
  const fixture = await FastcgiFixture.start(path);
  const address: SocketAddress = { kind: 'unix', path, text: `unix:${path}` };
  const opts: UpstreamOptions = { protocol: 'fastcgi', connectTimeout: 2000, readTimeout: 10_000, keepAlive: true, maxIdle: 4, ...over };
  const endpoint = new UpstreamEndpoint(address, opts, silentLogger());
  t.after(async () => {
    endpoint.destroy();
    await fixture.close();
  });
  const run = (mode: string, o: RunOptions = {}): Promise<RunResult> =>
    withTimeout(runExchange(endpoint, { REQUEST_METHOD: 'GET', SCRIPT_NAME: '/x', MODE: mode }, o), 20_000, `MODE=${mode}`);
  return { fixture, endpoint, run };
}

function failed(o: UpstreamOutcome): Extract<UpstreamOutcome, { kind: 'failed' }> {
  assert.equal(o.kind, 'failed');
  return o as Extract<UpstreamOutcome, { kind: 'failed' }>;
}

function assertDone(r: RunResult, body: string): void {
  assert.deepEqual(r.outcome, { kind: 'done' }, r.outcome.kind === 'failed' ? r.outcome.error.message : '');
  assert.equal(r.sink.ended, true);
  assert.equal(r.sink.bodyBuffer.toString(), body);
}

/** The connection was destroyed by the endpoint (the fixture saw the client close). */
async function assertConnectionDropped(s: Setup): Promise<void> {
  await waitFor(() => s.fixture.events.open === 0, { timeout: 5000, what: 'backend connection closed' });
  assert.equal(s.endpoint.idleCount, 0);
  assert.equal(s.endpoint.active, 0);
}

for (const mode of ['garbage', 'bad-head', 'no-head', 'wrong-id']) {
  test(`${mode}: BACKEND_PROTOCOL 502, not retryable, connection destroyed`, async (t) => {
    const s = await setup(t);
    const r = await s.run(mode);
    const f = failed(r.outcome);
    assert.equal(f.error.code, ErrorCodes.BACKEND_PROTOCOL);
    assert.equal(f.error.status, 502);
    assert.equal(f.retryable, false);
    assert.equal(f.backendDown, false);
    assert.ok(f.error.message.includes(s.fixture.path), f.error.message);
    assert.equal(r.sink.finished, false, 'the endpoint leaves answering to the pool');
    await assertConnectionDropped(s);
    // The endpoint is still usable.
    assertDone(await s.run('ok'), 'ok 1');
  });
}

test('closed mid-response: head delivered, then BACKEND_CLOSED (the pool cuts the response)', async (t) => {
  const s = await setup(t);
  const r = await s.run('close-mid');
  const f = failed(r.outcome);
  assert.equal(f.error.code, ErrorCodes.BACKEND_CLOSED);
  assert.equal(f.retryable, false);
  assert.match(f.error.message, /mid-response/);
  assert.equal(r.sink.gotHead?.status, 200);
  assert.equal(r.sink.bodyBytes, 1000);
  assert.equal(r.sink.ended, false);
  assert.equal(r.ex.responseStarted, true);
  assert.equal(s.endpoint.active, 0);
});

test('fresh connection closed before any response byte: BACKEND_CLOSED, not retried, not retryable', async (t) => {
  const s = await setup(t);
  const r = await s.run('close-now');
  const f = failed(r.outcome);
  assert.equal(f.error.code, ErrorCodes.BACKEND_CLOSED);
  assert.equal(f.error.status, 502);
  assert.equal(f.retryable, false);
  assert.equal(s.fixture.events.requests, 1, 'no silent retry on a fresh connection');
  assert.equal(s.endpoint.staleRetries, 0);
});

test('kept-alive connection closed by the backend: retried once on a fresh connection, transparently', async (t) => {
  const s = await setup(t);
  assertDone(await s.run('ok'), 'ok 1');
  assert.equal(s.endpoint.idleCount, 1);
  const r = await s.run('close-reused');
  assertDone(r, 'ok 1'); // first request on the new connection
  assert.equal(s.endpoint.staleRetries, 1);
  assert.equal(s.endpoint.connectionsOpened, 2);
  assert.equal(s.fixture.events.requests, 3);
  assert.equal(s.endpoint.idleCount, 1);
});

test('kept-alive connection closed after our request went out, and the replay finds no one listening: the failure says it followed a replay', async (t) => {
  const s = await setup(t);
  assertDone(await s.run('ok'), 'ok 1');
  const r = await s.run('die-reused');
  const f = failed(r.outcome);
  assert.equal(s.endpoint.staleRetries, 1);
  assert.equal(f.facts.failure, 'connect', f.error.message);
  assert.equal(f.facts.replayed, true, 'a process that died under the request looks the same: the pool must not take the refusal as proof');
  // A refusal with no replay before it is not marked.
  const again = failed((await s.run('ok')).outcome);
  assert.equal(again.facts.failure, 'connect');
  assert.equal(again.facts.replayed, undefined);
});

test('kept-alive connection closed, body too large to replay: BACKEND_CLOSED, no replay, the exchange cannot rewind', async (t) => {
  const s = await setup(t);
  assertDone(await s.run('ok'), 'ok 1');
  const body = Buffer.alloc(1024 * 1024, 7);
  const r = await s.run('close-reused', { body });
  const f = failed(r.outcome);
  assert.equal(f.error.code, ErrorCodes.BACKEND_CLOSED);
  assert.equal(f.facts.reused, true);
  assert.equal(r.ex.rewind(), false, 'no backend can take it again: its body is gone');
  assert.equal(s.endpoint.staleRetries, 0);
  assert.equal(s.fixture.events.requests, 2);
  assert.equal(s.endpoint.active, 0);
});

test('END_REQUEST with FCGI_OVERLOADED: failed, retryable, backend not down', async (t) => {
  const s = await setup(t);
  const r = await s.run('overloaded');
  const f = failed(r.outcome);
  assert.equal(f.retryable, true);
  assert.equal(f.backendDown, false);
  assert.equal(f.error.status, 502);
  assert.match(f.error.message, /FCGI_OVERLOADED/);
  assert.equal(r.sink.finished, false);
  assert.equal(r.ex.rewind(), true, 'the pool can hand the request to another backend');
});

test('STDERR records reach respondStderr, the response still completes', async (t) => {
  const s = await setup(t);
  const r = await s.run('stderr');
  assertDone(r, 'ok 1');
  assert.equal(r.sink.stderrText, 'PHP Warning: something odd');
});

test('client abort: FCGI_ABORT_REQUEST is sent and the connection closed; outcome aborted', async (t) => {
  const s = await setup(t);
  const requested = s.fixture.changed();
  let ex: RunResult['ex'] | undefined;
  const p = s.run('hang', { onStarted: (e) => (ex = e) });
  await requested;
  await waitFor(() => s.fixture.events.requests === 1, { timeout: 5000, what: 'request at the backend' });
  ex!.abort();
  const r = await p;
  assert.deepEqual(r.outcome, { kind: 'aborted', backendBusy: true });
  assert.equal(s.endpoint.active, 0);
  await waitFor(() => s.fixture.events.clientCloses === 1, { timeout: 5000, what: 'backend connection closed' });
  assert.equal(s.fixture.events.aborts, 1);
  assert.equal(s.endpoint.idleCount, 0);
});

test('read timeout with no byte from the backend: 504 BACKEND_TIMEOUT, connection destroyed', async (t) => {
  const s = await setup(t, { readTimeout: 200 });
  const r = await s.run('hang');
  const f = failed(r.outcome);
  assert.equal(f.error.code, ErrorCodes.BACKEND_TIMEOUT);
  assert.equal(f.error.status, 504);
  assert.equal(f.retryable, false);
  await assertConnectionDropped(s);
});

test("read_timeout counts from the backend's last byte: a response that trickles for longer is not cut", async (t) => {
  const s = await setup(t, { readTimeout: 200 });
  const r = await s.run('trickle');
  assertDone(r, '.....');
});

test('backend answers before reading the body: done, and the connection is not reused', async (t) => {
  const s = await setup(t);
  const body = Buffer.alloc(2 * 1024 * 1024, 1);
  const r = await s.run('early-end', { body });
  assertDone(r, 'ok 1');
  assert.equal(s.endpoint.idleCount, 0, 'leftover STDIN would corrupt the next request');
  assertDone(await s.run('ok'), 'ok 1');
  assert.equal(s.endpoint.connectionsOpened, 2);
});

test('a backend that stops reading: the request body buffered in fcgi-pm stays bounded', async (t) => {
  const s = await setup(t);
  const fed = { bytes: 0 };
  let ex: RunResult['ex'] | undefined;
  const p = s.run('stall', { body: Buffer.alloc(20 * 1024 * 1024, 9), fed, onStarted: (e) => (ex = e) });
  await waitFor(() => s.fixture.events.requests === 1, { timeout: 5000, what: 'request at the backend' });
  // Nothing can be awaited for "nothing more happens": give the pipeline time to fill.
  let last = -1;
  await waitFor(
    async () => {
      const now = fed.bytes;
      const settled = now === last;
      last = now;
      if (!settled) await new Promise((r) => setTimeout(r, 100));
      return settled;
    },
    { timeout: 10_000, interval: 100, what: 'the body feed to stall' },
  );
  // Socket buffers on both sides plus one high-water mark; never the whole body.
  assert.ok(fed.bytes < 4 * 1024 * 1024, `${fed.bytes} bytes taken while the backend read nothing`);
  ex!.abort();
  assert.deepEqual((await p).outcome, { kind: 'aborted', backendBusy: true });
});

test('keep-alive off: FCGI_KEEP_CONN not set, the backend closes, nothing kept idle', async (t) => {
  const s = await setup(t, { keepAlive: false });
  assertDone(await s.run('ok'), 'ok 1');
  assertDone(await s.run('ok'), 'ok 1');
  assert.equal(s.endpoint.connectionsOpened, 2);
  assert.equal(s.endpoint.idleCount, 0);
});

test('idle connections: at most maxIdle kept; one the backend closes is dropped; closeIdle closes the rest', async (t) => {
  const s = await setup(t, { maxIdle: 2 });
  const results = await Promise.all([s.run('ok'), s.run('ok'), s.run('ok')]);
  for (const r of results) assertDone(r, 'ok 1');
  assert.equal(s.endpoint.connectionsOpened, 3);
  assert.equal(s.endpoint.idleCount, 2);
  await waitFor(() => s.fixture.events.open === 2, { timeout: 5000, what: 'third connection closed' });

  // The backend closes its connections: the endpoint forgets them, quietly.
  await s.fixture.close();
  await waitFor(() => s.endpoint.idleCount === 0, { timeout: 5000, what: 'idle connections dropped' });
  const r = await s.run('ok');
  const f = failed(r.outcome);
  assert.equal(f.error.code, ErrorCodes.BACKEND_UNREACHABLE);
  assert.equal(f.retryable, true);
  assert.equal(f.backendDown, true);
});

test('closeIdle() closes idle connections', async (t) => {
  const s = await setup(t);
  assertDone(await s.run('ok'), 'ok 1');
  assert.equal(s.endpoint.idleCount, 1);
  s.endpoint.closeIdle();
  assert.equal(s.endpoint.idleCount, 0);
  await waitFor(() => s.fixture.events.open === 0, { timeout: 5000, what: 'connection closed' });
});

test('destroy() fails running requests with BACKEND_CLOSED and refuses new ones', async (t) => {
  const s = await setup(t);
  const p = s.run('hang');
  await waitFor(() => s.fixture.events.requests === 1, { timeout: 5000, what: 'request at the backend' });
  assert.equal(s.endpoint.active, 1);
  s.endpoint.destroy();
  const r = await p;
  const f = failed(r.outcome);
  assert.equal(f.error.code, ErrorCodes.BACKEND_CLOSED);
  assert.equal(f.retryable, false);
  assert.equal(s.endpoint.active, 0);
  const after = await s.run('ok');
  assert.equal(failed(after.outcome).error.code, ErrorCodes.BACKEND_CLOSED);
});

test('an exchange aborted before run() is reported aborted without touching the backend', async (t) => {
  const s = await setup(t);
  const ex = new Exchange(new CgiParams(), new RecordingSink(), 'test', 0);
  ex.abort();
  const outcome = await new Promise<UpstreamOutcome>((resolve) => s.endpoint.run(ex, resolve));
  assert.deepEqual(outcome, { kind: 'aborted' });
  assert.equal(s.endpoint.connectionsOpened, 0);
  assert.equal(s.endpoint.active, 0);
});
