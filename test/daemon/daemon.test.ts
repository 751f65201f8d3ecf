// Daemon wiring with the real listeners (src/frontend) and a stand-in pool: start order,
// access log, runtime directory, stop order and a start that fails half-way.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import type { TestContext } from 'node:test';
import { configFromObject } from '../../src/config/schema.js';
import { Daemon } from '../../src/daemon/daemon.js';
import { startListener } from '../../src/frontend/index.js';
import { FakePool, captureLogger, waitForLine, type Event } from './fakes.js';

function tempDir(t: TestContext): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'fcgi-pm-daemon-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function get(address: string, urlPath: string): Promise<{ status: number; body: string }> {
  const i = address.lastIndexOf(':');
  return new Promise((resolve, reject) => {
    const req = http.get({ host: address.slice(0, i), port: Number(address.slice(i + 1)), path: urlPath, agent: false, timeout: 5000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

function makeDaemon(t: TestContext, obj: Record<string, unknown>, level = 'info') {
  const events: Event[] = [];
  const pools: FakePool[] = [];
  const { logger, lines } = captureLogger(level);
  const config = configFromObject(obj, '<test>');
  const daemon = new Daemon(config, {
    logger,
    allowRoot: true,
    createPool: (cfg, deps) => {
      events.push(`pool ${cfg.name} create`);
      const p = new FakePool(cfg, deps, events);
      pools.push(p);
      return p;
    },
    startListener: async (cfg, ctx) => {
      events.push(`listen ${cfg.protocol}`);
      const l = await startListener(cfg, ctx);
      const close = l.close.bind(l);
      return Object.assign(l, {
        close: (ms: number) => {
          events.push(`close ${cfg.protocol}`);
          return close(ms);
        },
      });
    },
  });
  t.after(() => daemon.stop({ immediate: true }));
  return { daemon, events, pools, lines };
}

const TWO_LISTENERS = {
  listen: [
    { protocol: 'http', address: '127.0.0.1:0', pool: 'web' },
    { protocol: 'fastcgi', address: '127.0.0.1:0', pool: 'web' },
  ],
  pools: { web: { command: ['php-cgi'] } },
  shutdown_timeout: '3s',
};

test('start: pools first, then listeners; requests reach the pool and are access-logged', async (t) => {
  const { daemon, events, pools, lines } = makeDaemon(t, TWO_LISTENERS);
  await daemon.start();
  assert.equal(daemon.state, 'running');
  assert.deepEqual(events, ['pool web create', 'pool web start', 'listen http', 'listen fastcgi']);

  // The pool got a private 0700 runtime directory.
  const dir = daemon.runtimeDir!;
  assert.equal(pools[0]!.deps.runtimeDir, dir);
  assert.equal(statSync(dir).mode & 0o777, 0o700);

  const http0 = daemon.listeners[0]!.address;
  assert.match(http0, /^127\.0\.0\.1:[1-9]\d*$/, 'the bound port, not 0');
  const res = await get(http0, '/index.php?x=1');
  assert.deepEqual(res, { status: 201, body: 'hello from web' });

  const access = await waitForLine(lines, (l) => l.kind === 'access');
  assert.equal(access.level, 30);
  assert.equal(access.method, 'GET');
  assert.equal(access.uri, '/index.php?x=1');
  assert.equal(access.status, 201);
  assert.equal(access.bytes, 'hello from web'.length);
  assert.equal(access.pool, 'web');
  assert.equal(access.backend, 'fake');
  assert.equal(access.worker, 4242);
  assert.equal(access.frontend, 'http');
  assert.equal(typeof access.ms, 'number');
  assert.equal(access.remote, '127.0.0.1');
  assert.equal(access.msg, 'GET /index.php?x=1 201');

  // Start-up lines name each listener with its bound address and each pool.
  const listenerLines = lines.filter((l) => l.kind === 'listener');
  assert.deepEqual(listenerLines.map((l) => [l.protocol, l.address, l.pool]), [
    ['http', daemon.listeners[0]!.address, 'web'],
    ['fastcgi', daemon.listeners[1]!.address, 'web'],
  ]);
  const poolLine = lines.find((l) => l.kind === 'pool')!;
  assert.deepEqual([poolLine.pool, poolLine.type, poolLine.command, poolLine.pm, poolLine.max_children], ['web', 'spawned', ['php-cgi'], 'ondemand', 5]);
  assert.ok(lines.some((l) => l.kind === 'ready'));

  await daemon.stop();
  assert.equal(daemon.state, 'stopped');
  assert.deepEqual(events.slice(4), ['close http', 'close fastcgi', 'pool web stop']);
  assert.ok(pools[0]!.stopTimeout! <= 3000, 'pools get what is left of shutdown_timeout');
  assert.equal(existsSync(dir), false, 'runtime directory removed');
  await assert.rejects(get(http0, '/'), /ECONNREFUSED/);
});

test('log.access: false writes no access lines', async (t) => {
  const { daemon, pools, lines } = makeDaemon(t, { ...TWO_LISTENERS, log: { access: false } });
  await daemon.start();
  assert.equal((await get(daemon.listeners[0]!.address, '/')).status, 201);
  assert.equal(pools[0]!.dispatched, 1);
  await daemon.stop();
  assert.equal(lines.filter((l) => l.kind === 'access').length, 0);
});

test('a listener that cannot bind: start rejects and everything started is taken down', async (t) => {
  const blocker = net.createServer();
  await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
  t.after(() => blocker.close());
  const port = (blocker.address() as net.AddressInfo).port;
  const { daemon, events } = makeDaemon(t, {
    listen: [
      { protocol: 'http', address: '127.0.0.1:0', pool: 'web' },
      { protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'web' },
    ],
    pools: { web: { backends: ['127.0.0.1:1'] } },
  });
  await assert.rejects(daemon.start(), (err: Error & { code?: string }) => err.code === 'ERR_LISTEN_FAILED' || /EADDRINUSE/.test(String(err)));
  assert.equal(daemon.state, 'stopped');
  assert.deepEqual(events, ['pool web create', 'pool web start', 'listen http', 'listen fastcgi', 'close http', 'pool web stop']);
  assert.equal(daemon.runtimeDir, undefined);
});

test('a configured runtime_dir holds a fresh private directory, removed on stop', async (t) => {
  const parent = path.join(tempDir(t), 'run', 'fcgi-pm');
  const { daemon } = makeDaemon(t, { ...TWO_LISTENERS, runtime_dir: parent });
  await daemon.start();
  const dir = daemon.runtimeDir!;
  assert.equal(path.dirname(dir), parent);
  assert.equal(statSync(dir).mode & 0o777, 0o700);
  await daemon.stop();
  assert.equal(existsSync(dir), false);
  assert.equal(existsSync(parent), true, 'the configured directory itself stays');
});

test('stop is idempotent, and works before start', async (t) => {
  const { daemon } = makeDaemon(t, TWO_LISTENERS);
  await daemon.stop();
  assert.equal(daemon.state, 'stopped');
  await assert.rejects(daemon.start(), /state stopped/);

  const other = makeDaemon(t, TWO_LISTENERS).daemon;
  await other.start();
  const a = other.stop();
  const b = other.stop({ immediate: true });
  assert.equal(a, b);
  await a;
  assert.equal(other.state, 'stopped');
});

test('reload: a new pool is created and started, unchanged ones and the listeners kept; refused before start', async (t) => {
  const { daemon, events } = makeDaemon(t, TWO_LISTENERS);
  await assert.rejects(daemon.reload(daemon.config), /cannot reload while new/);
  await daemon.start();
  t.after(() => daemon.stop({ immediate: true }));
  const listeners = [...daemon.listeners];
  const next = configFromObject({ ...TWO_LISTENERS, pools: { ...TWO_LISTENERS.pools, extra: { command: ['php-cgi'] } } }, '<test>');
  const report = await daemon.reload(next);
  assert.deepEqual(report.pools, { added: ['extra'], removed: [], changed: [], retuned: [], unchanged: ['web'] });
  assert.deepEqual(report.listeners.unchanged.length, 2);
  assert.deepEqual(events.slice(-2), ['pool extra create', 'pool extra start']);
  assert.ok(daemon.pools.has('extra'));
  assert.deepEqual([...daemon.listeners], listeners, 'the same listener objects: their sockets stay open');
  assert.equal(daemon.config, next);
});
