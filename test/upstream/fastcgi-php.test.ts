/**
 * The FastCGI endpoint against a real php-cgi (one process, Unix socket in a temp dir).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { ErrorCodes } from '../../src/errors.js';
import { silentLogger } from '../../src/log/log.js';
import { parseAddress, type SocketAddress } from '../../src/protocol/address.js';
import { UpstreamEndpoint } from '../../src/upstream/endpoint.js';
import type { UpstreamOptions } from '../../src/upstream/types.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor, withTimeout } from '../helpers/wait.js';
import { startPhpCgi, writeScripts, type PhpOptions } from '../fixtures/upstream/php.js';
import { phpParams, runExchange, sha256, type RunOptions, type RunResult } from '../fixtures/upstream/sink.js';

const SCRIPTS: Record<string, string> = {
  'hello.php': `<?php
    http_response_code(201);
    header('X-Test: yes');
    header('Content-Type: text/plain');
    echo 'hello ', $_GET['name'] ?? 'world';`,
  'pid.php': `<?php echo getmypid();`,
  'post-hash.php': `<?php
    $h = hash_init('sha256');
    $in = fopen('php://input', 'rb');
    $n = 0;
    while (!feof($in)) { $d = fread($in, 65536); $n += strlen($d); hash_update($h, $d); }
    echo $n, ' ', hash_final($h);`,
  // 160 blocks of 64 KiB, block i = the 4-byte big-endian i repeated.
  'big.php': `<?php
    header('Content-Type: application/octet-stream');
    for ($i = 0; $i < 160; $i++) echo str_repeat(pack('N', $i), 16384);`,
  'sleep.php': `<?php usleep((int)($_GET['ms'] ?? 3000) * 1000); echo 'late';`,
  'stderr.php': `<?php error_log('note for the error log'); echo 'ok';`,
  'abort.php': `<?php
    ignore_user_abort(false);
    register_shutdown_function(function () {
      file_put_contents(__DIR__ . '/abort-result', connection_aborted() ? 'aborted' : 'completed');
    });
    header('Content-Type: text/plain');
    for ($i = 0; $i < 400; $i++) { echo str_repeat('x', 8192), "\\n"; flush(); usleep(50000); }`,
};

function options(over: Partial<UpstreamOptions> = {}): UpstreamOptions {
  return { protocol: 'fastcgi', connectTimeout: 2000, readTimeout: 10_000, keepAlive: true, maxIdle: 4, ...over };
}

interface Setup {
  dir: string;
  address: SocketAddress;
  endpoint: UpstreamEndpoint;
  run(script: string, opts?: RunOptions & { query?: string }): Promise<RunResult>;
}

async function setup(t: TestContext, php: PhpOptions = {}, opts: Partial<UpstreamOptions> = {}): Promise<Setup & { php: Awaited<ReturnType<typeof startPhpCgi>> }> {
  const dir = makeTempDir(t, 'fpm-up-');
  writeScripts(dir, SCRIPTS);
  // Registered before php-cgi's stop (hooks run in order): a single php-cgi blocked
  // reading a kept-alive connection would otherwise sit out SIGTERM.
  let endpoint: UpstreamEndpoint | undefined;
  t.after(() => endpoint?.destroy());
  const p = await startPhpCgi(t, dir, php);
  const address = parseAddress(`unix:${p.socketPath}`) as SocketAddress;
  const ep = new UpstreamEndpoint(address, options(opts), silentLogger());
  endpoint = ep;
  const run = (script: string, o: RunOptions & { query?: string } = {}): Promise<RunResult> =>
    withTimeout(runExchange(ep, phpParams(dir, script, { QUERY_STRING: o.query ?? '' }), o), 30_000, `request to ${script}`);
  return { dir, address, endpoint: ep, run, php: p };
}

function doneOk(r: RunResult): void {
  assert.deepEqual(r.outcome, { kind: 'done' }, r.outcome.kind === 'failed' ? r.outcome.error.message : '');
  assert.equal(r.sink.ended, true);
  assert.equal(r.sink.failure, undefined);
}

test('GET: status, headers and body reach the sink', async (t) => {
  const s = await setup(t);
  const r = await s.run('hello.php', { query: 'name=bob' });
  doneOk(r);
  assert.equal(r.sink.gotHead?.status, 201);
  assert.ok(r.sink.gotHead?.headers.some(([k, v]) => k.toLowerCase() === 'x-test' && v === 'yes'));
  assert.equal(r.sink.bodyBuffer.toString(), 'hello bob');
  assert.equal(r.ex.state, 'done');
  assert.equal(s.endpoint.active, 0);
  assert.equal(r.sink.callsAfterFinish, 0);
});

test('POST: a 10 MB body arrives intact (sha256 computed by PHP) under back-pressure', async (t) => {
  const s = await setup(t);
  const body = Buffer.alloc(10 * 1024 * 1024);
  for (let i = 0; i < body.length; i += 4) body.writeUInt32BE((i * 2654435761) >>> 0, i);
  const r = await s.run('post-hash.php', { body });
  doneOk(r);
  assert.equal(r.sink.bodyBuffer.toString(), `${body.length} ${sha256(body)}`);
  assert.ok(r.bodyPauses > 0, 'the front end was asked to pause at least once');
});

test('a 10 MB response reaches a slow client intact, with bounded buffering', async (t) => {
  const s = await setup(t);
  const expected = Buffer.alloc(160 * 65536);
  for (let i = 0; i < 160; i++) for (let j = 0; j < 16384; j++) expected.writeUInt32BE(i, i * 65536 + j * 4);
  const r = await s.run('big.php', { keepBody: false, pauseEvery: 256 * 1024, drainDelayMs: 2 });
  doneOk(r);
  assert.equal(r.sink.bodyBytes, expected.length);
  assert.equal(r.sink.digest(), sha256(expected));
  assert.ok(r.sink.pauses >= 20, `sink paused ${r.sink.pauses} times`);
  // After body() returned false, at most the rest of one socket read may follow.
  assert.ok(r.sink.maxBytesWhilePaused <= 256 * 1024, `${r.sink.maxBytesWhilePaused} bytes arrived while paused`);
});

test('keep-alive: sequential requests reuse one connection to the same php-cgi', async (t) => {
  const s = await setup(t);
  const pids = [];
  for (let i = 0; i < 3; i++) {
    const r = await s.run('pid.php');
    doneOk(r);
    pids.push(r.sink.bodyBuffer.toString());
  }
  assert.equal(new Set(pids).size, 1);
  assert.equal(pids[0], String(s.php.child.pid));
  assert.equal(s.endpoint.connectionsOpened, 1);
  assert.equal(s.endpoint.idleCount, 1);
  s.endpoint.closeIdle();
  assert.equal(s.endpoint.idleCount, 0);
  doneOk(await s.run('pid.php'));
  assert.equal(s.endpoint.connectionsOpened, 2);
});

test('keep-alive off: one connection per request', async (t) => {
  const s = await setup(t, {}, { keepAlive: false });
  doneOk(await s.run('pid.php'));
  doneOk(await s.run('pid.php'));
  assert.equal(s.endpoint.connectionsOpened, 2);
  assert.equal(s.endpoint.idleCount, 0);
});

/**
 * A failure the pool can act on: the endpoint did not answer the client, the code says
 * what happened, and the message names the backend.
 */
