/**
 * SIGTERM after a mixed run through nginx: kept-alive FastCGI connections, aborted
 * requests, truncated records and multiplexed requests, then one request in flight.
 * That request finishes, every other front-end session closes at once (idle) or after
 * its request (busy), and the daemon exits 0 long before shutdown_timeout cuts anything.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { connect } from 'node:net';
import { poolStatusOf, statusOf } from '../helpers/control-status.js';
import { startDaemon, type Daemon } from '../helpers/daemon.js';
import { FcgiClient, phpParams, requestRecords } from '../helpers/fcgi-client.js';
import { httpRequest, keepAliveAgent } from '../helpers/http-client.js';
import { startNginxKeptAlive } from '../helpers/nginx.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { join } from 'node:path';
import { startPhpCgi } from '../helpers/php.js';
import { phpCommand } from '../helpers/spawned.js';
import { processState } from '../helpers/proc.js';
import { makeTempDir } from '../helpers/tmp.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { RecordType, encodeRecord } from '../../src/protocol/fastcgi.js';
import { FRESH_CONNECTION_GRACE_MS } from '../../src/frontend/listener-base.js';

const SHUTDOWN_MS = 60_000;

for (const kind of ['spawned', 'external'] as const)
test(`SIGTERM after mixed traffic (${kind} pool): the running request finishes and the daemon exits without the shutdown timeout`, { timeout: 150_000 }, async (t) => {
  const dir = makeTempDir(t);
  const port = await freePort();
  const backends: string[] = [];
  if (kind === 'external') for (let i = 0; i < 4; i++) backends.push(`unix:${(await startPhpCgi(t, join(dir, `php${i}.sock`))).address}`);
  const pool = kind === 'spawned' ? { command: phpCommand(dir, 'sigterm-drain'), pm: 'static', max_children: 4, kill_timeout: '1s' } : { backend: 'fastcgi', backends, max_conns_per_backend: 1 };
  const daemon = await startDaemon(t, {
    listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'php' }],
    pools: { php: pool },
    control_socket: join(dir, 'control.sock'),
    shutdown_timeout: `${SHUTDOWN_MS / 1000}s`,
    log: { level: 'info' },
  });
  const ngx = await startNginxKeptAlive(t, port, { keepalive: 16, readTimeout: '30s' });

  // Kept-alive upstream connections: 16 clients at once, several rounds.
  const agent = keepAliveAgent(16);
  t.after(() => agent.destroy());
  for (let round = 0; round < 4; round++) {
    const rs = await Promise.all(Array.from({ length: 16 }, (_, i) => httpRequest(`${ngx.url}/${i % 2 ? 'hello.php' : 'sleep.php?ms=20'}`, { agent })));
    for (const r of rs) assert.equal(r.status, 200, r.text.slice(0, 300));
  }

  // Aborted requests: the browser leaves while the script runs.
  await Promise.all(
    Array.from({ length: 6 }, () =>
      new Promise<void>((resolve) => {
        const req = http.get(`${ngx.url}/sleep.php?ms=400`, { agent: false });
        req.on('error', () => resolve());
        setTimeout(() => {
          req.destroy();
          resolve();
        }, 100);
      }),
    ),
  );

  // Aborted mid-response and while queued (16 clients, 4 workers), and uploads.
  await Promise.all(
    Array.from({ length: 16 }, (_, i) =>
      new Promise<void>((resolve) => {
        const req = http.get(`${ngx.url}/${i % 2 ? 'big.php?mb=8' : 'sleep.php?ms=300'}`, { agent: false }, (res) => {
          res.once('data', () => {
            req.destroy();
            resolve();
          });
        });
        req.on('error', () => resolve());
        setTimeout(() => {
          req.destroy();
          resolve();
        }, 150 + i * 10);
      }),
    ),
  );
  const uploads = await Promise.all(Array.from({ length: 8 }, () => httpRequest(`${ngx.url}/upload-hash.php`, { method: 'POST', body: Buffer.alloc(300_000, 7), agent })));
  for (const r of uploads) assert.equal(r.status, 200, `an upload: ${r.text.slice(0, 300)}`);

  const params = phpParams(PHP_FIXTURES, '/hello.php');
  const target = { host: '127.0.0.1', port };
  // FCGI_ABORT_REQUEST from a kept connection, which then stays open.
  const aborting = await FcgiClient.connect(target);
  t.after(() => aborting.socket.destroy());
  aborting.request(1, phpParams(PHP_FIXTURES, '/sleep.php', { QUERY_STRING: 'ms=300' }), undefined, { keepConn: true });
  aborting.abort(1);
  await aborting.waitRecord((r) => r.type === RecordType.EndRequest && r.requestId === 1);

  // Multiplexed requests on one kept connection, then idle.
  const mux = await FcgiClient.connect(target);
  t.after(() => mux.socket.destroy());
  const a = requestRecords(1, params, undefined, { keepConn: true });
  const b = requestRecords(2, params, undefined, { keepConn: true });
  mux.sendTogether([...a, ...b]);
  await mux.waitRecord((r) => r.type === RecordType.EndRequest && r.requestId === 1);
  await mux.waitRecord((r) => r.type === RecordType.EndRequest && r.requestId === 2);

  // Truncated records: half a header, half a PARAMS record; the client goes away.
  for (const cut of [3, 20]) {
    const whole = Buffer.concat(requestRecords(1, params));
    const s = connect(port, '127.0.0.1');
    await new Promise<void>((resolve) => s.once('connect', () => resolve()));
    s.end(whole.subarray(0, cut));
    await new Promise<void>((resolve) => s.once('close', () => resolve()));
  }
  // Records after the connection's last request: a stray END_REQUEST-type record and an unknown id.
  const stray = await FcgiClient.connect(target);
  t.after(() => stray.socket.destroy());
  stray.send(encodeRecord(RecordType.Stdin, 9, Buffer.from('x')));
  stray.request(3, params, undefined, { keepConn: true });
  await stray.waitRecord((r) => r.type === RecordType.EndRequest && r.requestId === 3);

  // More kept-alive traffic after all that.
  const rs = await Promise.all(Array.from({ length: 16 }, () => httpRequest(`${ngx.url}/hello.php`, { agent })));
  for (const r of rs) assert.equal(r.status, 200, r.text.slice(0, 300));

  // One request in flight, then SIGTERM.
  const since = daemon.mark();
  const running = httpRequest(`${ngx.url}/sleep.php?ms=1500`);
  await waitFor(async () => (await poolStatusOf(join(dir, 'control.sock'), 'php')).active === 1, { timeout: 10_000, what: 'the request running in the pool' });
  daemon.signal('SIGTERM');
  const answer = await running;
  assert.equal(answer.status, 200, answer.text);
  assert.match(answer.text, /slept 1500/);
  let timer: NodeJS.Timeout | undefined;
  const exit = await Promise.race([daemon.child.exited, new Promise((r) => (timer = setTimeout(() => r('still running'), SHUTDOWN_MS - 10_000)))]);
  clearTimeout(timer);
  assert.deepEqual(exit, { code: 0, signal: null }, `daemon did not exit after its last request:\n${daemon.dump(since)}`);
  assert.equal(daemon.findLog((l) => l.code === 'ERR_SHUTDOWN_FORCED', since), undefined, daemon.dump(since));
});

/**
 * A daemon with one FastCGI listener and a connection it has accepted, silent: nginx
 * opening a connection as the stop begins. The client's 'connect' only means the kernel
 * finished the handshake; until the daemon's accept the connection sits in the backlog,
 * and a stop then resets it with the listening socket. So wait for the daemon's count.
 */
