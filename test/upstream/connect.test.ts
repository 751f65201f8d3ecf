/**
 * Connect failures: nothing reached the backend, so the request is retryable and the
 * backend looks down. The endpoint never answers the client itself.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { ErrorCodes } from '../../src/errors.js';
import { silentLogger } from '../../src/log/log.js';
import { parseAddress, type SocketAddress } from '../../src/protocol/address.js';
import { UpstreamEndpoint } from '../../src/upstream/endpoint.js';
import type { UpstreamOptions, UpstreamOutcome } from '../../src/upstream/types.js';
import { freePort } from '../helpers/ports.js';
import { trackPid, untrackPid } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';
import { withTimeout } from '../helpers/wait.js';
import { runExchange } from '../fixtures/upstream/sink.js';

function options(over: Partial<UpstreamOptions> = {}): UpstreamOptions {
  return { protocol: 'fastcgi', connectTimeout: 2000, readTimeout: 5000, keepAlive: true, maxIdle: 4, ...over };
}

function failed(o: UpstreamOutcome): Extract<UpstreamOutcome, { kind: 'failed' }> {
  assert.equal(o.kind, 'failed');
  return o as Extract<UpstreamOutcome, { kind: 'failed' }>;
}

for (const protocol of ['fastcgi', 'scgi'] as const) {
  test(`${protocol}: connection refused (TCP) → BACKEND_UNREACHABLE 502, retryable, backend down`, async (t) => {
    const port = await freePort();
    const address = parseAddress(`127.0.0.1:${port}`) as SocketAddress;
    const ep = new UpstreamEndpoint(address, options({ protocol }), silentLogger());
    t.after(() => ep.destroy());
    const r = await withTimeout(runExchange(ep, { REQUEST_METHOD: 'GET' }), 10_000, 'refused');
    const f = failed(r.outcome);
    assert.equal(f.error.code, ErrorCodes.BACKEND_UNREACHABLE);
    assert.equal(f.error.status, 502);
    assert.equal(f.retryable, true);
    assert.equal(f.backendDown, true);
    assert.match(f.error.message, new RegExp(`127\\.0\\.0\\.1:${port}.*ECONNREFUSED`));
    assert.equal(r.sink.finished, false);
    assert.equal(r.ex.rewind(), true);
    assert.equal(ep.active, 0);
  });
}

test('missing Unix socket (ENOENT) → BACKEND_UNREACHABLE, retryable, backend down', async (t) => {
  const dir = makeTempDir(t, 'fpm-upc-');
  const path = join(dir, 'nobody.sock');
  const ep = new UpstreamEndpoint(parseAddress(`unix:${path}`) as SocketAddress, options(), silentLogger());
  t.after(() => ep.destroy());
  const r = await withTimeout(runExchange(ep, { REQUEST_METHOD: 'GET' }), 10_000, 'enoent');
  const f = failed(r.outcome);
  assert.equal(f.error.code, ErrorCodes.BACKEND_UNREACHABLE);
  assert.equal(f.retryable, true);
  assert.equal(f.backendDown, true);
  assert.match(f.error.message, /ENOENT/);
  assert.ok(f.error.message.includes(path));
});

test('connect timeout → BACKEND_TIMEOUT 504, still retryable, backend down', async (t) => {
  // A listener with backlog 0 that never accepts: once its queue holds one connection,
  // Linux drops further SYNs and connect() hangs.
  const py = spawn(
    '/usr/bin/python3',
    ['-c', 'import socket,sys,time\ns=socket.socket()\ns.bind(("127.0.0.1",0))\ns.listen(0)\nprint(s.getsockname()[1],flush=True)\ntime.sleep(60)'],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  trackPid(py.pid!);
  t.after(() => {
    py.kill('SIGKILL');
    untrackPid(py.pid!);
  });
  const port = await withTimeout(
    new Promise<number>((resolve) => py.stdout!.once('data', (d: Buffer) => resolve(Number(d.toString().trim())))),
    10_000,
    'python listener',
  );
  // Fill the accept queue (it holds backlog + 1 connections).
  const fillers: Socket[] = [];
  t.after(() => fillers.forEach((s) => s.destroy()));
  for (let i = 0; i < 2; i++) {
    const s = connect(port, '127.0.0.1');
    s.on('error', () => {});
    fillers.push(s);
    await new Promise((r) => {
      s.once('connect', r);
      s.setTimeout(300, () => r(undefined));
    });
  }
  const ep = new UpstreamEndpoint(parseAddress(`127.0.0.1:${port}`) as SocketAddress, options({ connectTimeout: 300 }), silentLogger());
  t.after(() => ep.destroy());
  const r = await withTimeout(runExchange(ep, { REQUEST_METHOD: 'GET' }), 10_000, 'connect timeout');
  const f = failed(r.outcome);
  assert.equal(f.error.code, ErrorCodes.BACKEND_TIMEOUT);
  assert.equal(f.error.status, 504);
  assert.equal(f.retryable, true);
  assert.equal(f.backendDown, true);
  assert.match(f.error.message, /connect timed out after 300 ms/);
  assert.equal(ep.active, 0);
});
