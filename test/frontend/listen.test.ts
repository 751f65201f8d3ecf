/**
 * Binding and closing listeners: TCP on IPv4/IPv6 with port 0, Unix sockets with their
 * file mode, stale-socket replacement, refusing a live socket or a regular file,
 * and a graceful close (max_conns: overflow.test.ts) that lets in-flight requests finish.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createServer } from 'node:net';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ErrorCodes } from '../../src/errors.js';
import { startListener } from '../../src/frontend/index.js';
import { DEFAULT_PARAMS_LIMITS } from '../../src/protocol/params.js';
import { FakePool, delayed, echoParams, never, respond } from '../helpers/fake-pool.js';
import { FcgiClient, parseCgiOutput } from '../helpers/fcgi-client.js';
import { RawConn } from '../helpers/raw-socket.js';
import { Cleanup } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';
import { canConnect } from '../helpers/wait.js';
import { captureLogger, listenerConfig, startRig } from './support.js';

const PARAMS = { REQUEST_METHOD: 'GET', SCRIPT_NAME: '/x' };

function ctx(pool = new FakePool()) {
  return { getPool: () => pool, limits: DEFAULT_PARAMS_LIMITS, logger: captureLogger().logger, onExchange: () => {} };
}

async function answers(target: { port: number; host?: string } | { path: string }): Promise<void> {
  const c = await FcgiClient.connect(target);
  try {
    c.request(1, PARAMS);
    assert.equal(parseCgiOutput((await c.response(1)).stdout).status, 200);
  } finally {
    c.close();
  }
}

describe('listen', { timeout: 30_000 }, () => {
  const scope = new Cleanup();
  after(() => scope.run());

  it('binds IPv4 and IPv6 loopback on port 0 and reports the real port', async () => {
    const v4 = await startRig(scope, 'fastcgi', '127.0.0.1:0');
    assert.match(v4.listener.address, /^127\.0\.0\.1:[1-9]\d*$/);
    await answers(v4.target);
    const v6 = await startRig(scope, 'fastcgi', '[::1]:0');
    assert.match(v6.listener.address, /^\[::1\]:[1-9]\d*$/);
    await answers(v6.target);
  });

  it('fails with LISTEN_FAILED on a TCP port in use', async () => {
    const a = await startRig(scope, 'scgi', '127.0.0.1:0');
    await assert.rejects(startListener(listenerConfig('scgi', a.listener.address), ctx()), (e: NodeJS.ErrnoException) => {
      assert.equal(e.code, ErrorCodes.LISTEN_FAILED);
      assert.match(e.message, /in use/);
      return true;
    });
  });

  it('creates a Unix socket with the configured mode', async () => {
    const dir = makeTempDir(scope);
    const path = join(dir, 'm.sock');
    const rig = await startRig(scope, 'fastcgi', `unix:${path}`, { cfg: { mode: 0o660 } });
    assert.equal(rig.listener.address, `unix:${path}`);
    const st = statSync(path);
    assert.ok(st.isSocket());
    assert.equal(st.mode & 0o777, 0o660);
    await answers({ path });
    const other = join(dir, 'n.sock');
    await startRig(scope, 'http', `unix:${other}`, { cfg: { mode: 0o600 } });
    assert.equal(statSync(other).mode & 0o777, 0o600);
  });

  it('replaces a stale socket file nobody listens on', async () => {
    const path = join(makeTempDir(scope), 'stale.sock');
    // A socket bound but never listened on, left behind by a process that exited.
    execFileSync('/usr/bin/python3', ['-c', 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])', path]);
    assert.ok(statSync(path).isSocket());
    assert.equal(await canConnect({ path }), false);
    const rig = await startRig(scope, 'fastcgi', `unix:${path}`);
    await answers(rig.target);
  });

  it('refuses a socket something answers on, and leaves it working', async () => {
    const path = join(makeTempDir(scope), 'live.sock');
    const live = createServer((s) => {
      s.on('error', () => {}); // our probe connects and goes away at once
      s.end('live\n');
    });
    await new Promise<void>((r) => live.listen(path, r));
    scope.after(() => new Promise<void>((r) => live.close(() => r())));
    await assert.rejects(startListener(listenerConfig('fastcgi', `unix:${path}`), ctx()), (e: NodeJS.ErrnoException) => {
      assert.equal(e.code, ErrorCodes.LISTEN_FAILED);
      assert.match(e.message, /already in use/);
      return true;
    });
    const c = new RawConn({ path });
    await c.connected;
    assert.equal((await c.waitClose(2000)).received.toString(), 'live\n');
  });

  it('never deletes a regular file at the socket path', async () => {
    const path = join(makeTempDir(scope), 'precious.txt');
    writeFileSync(path, 'keep me');
    await assert.rejects(startListener(listenerConfig('scgi', `unix:${path}`), ctx()), (e: NodeJS.ErrnoException) => {
      assert.equal(e.code, ErrorCodes.LISTEN_FAILED);
      assert.match(e.message, /not a socket/);
      return true;
    });
    assert.equal(readFileSync(path, 'utf8'), 'keep me');
  });

  it('listens with the configured backlog, by default net.core.somaxconn', async () => {
    const queue = (port: number): number => Number(execFileSync('ss', ['-ltnH', `sport = :${port}`], { encoding: 'utf8' }).trim().split(/\s+/)[2]);
    const set = await startRig(scope, 'fastcgi', '127.0.0.1:0', { cfg: { backlog: 7 } });
    assert.equal(queue((set.target as { port: number }).port), 7);
    const dflt = await startRig(scope, 'fastcgi', '127.0.0.1:0');
    assert.equal(queue((dflt.target as { port: number }).port), Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8')));
  });

  it('removes its socket file on close', async () => {
    const path = join(makeTempDir(scope), 'gone.sock');
    const l = await startListener(listenerConfig('fastcgi', `unix:${path}`), ctx());
    assert.ok(existsSync(path));
    await l.close(1000);
    assert.equal(existsSync(path), false);
  });

  it('close() lets requests in flight finish, closes idle connections, and stops accepting', async () => {
    const pool = new FakePool(delayed(200, respond(200, [], 'finished')));
    const rig = await startRig(scope, 'fastcgi', '127.0.0.1:0', { pool, cfg: { idleTimeout: 5000 } });
    const busy = await FcgiClient.connect(rig.target);
    const idle = await FcgiClient.connect(rig.target);
    try {
      busy.request(1, PARAMS);
      await pool.nth(1);
      assert.equal(rig.listener.connections, 2);
      const closed = rig.listener.close(5000);
      assert.equal(await idle.waitClose(2000), true, 'the idle connection is closed at once');
      const r = await busy.response(1);
      assert.equal(parseCgiOutput(r.stdout).body.toString(), 'finished');
      await closed;
      assert.equal(await busy.waitClose(2000), true);
      assert.equal(rig.listener.connections, 0);
      assert.equal(await canConnect(rig.target), false, 'no longer accepting');
    } finally {
      busy.close();
      idle.close();
    }
  });

  it('close() cuts requests still running after the timeout, aborting them', async () => {
    const pool = new FakePool(never);
    const rig = await startRig(scope, 'http', '127.0.0.1:0', { pool, cfg: { idleTimeout: 5000 } });
    const c = new RawConn(rig.target);
    await c.connected;
    c.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    const ex = await pool.nth(1);
    await rig.listener.close(200);
    await pool.abortedP(ex);
    assert.notEqual((await c.waitClose(2000)).ended, 'timeout');
  });

  it('close() on an HTTP listener finishes the response with Connection: close', async () => {
    const pool = new FakePool(delayed(200, respond(200, [['Content-Length', '2']], 'ok')));
    const rig = await startRig(scope, 'http', '127.0.0.1:0', { pool, cfg: { idleTimeout: 5000 } });
    const c = new RawConn(rig.target);
    await c.connected;
    c.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    await pool.nth(1);
    const closed = rig.listener.close(5000);
    const res = await c.waitClose(3000);
    assert.equal(res.ended, 'end');
    assert.match(res.received.toString(), /^HTTP\/1\.1 200 [\s\S]*connection: close[\s\S]*\r\n\r\nok$/i);
    await closed;
    pool.behaviour = echoParams;
  });
});
