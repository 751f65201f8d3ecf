/**
 * Client aborts on an endpoint with drainOnAbort (a spawned worker: one request at a
 * time). The backend here behaves like php-cgi: it ignores FCGI_ABORT_REQUEST and runs
 * the request to its end, writing output nobody reads. The endpoint must report the
 * outcome only once the request really ended, so the pool does not hand the worker a new
 * request meanwhile; the exchange itself is finished for the client at once.
 */
import assert from 'node:assert/strict';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { silentLogger } from '../../src/log/log.js';
import type { SocketAddress } from '../../src/protocol/address.js';
import { encodeEndRequest, encodeRecord, FcgiDecoder, ProtocolStatus, RecordType, type FcgiRecord } from '../../src/protocol/fastcgi.js';
import { UpstreamEndpoint } from '../../src/upstream/endpoint.js';
import type { UpstreamOptions, UpstreamOutcome } from '../../src/upstream/types.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor, withTimeout } from '../helpers/wait.js';
import { RecordingSink, runExchange, type RunResult } from '../fixtures/upstream/sink.js';
import { Exchange } from '../../src/protocol/exchange.js';
import { CgiParams } from '../../src/protocol/params.js';
import { performance } from 'node:perf_hooks';

/** A backend that answers a head and some body at once, then the rest only when told to. */
class StubbornBackend {
  readonly server: Server;
  aborts = 0;
  requests = 0;
  open = 0;
  private conn: Socket | undefined;

  constructor() {
    this.server = createServer((s) => {
      this.conn = s;
      this.open++;
      s.on('close', () => this.open--);
      s.on('error', () => {});
      const dec = new FcgiDecoder((rec: FcgiRecord) => {
        if (rec.type === RecordType.AbortRequest) this.aborts++;
        if (rec.type === RecordType.Stdin && rec.content.length === 0) {
          this.requests++;
          s.write(encodeRecord(RecordType.Stdout, 1, Buffer.from('Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nfirst part ')));
        }
      });
      s.on('data', (c: Buffer) => dec.push(c));
    });
  }

  /** The script goes on writing (to nobody), then ends the request. */
  finish(): void {
    this.conn!.write(
      Buffer.concat([
        encodeRecord(RecordType.Stdout, 1, Buffer.from('x'.repeat(5000))),
        encodeRecord(RecordType.Stderr, 1, Buffer.from('PHP Notice: still running')),
        encodeRecord(RecordType.Stdout, 1),
        encodeEndRequest(1, 0, ProtocolStatus.RequestComplete),
      ]),
    );
  }
}

async function setup(t: TestContext, over: Partial<UpstreamOptions>): Promise<{ backend: StubbornBackend; endpoint: UpstreamEndpoint }> {
  const dir = makeTempDir(t, 'fpm-drain-');
  const path = join(dir, 'w.sock');
  const backend = new StubbornBackend();
  await new Promise<void>((r) => backend.server.listen(path, r));
  const address: SocketAddress = { kind: 'unix', path, text: `unix:${path}` };
  const opts: UpstreamOptions = { protocol: 'fastcgi', connectTimeout: 2000, readTimeout: 10_000, keepAlive: true, maxIdle: 1, drainOnAbort: true, ...over };
  const endpoint = new UpstreamEndpoint(address, opts, silentLogger());
  t.after(async () => {
    endpoint.destroy();
    await new Promise<void>((r) => backend.server.close(() => r()));
  });
  return { backend, endpoint };
}

/** Starts a GET; resolves once the first response bytes reached the sink. */
async function startRequest(endpoint: UpstreamEndpoint): Promise<{ ex: RunResult['ex']; sink: RunResult['sink']; outcome: { value: UpstreamOutcome | undefined; promise: Promise<RunResult> } }> {
  let ex: RunResult['ex'] | undefined;
  let sink: RunResult['sink'] | undefined;
  const outcome: { value: UpstreamOutcome | undefined; promise: Promise<RunResult> } = { value: undefined, promise: undefined as never };
  outcome.promise = withTimeout(
    runExchange(endpoint, { REQUEST_METHOD: 'GET', SCRIPT_NAME: '/slow.php' }, { onStarted: (e, s) => ((ex = e), (sink = s)) }),
    20_000,
    'request',
  ).then((r) => {
    outcome.value = r.outcome;
    return r;
  });
  await waitFor(() => sink !== undefined && sink.bodyBytes > 0, { timeout: 5000, what: 'first response bytes' });
  return { ex: ex!, sink: sink!, outcome };
}

