/**
 * The SCGI endpoint against a Node SCGI server that echoes params and body
 * (test/fixtures/upstream/scgi-server.ts).
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { ErrorCodes } from '../../src/errors.js';
import { silentLogger } from '../../src/log/log.js';
import type { SocketAddress } from '../../src/protocol/address.js';
import { UpstreamEndpoint } from '../../src/upstream/endpoint.js';
import type { UpstreamOptions, UpstreamOutcome } from '../../src/upstream/types.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor, withTimeout } from '../helpers/wait.js';
import { ScgiFixture } from '../fixtures/upstream/scgi-server.js';
import { runExchange, sha256, type RunOptions, type RunResult } from '../fixtures/upstream/sink.js';

interface Setup {
  fixture: ScgiFixture;
  endpoint: UpstreamEndpoint;
  run(params: Record<string, string>, opts?: RunOptions): Promise<RunResult>;
}

async function setup(t: TestContext, over: Partial<UpstreamOptions> = {}): Promise<Setup> {
  const dir = makeTempDir(t, 'fpm-ups-');
  const path = join(dir, 'scgi.sock');
  const fixture = await ScgiFixture.start(path);
  const opts: UpstreamOptions = { protocol: 'scgi', connectTimeout: 2000, readTimeout: 10_000, keepAlive: true, maxIdle: 4, ...over };
  const endpoint = new UpstreamEndpoint({ kind: 'unix', path, text: `unix:${path}` } satisfies SocketAddress, opts, silentLogger());
  t.after(async () => {
    endpoint.destroy();
    await fixture.close();
  });
  const run = (params: Record<string, string>, o: RunOptions = {}): Promise<RunResult> =>
    withTimeout(runExchange(endpoint, params, o), 30_000, 'SCGI request');
  return { fixture, endpoint, run };
}

function echoedParams(r: RunResult): Record<string, string> {
  const h = r.sink.gotHead?.headers.find(([k]) => k === 'X-Params');
  assert.ok(h, 'X-Params header');
  return JSON.parse(Buffer.from(h[1], 'base64').toString()) as Record<string, string>;
}

function failed(o: UpstreamOutcome): Extract<UpstreamOutcome, { kind: 'failed' }> {
  assert.equal(o.kind, 'failed');
  return o as Extract<UpstreamOutcome, { kind: 'failed' }>;
}

test('SCGI: params and body reach the backend; status, headers and echoed body come back', async (t) => {
  const s = await setup(t);
  const r = await s.run({ REQUEST_METHOD: 'POST', SCRIPT_NAME: '/app', QUERY_STRING: 'a=1&b=é' }, { body: Buffer.from('hello scgi') });
  assert.deepEqual(r.outcome, { kind: 'done' });
  assert.equal(r.sink.ended, true);
  assert.equal(r.sink.gotHead?.status, 201);
  const p = echoedParams(r);
  assert.equal(p.SCGI, '1');
  assert.equal(p.CONTENT_LENGTH, '10');
  assert.equal(p.SCRIPT_NAME, '/app');
  assert.equal(p.QUERY_STRING, 'a=1&b=é');
  assert.equal(r.sink.bodyBuffer.toString(), 'hello scgi');
  // SCGI has no keep-alive: one connection per request.
  const r2 = await s.run({ REQUEST_METHOD: 'GET' });
  assert.deepEqual(r2.outcome, { kind: 'done' });
  assert.equal(echoedParams(r2).CONTENT_LENGTH, '0');
  assert.equal(s.endpoint.connectionsOpened, 2);
  assert.equal(s.fixture.connections, 2);
  assert.equal(s.endpoint.idleCount, 0);
  assert.equal(s.endpoint.active, 0);
});

test('SCGI: a 10 MB body goes up and comes back intact through a slow client', async (t) => {
  const s = await setup(t);
  const body = Buffer.alloc(10 * 1024 * 1024);
  for (let i = 0; i < body.length; i += 4) body.writeUInt32BE((i * 2246822519) >>> 0, i);
  const r = await s.run({ REQUEST_METHOD: 'PUT' }, { body, keepBody: false, pauseEvery: 512 * 1024, drainDelayMs: 1 });
  assert.deepEqual(r.outcome, { kind: 'done' }, r.outcome.kind === 'failed' ? r.outcome.error.message : '');
  assert.equal(r.sink.bodyBytes, body.length);
  assert.equal(r.sink.digest(), sha256(body));
  assert.ok(r.bodyPauses > 0, 'request body back-pressure reached the front end');
  assert.ok(r.sink.pauses > 0);
  assert.ok(r.sink.maxBytesWhilePaused <= 256 * 1024, `${r.sink.maxBytesWhilePaused} bytes arrived while paused`);
});

test('SCGI: backend closes without answering → BACKEND_CLOSED, retryable only if our request never left us', async (t) => {
  const s = await setup(t);
  const r = await s.run({ MODE: 'close-now' });
  const f = failed(r.outcome);
  assert.equal(f.error.code, ErrorCodes.BACKEND_CLOSED);
  assert.deepEqual([f.facts.failure, f.facts.reused, f.facts.responseBytes], ['closed', false, false]);
  // The close may beat our write: a fresh connection is retried only when the head failed to go out.
  assert.equal(f.retryable, !f.facts.headSent);
  assert.equal(r.sink.finished, false);
});

test('SCGI: a response that is not a CGI head → BACKEND_PROTOCOL', async (t) => {
  const s = await setup(t);
  const r = await s.run({ MODE: 'bad-head' });
  const f = failed(r.outcome);
  assert.equal(f.error.code, ErrorCodes.BACKEND_PROTOCOL);
  assert.equal(f.error.status, 502);
  assert.equal(f.retryable, false);
});

test('SCGI: a param SCGI cannot carry (NUL byte) fails that request with 400, no connection kept', async (t) => {
  const s = await setup(t);
  const r = await s.run({ REQUEST_METHOD: 'GET', HTTP_X_EVIL: 'a\0b' });
  const f = failed(r.outcome);
  assert.equal(f.error.status, 400);
  assert.equal(f.error.code, ErrorCodes.SCGI_BAD_HEADERS);
  assert.equal(f.retryable, false);
  assert.equal(s.endpoint.active, 0);
  // The endpoint still works.
  assert.deepEqual((await s.run({ REQUEST_METHOD: 'GET' })).outcome, { kind: 'done' });
});

test('SCGI: client abort closes the backend connection', async (t) => {
  const s = await setup(t);
  // A body announced but never finished keeps the backend waiting.
  const body = Buffer.alloc(100_000, 3);
  let ex: RunResult['ex'] | undefined;
  const p = s.run({ REQUEST_METHOD: 'POST' }, {
    body,
    pauseEvery: 1,
    onStarted: (e) => (ex = e),
  });
  // The fixture echoes; the sink pauses after the first byte and never drains, then aborts.
  await new Promise<void>((resolve) => {
    const check = (): void => {
      if (ex && ex.responseStarted) resolve();
      else setTimeout(check, 5);
    };
    check();
  });
  ex!.abort();
  const r = await p;
  assert.deepEqual(r.outcome, { kind: 'aborted', backendBusy: true });
  assert.equal(s.endpoint.active, 0);
  await waitFor(() => s.fixture.open === 0, { timeout: 5000, what: 'backend connection closed' });
});

/** An SCGI backend that sends `response` at once and closes only after `closeAfterMs`. */
async function lingeringBackend(t: TestContext, response: string, closeAfterMs: number): Promise<UpstreamEndpoint> {
  const path = join(makeTempDir(t, 'fpm-ups-'), 'linger.sock');
  const server = createServer((sock) => {
    sock.once('data', () => {
      sock.write(response);
      setTimeout(() => sock.end(), closeAfterMs).unref();
    });
    sock.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(path, r));
  const endpoint = new UpstreamEndpoint({ kind: 'unix', path, text: `unix:${path}` }, { protocol: 'scgi', connectTimeout: 2000, readTimeout: 10_000, keepAlive: true, maxIdle: 4 }, silentLogger());
  t.after(() => {
    endpoint.destroy();
    server.close();
  });
  return endpoint;
}

test('SCGI: the last Content-Length byte ends the response for the client; the outcome waits for the backend\'s EOF', async (t) => {
  const endpoint = await lingeringBackend(t, 'Status: 200 OK\r\nContent-Length: 5\r\n\r\nhello', 300);
  let started: { ex: RunResult['ex']; sink: RunResult['sink'] } | undefined;
  let reported = false;
  const p = withTimeout(runExchange(endpoint, { REQUEST_METHOD: 'GET' }, { onStarted: (ex, sink) => (started = { ex, sink }) }), 10_000, 'SCGI request').finally(() => (reported = true));
  await waitFor(() => started?.sink.ended === true, { timeout: 5000, what: 'the response ended for the client' });
  assert.equal(reported, false, 'the backend has not closed yet: its seat is still busy');
  assert.equal(started!.ex.state, 'done');
  // nginx closes once it has Content-Length bytes: no abort, and the backend is not cut.
  started!.ex.abort();
  assert.equal(started!.ex.state, 'done');
  const r = await p;
  assert.equal(r.sink.bodyBytes, 5);
  assert.deepEqual(r.outcome, { kind: 'done' });
});

for (const [what, response] of [
  ['part of the body only: the backend may still be running', 'Status: 200 OK\r\nContent-Length: 50\r\n\r\nhello'],
  ['no Content-Length: only EOF ends the response', 'Status: 200 OK\r\n\r\nhello'],
] as const) {
  test(`SCGI: client abort after ${what}`, async (t) => {
    const endpoint = await lingeringBackend(t, response, 2000);
    let started: { ex: RunResult['ex']; sink: RunResult['sink'] } | undefined;
    const p = withTimeout(runExchange(endpoint, { REQUEST_METHOD: 'GET' }, { onStarted: (ex, sink) => (started = { ex, sink }) }), 10_000, 'SCGI request');
    await waitFor(() => started !== undefined && started.sink.bodyBytes === 5, { timeout: 5000, what: 'the 5 body bytes' });
    started!.ex.abort();
    const r = await p;
    assert.equal(r.sink.bodyBytes, 5);
    assert.equal(r.sink.ended, false);
    assert.deepEqual(r.outcome, { kind: 'aborted', backendBusy: true });
  });
}