async function freshConnection(t: TestContext, name: string): Promise<{ daemon: Daemon; fresh: FcgiClient }> {
  const dir = makeTempDir(t);
  const port = await freePort();
  const control = join(dir, 'control.sock');
  const daemon = await startDaemon(t, {
    listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'php' }],
    pools: { php: { command: phpCommand(dir, name), pm: 'static', max_children: 1, kill_timeout: '1s' } },
    control_socket: control,
    log: { level: 'info' },
  });
  await daemon.waitForLog((l) => l.kind === 'ready', { what: 'ready' });
  const accepted = async (): Promise<number> => (await statusOf(control)).listeners[0]!.accepted;
  // startDaemon's probe connected once: taken before ours is counted.
  const before = await waitFor(async () => {
    const n = await accepted();
    return n >= 1 ? n : undefined;
  }, { what: "the daemon to take startDaemon's probe" });
  const fresh = await FcgiClient.connect({ host: '127.0.0.1', port });
  t.after(() => fresh.socket.destroy());
  await waitFor(async () => (await accepted()) === before + 1, { what: 'the daemon to accept the connection' });
  return { daemon, fresh };
}

test('SIGTERM: a connection accepted before the stop whose request comes just after is served, not closed unread', { timeout: 60_000 }, async (t) => {
  const { daemon, fresh } = await freshConnection(t, 'sigterm-fresh');
  const since = daemon.mark();
  daemon.signal('SIGTERM');
  await daemon.waitForLog((l) => l.msg === 'listener closing', { since, what: 'listener closing' });
  fresh.request(1, phpParams(PHP_FIXTURES, '/hello.php'), undefined, { keepConn: false });
  await fresh.waitRecord((r) => r.type === RecordType.EndRequest && r.requestId === 1, 10_000);
  const out = Buffer.concat(fresh.records.filter((r) => r.type === RecordType.Stdout).map((r) => r.content)).toString();
  assert.match(out, /Hello from PHP/);
  assert.deepEqual(await daemon.child.exited, { code: 0, signal: null });
});

test('SIGTERM: a daemon stalled past the fresh-connection grace still reads the request that reached it in time', { timeout: 60_000 }, async (t) => {
  const { daemon, fresh } = await freshConnection(t, 'sigterm-stalled');
  const since = daemon.mark();
  daemon.signal('SIGTERM');
  await daemon.waitForLog((l) => l.msg === 'listener closing', { since, what: 'listener closing' });
  // The daemon gets no CPU (a loaded machine) while the request reaches its socket and
  // the grace runs out; woken, it must read the request before it judges the connection silent.
  daemon.signal('SIGSTOP');
  t.after(() => daemon.signal('SIGCONT'));
  await waitFor(() => processState(daemon.pid) === 'T', { what: 'the daemon to stop' });
  fresh.request(1, phpParams(PHP_FIXTURES, '/hello.php'), undefined, { keepConn: false });
  await sleep(FRESH_CONNECTION_GRACE_MS + 500);
  daemon.signal('SIGCONT');
  await fresh.waitRecord((r) => r.type === RecordType.EndRequest && r.requestId === 1, 10_000);
  const out = Buffer.concat(fresh.records.filter((r) => r.type === RecordType.Stdout).map((r) => r.content)).toString();
  assert.match(out, /Hello from PHP/);
  assert.deepEqual(await daemon.child.exited, { code: 0, signal: null });
});