function assertCleanFailure(r: RunResult, socketPath: string): void {
  assert.equal(r.outcome.kind, 'failed');
  if (r.outcome.kind !== 'failed') return;
  const e = r.outcome.error;
  assert.ok(e.code === ErrorCodes.BACKEND_UNREACHABLE || e.code === ErrorCodes.BACKEND_CLOSED, e.message);
  assert.ok(e.message.includes(socketPath), e.message);
  // Nothing had been processed (never a response byte), so no half response exists.
  assert.equal(r.sink.gotHead, undefined);
  assert.equal(r.sink.finished, false, 'the endpoint does not answer a failed exchange');
  if (e.code === ErrorCodes.BACKEND_UNREACHABLE) {
    assert.equal(r.outcome.retryable, true);
    assert.equal(r.outcome.backendDown, true);
  }
}

/*
 * php-cgi's own PHP_FCGI_MAX_REQUESTS, observed: on a kept-alive connection with pauses
 * between requests it serves N-1 requests, then reads the next one and closes without
 * answering. The endpoint sees a reused connection closed before any response byte.
 */
test('PHP_FCGI_MAX_REQUESTS=2, one process: served until it exits, then cleanly classified; restart serves again', async (t) => {
  const dir = makeTempDir(t, 'fpm-up-');
  writeScripts(dir, SCRIPTS);
  let endpoint: UpstreamEndpoint | undefined;
  t.after(() => endpoint?.destroy());
  let php = await startPhpCgi(t, dir, { maxRequests: 2 });
  const address = parseAddress(`unix:${php.socketPath}`) as SocketAddress;
  const ep = new UpstreamEndpoint(address, options(), silentLogger());
  endpoint = ep;
  const run = (): Promise<RunResult> => withTimeout(runExchange(ep, phpParams(dir, 'pid.php')), 20_000, 'pid.php');

  const pids = new Set<string>();
  for (let round = 0; round < 3; round++) {
    if (!php.child.running) php = await startPhpCgi(t, dir, { maxRequests: 2 });
    let served = 0;
    let failed = false;
    for (let i = 0; i < 4 && !failed; i++) {
      const r = await run();
      if (r.outcome.kind === 'done') {
        assert.equal(r.sink.bodyBuffer.toString(), String(php.child.pid));
        pids.add(r.sink.bodyBuffer.toString());
        served++;
      } else {
        assertCleanFailure(r, php.socketPath);
        failed = true;
      }
    }
    assert.ok(served >= 1 && served <= 2, `round ${round}: served ${served}`);
    assert.ok(failed, `round ${round}: php-cgi stopped serving after PHP_FCGI_MAX_REQUESTS`);
    await withTimeout(php.child.exited, 10_000, 'php-cgi exit');
    if (round === 0) {
      // Nobody listens now: a retryable "backend down".
      const down = await run();
      assertCleanFailure(down, php.socketPath);
      assert.equal(down.outcome.kind === 'failed' && down.outcome.error.code, ErrorCodes.BACKEND_UNREACHABLE);
    }
  }
  assert.equal(pids.size, 3);
  assert.equal(ep.active, 0);
});