test('drainOnAbort: the aborted request is cancelled and read to its END_REQUEST before the outcome is reported', async (t) => {
  const { backend, endpoint } = await setup(t, {});
  const { ex, sink, outcome } = await startRequest(endpoint);
  const bytesBefore = sink.bodyBytes;
  ex.abort();
  assert.equal(ex.finished, true, 'the client side is finished at once');
  await waitFor(() => backend.aborts === 1, { timeout: 5000, what: 'FCGI_ABORT_REQUEST at the backend' });
  // The backend got our abort record, so anything we would have reported is reported by now.
  assert.equal(outcome.value, undefined, 'no outcome while the backend still runs the request');
  assert.equal(endpoint.active, 1);
  assert.equal(backend.open, 1, 'the connection is kept to read the request to its end');

  backend.finish();
  const r = await outcome.promise;
  assert.deepEqual(r.outcome, { kind: 'aborted' }, 'the worker is free: no backendBusy');
  assert.equal(sink.bodyBytes, bytesBefore, 'nothing reached the client after its abort');
  assert.equal(sink.callsAfterFinish, 0);
  assert.equal(endpoint.active, 0);
  assert.equal(endpoint.idleCount, 0, 'not reused: our abort record may still be unread');
  await waitFor(() => backend.open === 0, { timeout: 5000, what: 'connection closed after the drain' });
});

test('drainOnAbort: a cancelled request that never ends is reported with backendBusy after read_timeout', async (t) => {
  const { backend, endpoint } = await setup(t, { readTimeout: 300 });
  const { ex, outcome } = await startRequest(endpoint);
  ex.abort();
  const r = await outcome.promise;
  assert.deepEqual(r.outcome, { kind: 'aborted', backendBusy: true });
  assert.equal(backend.aborts, 1);
  await waitFor(() => backend.open === 0, { timeout: 5000, what: 'connection closed' });
});

test('without drainOnAbort (external backends) the connection is closed at once; the backend may still be busy', async (t) => {
  const { backend, endpoint } = await setup(t, { drainOnAbort: false });
  const { ex, outcome } = await startRequest(endpoint);
  ex.abort();
  const r = await outcome.promise;
  assert.deepEqual(r.outcome, { kind: 'aborted', backendBusy: true });
  await waitFor(() => backend.open === 0, { timeout: 5000, what: 'connection closed' });
});

/** A POST of 100 body bytes of which only 10 were pushed: the client still owes the rest. */
function startStalledPost(endpoint: UpstreamEndpoint): { ex: Exchange; outcome: Promise<UpstreamOutcome> } {
  const ex = new Exchange(CgiParams.fromObject({ REQUEST_METHOD: 'POST', SCRIPT_NAME: '/upload.php', CONTENT_LENGTH: '100' }), new RecordingSink(), 'test', performance.now());
  const outcome = new Promise<UpstreamOutcome>((resolve) => endpoint.run(ex, resolve));
  ex.pushBody(Buffer.alloc(10));
  return { ex, outcome };
}

test('drainOnAbort: a request aborted before its body was sent is not drained (php-cgi would wait for the body forever)', async (t) => {
  const { backend, endpoint } = await setup(t, {});
  const { ex, outcome } = startStalledPost(endpoint);
  await waitFor(() => backend.open === 1, { timeout: 5000, what: 'the request at the backend' });
  ex.abort();
  // Reported at once with the worker busy (the pool replaces it), not after read_timeout (10 s here).
  assert.deepEqual(await withTimeout(outcome, 3000, 'outcome'), { kind: 'aborted', backendBusy: true });
  await waitFor(() => backend.open === 0, { timeout: 5000, what: 'connection closed' });
});

test('read_timeout does not run while the client still owes body bytes', async (t) => {
  const { backend, endpoint } = await setup(t, { readTimeout: 200 });
  const { ex, outcome } = startStalledPost(endpoint);
  let reported: UpstreamOutcome | undefined;
  void outcome.then((o) => (reported = o));
  await waitFor(() => backend.open === 1, { timeout: 5000, what: 'the request at the backend' });
  // A control started later with the same read_timeout, to a backend that never answers:
  // once its timeout fired, the stalled request's would have fired too, had it run.
  const dir = makeTempDir(t, 'fpm-silent-');
  const held = new Set<Socket>();
  const silent = createServer((s) => {
    held.add(s);
    s.on('error', () => {});
  });
  await new Promise<void>((r) => silent.listen(join(dir, 's.sock'), r));
  const control = new UpstreamEndpoint({ kind: 'unix', path: join(dir, 's.sock'), text: 'silent' }, { protocol: 'fastcgi', connectTimeout: 2000, readTimeout: 200, keepAlive: false, maxIdle: 0, drainOnAbort: false }, silentLogger());
  t.after(() => {
    control.destroy();
    for (const s of held) s.destroy();
    silent.close();
  });
  // The endpoints' sockets are unref'd: this keeps the test's event loop alive meanwhile.
  const keepAlive = setInterval(() => {}, 1000);
  const timedOut = await withTimeout(runExchange(control, { REQUEST_METHOD: 'GET', SCRIPT_NAME: '/silent.php' }), 10_000, 'the control request').finally(() => clearInterval(keepAlive));
  assert.equal(timedOut.outcome.kind === 'failed' && timedOut.outcome.facts.failure, 'read_timeout', JSON.stringify(timedOut.outcome));
  assert.equal(reported, undefined, `no outcome while the body is owed, got ${JSON.stringify(reported)}`);
  ex.pushBody(Buffer.alloc(90));
  ex.endBody();
  await waitFor(() => backend.requests === 1, { timeout: 5000, what: 'the whole body at the backend' });
  backend.finish();
  assert.deepEqual(await withTimeout(outcome, 5000, 'outcome'), { kind: 'done' });
});
