/**
 * The HTTP listener refuses what nginx refuses and answers each request at most once,
 * spoken to over raw sockets: broken chunk framing (a chunk longer than its data, then a
 * close or another request), two Host headers, HTTP versions other than 1.0/1.1, no
 * Host on HTTP/1.1; a doubled space in the request line is accepted, as nginx does.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ErrorCodes } from '../../src/errors.js';
import { respond } from '../helpers/fake-pool.js';
import { RawConn, rawExchange } from '../helpers/raw-socket.js';
import { Cleanup } from '../helpers/scope.js';
import { startRig, type Rig } from './support.js';

/** Status codes of every response in `raw`, in order (a response head starts a line). */
function statuses(raw: Buffer): number[] {
  return [...raw.toString('latin1').matchAll(/(?:^|\r\n)HTTP\/1\.[01] (\d{3}) /g)].map((m) => Number(m[1]));
}

describe('HTTP listener strictness and one answer per request', { timeout: 60_000 }, () => {
  const scope = new Cleanup();
  let rig: Rig;
  before(async () => {
    rig = await startRig(scope, 'http', '127.0.0.1:0', { cfg: { idleTimeout: 5000 } });
    // A backend that answers at once, before the body is read: the fast path that used to answer twice.
    rig.pool.behaviour = respond(200, [['Content-Type', 'text/plain']], 'ok');
  });
  after(() => scope.run());

  const chunkedHead = 'POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n';

  it('a chunk longer than its data, then the client closes: exactly one answer, nothing dispatched', async () => {
    const before = rig.pool.dispatched.length;
    const r = await rawExchange(rig.target, [chunkedHead + '10\r\nabc'], { halfClose: true });
    assert.deepEqual(statuses(r.received), [400], r.received.toString('latin1'));
    assert.equal(rig.pool.dispatched.length, before, 'a body that never completed reaches no backend');
  });

  it('a chunk longer than its data, then another request: exactly one answer', async () => {
    const before = rig.pool.dispatched.length;
    const c = new RawConn(rig.target);
    await c.connected;
    c.write(chunkedHead + '10\r\nabc\r\n0\r\n\r\nGET /y HTTP/1.1\r\nHost: x\r\n\r\n');
    const r = await c.waitClose();
    assert.deepEqual(statuses(r.received), [400], r.received.toString('latin1'));
    assert.equal(r.ended, 'end', 'the connection is closed after the 400');
    assert.equal(rig.pool.dispatched.length, before);
  });

  it('a complete chunked request with a bad one in the same packet: the good one is answered, then the connection closes', async () => {
    const r = await rawExchange(rig.target, [chunkedHead + '3\r\nabc\r\n0\r\n\r\nGET /y HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n']);
    assert.deepEqual(statuses(r.received), [200], r.received.toString('latin1'));
    assert.equal(r.ended, 'end');
  });

  it('HTTP/1.1 without Host (node answers it 400 itself) and more bytes after it: exactly one answer', async () => {
    const r = await rawExchange(rig.target, ['POST /f HTTP/1.1\r\nt: fuzz\r\nContent-Lengthion: close\r\n\r\nname=value&x=1']);
    assert.deepEqual(statuses(r.received), [400], r.received.toString('latin1'));
  });

  for (const [what, head, status, code] of [
    ['two Host headers', 'GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n', 400, ErrorCodes.HTTP_BAD_HEAD],
    ['HTTP/2.0', 'GET /x HTTP/2.0\r\nHost: a\r\n\r\n', 505, ErrorCodes.HTTP_VERSION],
    ['HTTP/0.9 with a version', 'GET /x HTTP/0.9\r\nHost: a\r\n\r\n', 505, ErrorCodes.HTTP_VERSION],
  ] as const) {
    it(`${what}: ${status} ${code}, logged, nothing dispatched, connection closed`, async () => {
      const before = rig.pool.dispatched.length;
      const r = await rawExchange(rig.target, [head]);
      assert.deepEqual(statuses(r.received), [status], r.received.toString('latin1'));
      assert.match(r.received.toString('latin1'), new RegExp(`\\(${code}\\)`));
      assert.equal(r.ended, 'end');
      assert.equal(rig.pool.dispatched.length, before);
      await rig.logged((l) => l.code === code);
    });
  }

  it('HTTP/1.2 (which llhttp cannot parse) is 505 too; a malformed version stays 400', async () => {
    let r = await rawExchange(rig.target, ['GET /x HTTP/1.2\r\nHost: a\r\n\r\n']);
    assert.deepEqual(statuses(r.received), [505], r.received.toString('latin1'));
    r = await rawExchange(rig.target, ['GET /x HTTP/1.1 \r\nHost: a\r\n\r\n']);
    assert.deepEqual(statuses(r.received), [400], r.received.toString('latin1'));
  });

  it('HTTP/1.1 without Host: 400; HTTP/1.0 without Host is served', async () => {
    let r = await rawExchange(rig.target, ['GET /x HTTP/1.1\r\n\r\n']);
    assert.deepEqual(statuses(r.received), [400]);
    r = await rawExchange(rig.target, ['GET /x HTTP/1.0\r\n\r\n']);
    assert.deepEqual(statuses(r.received), [200]);
  });

  it('a doubled space in the request line is read as one space (nginx 1.22 does the same): one 200', async () => {
    for (const line of ['GET  /x HTTP/1.1', 'GET /x  HTTP/1.1']) {
      const c = new RawConn(rig.target);
      await c.connected;
      c.write(`${line}\r\nHost: a\r\nConnection: close\r\n\r\n`);
      const r = await c.waitClose();
      assert.deepEqual(statuses(r.received), [200], line);
    }
  });
});

describe('HTTP listener: a chunked body that stalls while it is buffered', { timeout: 30_000 }, () => {
  const scope = new Cleanup();
  after(() => scope.run());

  it(`closes after body_timeout (not the longer idle_timeout) with ${ErrorCodes.HTTP_BODY_TIMEOUT}, without answering or dispatching`, async () => {
    const rig = await startRig(scope, 'http', '127.0.0.1:0', { cfg: { idleTimeout: 30_000, bodyTimeout: 300 } });
    const r = await rawExchange(rig.target, ['POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n100\r\nonly-part'], { waitMs: 10_000 });
    assert.equal(r.ended, 'end');
    assert.deepEqual(statuses(r.received), []);
    assert.equal(rig.pool.dispatched.length, 0);
    await rig.logged((l) => l.code === ErrorCodes.HTTP_BODY_TIMEOUT);
  });
});
