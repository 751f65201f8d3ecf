/**
 * header_timeout and body_timeout on the FastCGI and SCGI listeners. A client that
 * sends one byte at a time keeps the socket's idle timer from ever firing; these
 * deadlines count from the accept for a connection's first head (as nginx's
 * client_header_timeout), from the first byte for a kept connection's later ones, and
 * from the last body byte.
 * Short deadlines; every wait is on the close or the answer, bounded well above them.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ErrorCodes } from '../../src/errors.js';
import { encodeBeginRequest, encodeRecord, FCGI_KEEP_CONN, ProtocolStatus, RecordType, Role } from '../../src/protocol/fastcgi.js';
import { FakePool, delayed, echoParams, never } from '../helpers/fake-pool.js';
import { FcgiClient, paramsRecords, parseCgiOutput, requestRecords } from '../helpers/fcgi-client.js';
import { RawConn } from '../helpers/raw-socket.js';
import { encodeScgiRequest } from '../helpers/scgi-client.js';
import { Cleanup } from '../helpers/scope.js';
import { startRig } from './support.js';

const POST = { REQUEST_METHOD: 'POST', SCRIPT_NAME: '/x', CONTENT_LENGTH: '100' };
/** Far above the deadlines, so only they can close the connection. */
const IDLE = 20_000;
const SHORT = { idleTimeout: IDLE, headerTimeout: 400, bodyTimeout: 400 };

/** Writes `bytes` one at a time every `gapMs` until the connection closes; resolves with how it ended. */
async function dribble(c: RawConn, bytes: Buffer, gapMs = 50): Promise<Awaited<ReturnType<RawConn['waitClose']>>> {
  let i = 0;
  const timer = setInterval(() => {
    if (c.closed || i >= bytes.length) return;
    c.write(bytes.subarray(i, ++i));
  }, gapMs);
  try {
    return await c.waitClose(5000);
  } finally {
    clearInterval(timer);
  }
}