test('PHP_FCGI_MAX_REQUESTS=2 with a php-cgi master: recycled children are invisible (stale keep-alive retried)', async (t) => {
  const dir = makeTempDir(t, 'fpm-up-');
  writeScripts(dir, SCRIPTS);
  let endpoint: UpstreamEndpoint | undefined;
  t.after(() => endpoint?.destroy());
  const php = await startPhpCgi(t, dir, { maxRequests: 2, children: 2 });
  const ep = new UpstreamEndpoint(parseAddress(`unix:${php.socketPath}`) as SocketAddress, options(), silentLogger());
  endpoint = ep;
  const pids = new Set<string>();
  for (let i = 0; i < 24; i++) {
    // Pauses let a child finish exiting while its kept-alive connection sits idle.
    if (i % 3 === 0) await new Promise((r) => setTimeout(r, 20));
    const r = await withTimeout(runExchange(ep, phpParams(dir, 'pid.php')), 20_000, `request ${i}`);
    doneOk(r);
    pids.add(r.sink.bodyBuffer.toString());
  }
  assert.ok(pids.size >= 6, `served by ${pids.size} children`);
  assert.ok(ep.staleRetries > 0, 'some kept-alive connections were found closed and retried');
  assert.equal(ep.active, 0);
});

test('read timeout: a script that sleeps gets 504 BACKEND_TIMEOUT and the connection is dropped', async (t) => {
  const s = await setup(t, {}, { readTimeout: 300 });
  const r = await s.run('sleep.php', { query: 'ms=3000' });
  assert.equal(r.outcome.kind, 'failed');
  if (r.outcome.kind === 'failed') {
    assert.equal(r.outcome.error.code, ErrorCodes.BACKEND_TIMEOUT);
    assert.equal(r.outcome.error.status, 504);
    assert.equal(r.outcome.retryable, false);
    assert.equal(r.outcome.backendDown, false);
  }
  assert.equal(r.sink.finished, false);
  assert.equal(s.endpoint.active, 0);
  assert.equal(s.endpoint.idleCount, 0);
});

test('STDERR output (error_log) reaches respondStderr', async (t) => {
  const s = await setup(t);
  const r = await s.run('stderr.php');
  doneOk(r);
  assert.equal(r.sink.bodyBuffer.toString(), 'ok');
  assert.match(r.sink.stderrText, /note for the error log/);
});

test('client abort: the backend connection is closed and PHP notices', async (t) => {
  const s = await setup(t);
  let aborted = false;
  const p = s.run('abort.php', {
    onStarted: (ex, sink) => {
      // Abort once the response is flowing.
      const orig = sink.body.bind(sink);
      sink.body = (chunk: Buffer): boolean => {
        const ok = orig(chunk);
        if (!aborted && sink.bodyBytes > 20_000) {
          aborted = true;
          setImmediate(() => ex.abort());
        }
        return ok;
      };
    },
  });
  const r = await p;
  assert.deepEqual(r.outcome, { kind: 'aborted', backendBusy: true });
  assert.equal(s.endpoint.active, 0);
  assert.equal(s.endpoint.idleCount, 0);
  const result = join(s.dir, 'abort-result');
  await waitFor(() => {
    try {
      return readFileSync(result, 'utf8') === 'aborted';
    } catch {
      return false;
    }
  }, { timeout: 15_000, what: 'PHP to notice the aborted connection' });
  // The single php-cgi process is free again.
  doneOk(await s.run('pid.php'));
});
