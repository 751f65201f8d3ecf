// `fcgi-pm bench` as a real process: --json schema, exit codes, usage errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { startTrivialBackend } from '../../bench/trivial-backend.js';
import { FCGI_PM_BIN } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { makeTempDir } from '../helpers/tmp.js';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function bench(args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [FCGI_PM_BIN, 'bench', ...args], { timeout: 20_000, killSignal: 'SIGKILL' }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code) : null;
      resolve({ code, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

const LATENCY_KEYS = ['count', 'min', 'avg', 'p50', 'p90', 'p99', 'max'];

function assertLatency(l: Record<string, unknown>): void {
  assert.deepEqual(Object.keys(l), LATENCY_KEYS);
  for (const k of LATENCY_KEYS) assert.equal(typeof l[k], 'number', k);
  assert.ok((l.min as number) <= (l.p50 as number) && (l.p50 as number) <= (l.p99 as number) && (l.p99 as number) <= (l.max as number));
}

test('--json: the fcgi-pm-bench/1 schema, with counts that match the backend', { timeout: 30_000 }, async (t) => {
  const b = await startTrivialBackend({ protocol: 'fastcgi', address: '127.0.0.1:0', mix: true, size: 50 });
  t.after(() => b.close());
  const dir = makeTempDir(t, 'fpm-bench-');
  const bodyFile = join(dir, 'body');
  writeFileSync(bodyFile, 'a=1&b=2');
  const r = await bench(['--json', '-n', '40', '-c', '4', '-k', '--body-file', bodyFile, '--param', 'DOCUMENT_ROOT=/srv', `fcgi://${b.address}/p.php`]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stderr, '', 'no progress line when stderr is not a terminal');
  const j = JSON.parse(r.stdout) as Record<string, any>;
  assert.deepEqual(Object.keys(j), [
    'schema', 'target', 'protocol', 'method', 'keep_alive', 'mode', 'concurrency', 'rate', 'requests_asked', 'duration_asked_ms',
    'started_at', 'elapsed_ms', 'requests', 'rps', 'status', 'errors', 'connections', 'latency_ms', 'bytes', 'schedule_lag_max_ms',
    'stalled_s', 'warnings',
  ]);
  assert.deepEqual(j.warnings, [], 'some replies were 2xx, none stalled');
  assert.equal(j.schema, 'fcgi-pm-bench/1');
  assert.deepEqual([j.protocol, j.method, j.keep_alive, j.mode, j.concurrency, j.rate, j.requests_asked], ['fastcgi', 'POST', true, 'closed', 4, null, 40]);
  assert.ok(!Number.isNaN(Date.parse(j.started_at)));
  assert.deepEqual(j.requests, { issued: 40, replies: 40, errors: 0, unfinished: 0 });
  assert.deepEqual(j.status, { '1xx': 0, '2xx': 28, '3xx': 0, '4xx': 8, '5xx': 4, codes: { '200': 28, '404': 8, '503': 4 } });
  assert.deepEqual(Object.keys(j.errors), ['connect', 'reset', 'timeout', 'closed', 'protocol', 'client', 'dropped', 'other']);
  assert.deepEqual(Object.keys(j.latency_ms), ['connect', 'first_byte', 'reply']);
  for (const l of Object.values(j.latency_ms)) assertLatency(l as Record<string, unknown>);
  assert.equal(j.latency_ms.connect.count, 4);
  assert.equal(j.latency_ms.reply.count, 40);
  assert.deepEqual(Object.keys(j.bytes), ['sent', 'received', 'body', 'body_per_reply']);
  assert.equal(j.bytes.body, 40 * 50);
  assert.equal(typeof j.rps, 'number');
  assert.ok(j.rps > 0);
  assert.equal(j.schedule_lag_max_ms, null);
  assert.equal(b.received(), 40);
});

test('an unreachable target is an error with the reason, exit 1, no report', { timeout: 30_000 }, async (t) => {
  const port = await freePort();
  const refused = await bench(['-n', '5', `http://127.0.0.1:${port}/`]);
  assert.equal(refused.code, 1, refused.stderr);
  assert.match(refused.stderr, new RegExp(`cannot reach .*: ECONNREFUSED 127\\.0\\.0\\.1:${port}`));
  assert.equal(refused.stdout, '');
  const sock = join(makeTempDir(t, 'fpm-bench-'), 'php.sock');
  const missing = await bench(['-n', '5', `fcgi://unix:${sock}/index.php`]);
  assert.equal(missing.code, 1, missing.stderr);
  assert.match(missing.stderr, new RegExp(`ENOENT ${sock.replace(/[.]/g, '\\.')}$`, 'm'));
  assert.equal(missing.stdout, '');
});

test('every reply non-2xx: a warning in the report, exit 0', { timeout: 30_000 }, async (t) => {
  const server = createHttpServer((_req, res) => {
    res.statusCode = 500;
    res.end('broken');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise((resolve) => server.close(resolve)));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  const r = await bench(['-n', '20', '-c', '2', '-k', url]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^Warning: +every reply was non-2xx \(500×20\)/m);
  const j = JSON.parse((await bench(['--json', '-n', '20', '-c', '2', '-k', url])).stdout) as { warnings: string[]; stalled_s: number };
  assert.equal(j.warnings.length, 1);
  assert.match(j.warnings[0]!, /non-2xx/);
  assert.equal(j.stalled_s, 0);
});

test('--rate in --json: open mode, lag reported', { timeout: 30_000 }, async (t) => {
  const b = await startTrivialBackend({ protocol: 'scgi', address: '127.0.0.1:0' });
  t.after(() => b.close());
  const r = await bench(['--json', '--rate', '100', '-d', '200ms', `scgi://${b.address}/`]);
  assert.equal(r.code, 0, r.stderr);
  const j = JSON.parse(r.stdout) as Record<string, any>;
  assert.deepEqual([j.mode, j.rate, j.concurrency, j.requests.issued, j.requests.replies], ['open', 100, 4096, 20, 20]);
  assert.equal(typeof j.schedule_lag_max_ms, 'number');
});

test('usage mistakes exit 2 and say what is wrong', { timeout: 30_000 }, async () => {
  const cases: Array<[string[], RegExp]> = [
    [['ftp://x:1/'], /unknown scheme/],
    [['-n', '10', '-d', '1s', 'fcgi://127.0.0.1:1/'], /not both/],
    [['-c', '0', 'fcgi://127.0.0.1:1/'], /-c must be/],
    [['--param', 'NOEQUALS', 'fcgi://127.0.0.1:1/'], /NAME=VALUE/],
    [['--param', 'A=1', 'http://127.0.0.1:1/'], /--header/],
    [['--rate', 'fast', 'fcgi://127.0.0.1:1/'], /--rate/],
    [['--body-file', '/nonexistent/x', 'fcgi://127.0.0.1:1/'], /--body-file/],
  ];
  for (const [args, msg] of cases) {
    const r = await bench(args);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, msg);
  }
});