describe('client deadlines', { timeout: 60_000 }, () => {
  const scope = new Cleanup();
  after(() => scope.run());

  it('FastCGI: PARAMS sent one byte at a time are cut at header_timeout', async () => {
    const rig = await startRig(scope, 'fastcgi', '127.0.0.1:0', { cfg: SHORT });
    const c = new RawConn(rig.target);
    await c.connected;
    c.write(encodeBeginRequest(1, Role.Responder, FCGI_KEEP_CONN));
    const r = await dribble(c, Buffer.concat(paramsRecords(1, { ...POST, HTTP_X: 'x'.repeat(2000) })));
    assert.notEqual(r.ended, 'timeout', 'closed by the header deadline, though bytes kept coming');
    await rig.logged((l) => l.code === ErrorCodes.CLIENT_HEADER_TIMEOUT);
    assert.equal(rig.pool.dispatched.length, 0);
  });

  it('FastCGI: bytes that never make a BEGIN_REQUEST are cut at header_timeout', async () => {
    const rig = await startRig(scope, 'fastcgi', '127.0.0.1:0', { cfg: SHORT });
    const c = new RawConn(rig.target);
    await c.connected;
    // Management records, complete and answered, one byte at a time: no request ever begins.
    const getValues = encodeRecord(RecordType.GetValues, 0, Buffer.from([14, 0, ...Buffer.from('FCGI_MAX_CONNS')]));
    const r = await dribble(c, Buffer.concat(Array.from({ length: 40 }, () => getValues)), 5);
    assert.notEqual(r.ended, 'timeout');
    await rig.logged((l) => l.code === ErrorCodes.CLIENT_HEADER_TIMEOUT);
  });

  it('FastCGI: a stalled body gets 408 and END_REQUEST, its exchange is cancelled, the connection serves on', async () => {
    const pool = new FakePool(never);
    const rig = await startRig(scope, 'fastcgi', '127.0.0.1:0', { pool, cfg: SHORT });
    const c = await FcgiClient.connect(rig.target);
    try {
      // Request 1 sends 10 of its 100 body bytes and stalls at a record boundary.
      c.sendTogether([encodeBeginRequest(1, Role.Responder, FCGI_KEEP_CONN), ...paramsRecords(1, POST), encodeRecord(RecordType.Stdin, 1, Buffer.alloc(10))]);
      const ex = await pool.nth(1);
      const res = await c.response(1, 5000);
      assert.equal(res.protocolStatus, ProtocolStatus.RequestComplete);
      const out = parseCgiOutput(res.stdout);
      assert.equal(out.status, 408);
      assert.match(out.body.toString(), new RegExp(ErrorCodes.CLIENT_BODY_TIMEOUT));
      await pool.abortedP(ex);
      assert.equal(ex.status, 408, 'the access log sees 408');
      await rig.logged((l) => l.code === ErrorCodes.CLIENT_BODY_TIMEOUT && l.request === 1);
      // Same connection, next request: served.
      pool.behaviour = echoParams;
      c.sendTogether(requestRecords(2, { REQUEST_METHOD: 'GET', SCRIPT_NAME: '/y' }));
      assert.equal(parseCgiOutput((await c.response(2)).stdout).status, 200);
      assert.equal(c.closed, false);
    } finally {
      c.close();
    }
  });

  it('FastCGI multiplexed: only the stalled request times out, the one still sending lives on', async () => {
    const pool = new FakePool(echoParams);
    const rig = await startRig(scope, 'fastcgi', '127.0.0.1:0', { pool, cfg: { ...SHORT, bodyTimeout: 600 } });
    const c = await FcgiClient.connect(rig.target);
    try {
      c.sendTogether([
        encodeBeginRequest(1, Role.Responder, FCGI_KEEP_CONN), ...paramsRecords(1, POST),
        encodeBeginRequest(3, Role.Responder, FCGI_KEEP_CONN), ...paramsRecords(3, POST),
      ]);
      // Request 3 sends a body byte every 150 ms (each well inside body_timeout), request 1 nothing.
      let sent = 0;
      const timer = setInterval(() => {
        if (sent < 99) c.send(encodeRecord(RecordType.Stdin, 3, Buffer.alloc(1)));
        sent++;
      }, 150);
      try {
        const r1 = await c.response(1, 5000);
        assert.equal(parseCgiOutput(r1.stdout).status, 408);
        assert.equal(c.collect(3).protocolStatus, -1, 'request 3 still running');
      } finally {
        clearInterval(timer);
      }
      c.send(encodeRecord(RecordType.Stdin, 3, Buffer.alloc(100 - Math.min(sent, 99))), encodeRecord(RecordType.Stdin, 3));
      assert.equal(parseCgiOutput((await c.response(3)).stdout).status, 200);
    } finally {
      c.close();
    }
  });

  it('FastCGI: a body we paused (the backend is slow to read it) is not the client stalling', async () => {
    // The pool takes the body only after 1 s, long past body_timeout; meanwhile the front
    // end has stopped reading (64 KiB buffered), so the client cannot send.
    const pool = new FakePool(delayed(1000, echoParams));
    const rig = await startRig(scope, 'fastcgi', '127.0.0.1:0', { pool, cfg: SHORT });
    const c = await FcgiClient.connect(rig.target);
    try {
      const body = Buffer.alloc(300 * 1024, 0x62);
      c.request(1, { ...POST, CONTENT_LENGTH: String(body.length) }, body);
      assert.equal(parseCgiOutput((await c.response(1, 10_000)).stdout).status, 200);
      assert.equal(rig.lines.some((l) => l.code === ErrorCodes.CLIENT_BODY_TIMEOUT), false);
    } finally {
      c.close();
    }
  });

  for (const protocol of ['fastcgi', 'scgi'] as const) {
    it(`${protocol}: a first head is due header_timeout after the accept: a client silent past it is cut before its head`, async () => {
      const rig = await startRig(scope, protocol, '127.0.0.1:0', { cfg: SHORT });
      const c = new RawConn(rig.target);
      await c.connected;
      // Silent for five times header_timeout, then the whole head at once: counted from the
      // first byte, it would be served.
      const late = setTimeout(() => {
        if (c.closed) return;
        c.write(protocol === 'fastcgi' ? Buffer.concat(requestRecords(1, { REQUEST_METHOD: 'GET', SCRIPT_NAME: '/x' })) : encodeScgiRequest({ REQUEST_METHOD: 'GET', SCRIPT_NAME: '/x' }));
      }, 5 * SHORT.headerTimeout);
      const r = await c.waitClose(5000);
      clearTimeout(late);
      assert.notEqual(r.ended, 'timeout', 'closed by the header deadline');
      assert.equal(r.received.length, 0, 'nothing answered');
      assert.equal(rig.pool.dispatched.length, 0, 'no request reached the pool');
    });
  }

  it('SCGI: a netstring sent one byte at a time is cut at header_timeout', async () => {
    const rig = await startRig(scope, 'scgi', '127.0.0.1:0', { cfg: SHORT });
    const c = new RawConn(rig.target);
    await c.connected;
    const r = await dribble(c, encodeScgiRequest({ ...POST, HTTP_X: 'x'.repeat(2000) }));
    assert.notEqual(r.ended, 'timeout');
    await rig.logged((l) => l.code === ErrorCodes.CLIENT_HEADER_TIMEOUT);
    assert.equal(rig.pool.dispatched.length, 0);
  });

  it('SCGI: a stalled body gets 408 and its exchange is cancelled', async () => {
    const pool = new FakePool(never);
    const rig = await startRig(scope, 'scgi', '127.0.0.1:0', { pool, cfg: SHORT });
    const c = new RawConn(rig.target);
    await c.connected;
    // CONTENT_LENGTH 100; 10 body bytes sent, then nothing.
    c.write(encodeScgiRequest(POST, Buffer.alloc(100)).subarray(0, -90));
    const ex = await pool.nth(1);
    const r = await c.waitClose(5000);
    assert.equal(parseCgiOutput(r.received).status, 408);
    await pool.abortedP(ex);
    await rig.logged((l) => l.code === ErrorCodes.CLIENT_BODY_TIMEOUT);
  });
});
