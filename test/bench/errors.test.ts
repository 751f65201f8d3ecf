// Failures are counted by kind and never crash the run: refused port, missing socket,
// reset, early close, garbage, silence. And --rate pacing, counted rather than timed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { startTrivialBackend } from '../../bench/trivial-backend.js';
import { runBench, type BenchOptions } from '../../src/bench/runner.js';
import { parseTarget } from '../../src/bench/target.js';
import { freePort } from '../helpers/ports.js';
import { makeTempDir } from '../helpers/tmp.js';

function options(url: string, over: Partial<BenchOptions> = {}): BenchOptions {
  return {
    target: parseTarget(url),
    request: { method: 'GET', body: undefined, headers: [], params: [], keepAlive: false },
    concurrency: 3,
    timeoutMs: 10_000,
    ...over,
  };
}

/** A server that does `onConn` with each connection once it sent some bytes. */
async function rudeServer(onData: (s: Socket) => void): Promise<{ port: number; server: Server }> {
  const sockets = new Set<Socket>();
  const server = createServer((s) => {
    sockets.add(s);
    s.on('error', () => {});
    s.on('close', () => sockets.delete(s));
    s.once('data', () => onData(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const close = server.close.bind(server);
  server.close = ((cb?: (err?: Error) => void) => {
    for (const s of sockets) s.destroy();
    return close(cb);
  }) as Server['close'];
  return { port: (server.address() as { port: number }).port, server };
}

test('a refused port: every request is a "connect" error, none lost', { timeout: 15_000 }, async () => {
  const port = await freePort();
  const run = await runBench(options(`fcgi://127.0.0.1:${port}/x.php`, { requests: 20 }));
  assert.equal(run.stats.issued, 20);
  assert.equal(run.stats.replies, 0);
  assert.equal(run.stats.errors.connect, 20);
  assert.equal(run.stats.errorCount, 20);
});

test('a missing Unix socket counts as "connect" too', { timeout: 15_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-bench-');
  const run = await runBench(options(`scgi://unix:${join(dir, 'none.sock')}:/x`, { requests: 5 }));
  assert.equal(run.stats.errors.connect, 5);
});

test('reset, early close, garbage and silence each have their kind', { timeout: 20_000 }, async (t) => {
  const reset = await rudeServer((s) => s.resetAndDestroy());
  const closed = await rudeServer((s) => s.end());
  const garbage = await rudeServer((s) => s.end('this is not FastCGI at all, no no no\r\n\r\n'));
  const silent = await rudeServer(() => {});
  for (const s of [reset, closed, garbage, silent]) t.after(() => new Promise((r) => s.server.close(() => r(undefined))));

  const r1 = await runBench(options(`fcgi://127.0.0.1:${reset.port}/`, { requests: 6 }));
  assert.equal(r1.stats.errors.reset, 6, JSON.stringify(r1.stats.errors));
  const r2 = await runBench(options(`http://127.0.0.1:${closed.port}/`, { requests: 6 }));
  assert.equal(r2.stats.errors.closed, 6, JSON.stringify(r2.stats.errors));
  const r3 = await runBench(options(`fcgi://127.0.0.1:${garbage.port}/`, { requests: 6 }));
  assert.equal(r3.stats.errors.protocol, 6, JSON.stringify(r3.stats.errors));
  const r4 = await runBench(options(`http://127.0.0.1:${silent.port}/`, { requests: 3, timeoutMs: 300 }));
  assert.equal(r4.stats.errors.timeout, 3, JSON.stringify(r4.stats.errors));
  for (const r of [r1, r2, r3, r4]) assert.equal(r.stats.replies, 0);
});

test('--rate with -d starts exactly rate × duration requests', { timeout: 15_000 }, async (t) => {
  const b = await startTrivialBackend({ protocol: 'fastcgi', address: '127.0.0.1:0' });
  t.after(() => b.close());
  const run = await runBench(options(`fcgi://${b.address}/`, { rate: 400, durationMs: 250, concurrency: 100 }));
  assert.equal(run.stats.issued, 100);
  assert.equal(run.stats.replies, 100);
  assert.equal(b.received(), 100);
});

test('--rate with -n, keep-alive: connections are reused, not one per request', { timeout: 15_000 }, async (t) => {
  const b = await startTrivialBackend({ protocol: 'http', address: '127.0.0.1:0' });
  t.after(() => b.close());
  const run = await runBench(options(`http://${b.address}/`, { rate: 500, requests: 40, concurrency: 50, request: { method: 'GET', body: undefined, headers: [], params: [], keepAlive: true } }));
  assert.equal(run.stats.issued, 40);
  assert.equal(run.stats.replies, 40);
  assert.ok(b.connections() < 40, `${b.connections()} connections for 40 requests`);
});

test('--rate is open loop: a slow backend gets requests on schedule; beyond -c they are "dropped"', { timeout: 15_000 }, async (t) => {
  const b = await startTrivialBackend({ protocol: 'fastcgi', address: '127.0.0.1:0', delayMs: 600 });
  t.after(() => b.close());
  // 40 requests due within 200 ms, each takes 600 ms, at most 4 in flight.
  const run = await runBench(options(`fcgi://${b.address}/`, { rate: 200, durationMs: 200, concurrency: 4 }));
  assert.equal(run.stats.issued, 40);
  assert.equal(run.stats.replies, 4);
  assert.equal(run.stats.errors.dropped, 36);
  assert.equal(b.received(), 4);
});
