// The bench engine's counts against a backend with known behaviour: a status mix of
// every 10th request 503 and every 4th (otherwise) 404, known body size and latency,
// over FastCGI, SCGI and HTTP, with and without keep-alive.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { startTrivialBackend, type TrivialBackend, type TrivialProtocol } from '../../bench/trivial-backend.js';
import { runBench, type BenchOptions } from '../../src/bench/runner.js';
import { buildReport } from '../../src/bench/report.js';
import { parseTarget } from '../../src/bench/target.js';
import { makeTempDir } from '../helpers/tmp.js';

const SCHEME: Record<TrivialProtocol, string> = { fastcgi: 'fcgi', scgi: 'scgi', http: 'http' };

function urlOf(b: TrivialBackend, protocol: TrivialProtocol, path = '/page.php?x=1'): string {
  if (b.address.startsWith('unix:')) return `${SCHEME[protocol]}://${b.address}:${path}`;
  return `${SCHEME[protocol]}://${b.address}${path}`;
}

function options(url: string, over: Partial<BenchOptions> = {}): BenchOptions {
  return {
    target: parseTarget(url),
    request: { method: 'GET', body: undefined, headers: [], params: [], keepAlive: false },
    concurrency: 4,
    timeoutMs: 10_000,
    ...over,
  };
}

/** Status counts of n requests under the mix, computed independently of the backend. */
function expectedMix(n: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (let i = 1; i <= n; i++) {
    const s = i % 10 === 0 ? 503 : i % 4 === 0 ? 404 : 200;
    out[s] = (out[s] ?? 0) + 1;
  }
  return out;
}

for (const protocol of ['fastcgi', 'scgi', 'http'] as const) {
  for (const keepAlive of protocol === 'scgi' ? [false] : [false, true]) {
    test(`${protocol}${keepAlive ? ' keep-alive' : ''}: -n 200 is exact, statuses and bytes add up`, { timeout: 20_000 }, async (t) => {
      const b = await startTrivialBackend({ protocol, address: '127.0.0.1:0', size: 321, mix: true });
      t.after(() => b.close());
      const opts = options(urlOf(b, protocol), { requests: 200, concurrency: 7, request: { method: 'GET', body: undefined, headers: [], params: [], keepAlive } });
      const r = buildReport(opts, await runBench(opts));
      assert.equal(r.requests.issued, 200);
      assert.equal(r.requests.replies, 200);
      assert.equal(r.requests.errors, 0, JSON.stringify(r.errors));
      assert.equal(b.received(), 200, 'the backend saw exactly -n requests');
      assert.deepEqual(r.status.codes, { '200': 140, '404': 40, '503': 20 });
      assert.deepEqual(r.status.codes, expectedMix(200));
      assert.deepEqual([r.status['2xx'], r.status['4xx'], r.status['5xx']], [140, 40, 20]);
      assert.equal(r.bytes.body, 200 * 321);
      assert.equal(r.bytes.body_per_reply, 321);
      assert.equal(r.latency_ms.reply.count, 200);
      assert.equal(r.connections.opened, keepAlive ? 7 : 200);
      assert.equal(b.connections(), keepAlive ? 7 : 200);
      assert.ok(r.bytes.sent > 0 && r.bytes.received > r.bytes.body);
    });
  }
}

test('a known latency shows in the percentiles; -c bounds the requests in flight', { timeout: 20_000 }, async (t) => {
  const b = await startTrivialBackend({ protocol: 'fastcgi', address: '127.0.0.1:0', delayMs: 40 });
  t.after(() => b.close());
  const opts = options(urlOf(b, 'fastcgi'), { requests: 12, concurrency: 3, request: { method: 'GET', body: undefined, headers: [], params: [], keepAlive: true } });
  const r = buildReport(opts, await runBench(opts));
  assert.equal(r.requests.replies, 12);
  assert.ok(r.latency_ms.reply.min >= 39, `min ${r.latency_ms.reply.min} ms`);
  assert.ok(r.latency_ms.first_byte.p50 >= 39);
  // 12 requests, 3 at a time, 40 ms each: at least 4 rounds.
  assert.ok(r.elapsed_ms >= 4 * 39, `elapsed ${r.elapsed_ms}`);
});

test('Unix socket target, POST body: CONTENT_LENGTH and body reach the backend', { timeout: 20_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-bench-');
  const b = await startTrivialBackend({ protocol: 'fastcgi', address: `unix:${join(dir, 'f.sock')}` });
  t.after(() => b.close());
  const body = Buffer.alloc(70_000, 'b'); // more than one STDIN record
  const opts = options(urlOf(b, 'fastcgi'), { requests: 5, concurrency: 2, request: { method: 'POST', body, headers: [], params: [], keepAlive: true } });
  const r = buildReport(opts, await runBench(opts));
  assert.equal(r.requests.replies, 5, JSON.stringify(r.errors));
  assert.ok(r.bytes.sent > 5 * 70_000);
});

test('-d: runs for the duration, then lets running requests finish', { timeout: 20_000 }, async (t) => {
  const b = await startTrivialBackend({ protocol: 'http', address: '127.0.0.1:0', delayMs: 30 });
  t.after(() => b.close());
  const opts = options(urlOf(b, 'http'), { durationMs: 200, concurrency: 2, request: { method: 'GET', body: undefined, headers: [], params: [], keepAlive: true } });
  const run = await runBench(opts);
  assert.ok(run.stats.issued >= 2);
  assert.equal(run.stats.replies, run.stats.issued, 'every started request was answered');
  assert.equal(b.received(), run.stats.issued);
  assert.equal(run.unfinished, 0);
});
