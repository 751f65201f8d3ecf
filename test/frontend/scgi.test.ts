/**
 * The SCGI front end over TCP and a Unix socket against a fake pool: normal requests,
 * 10 MB both ways, half-close, bad netstrings and headers, stalls, disconnects, failures;
 * after each bad input the listener still serves.
 */
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ErrorCodes, ProxyError } from '../../src/errors.js';
import { parseCgiOutput } from '../helpers/fcgi-client.js';
import { echoBody, echoParams, failAfterHead, failWith, makeHead, never } from '../helpers/fake-pool.js';
import { seededBytes, sha256 } from '../helpers/payload.js';
import { RawConn } from '../helpers/raw-socket.js';
import { encodeScgiRequest, scgiRequest } from '../helpers/scgi-client.js';
import { Cleanup } from '../helpers/scope.js';
import { waitFor } from '../helpers/wait.js';
import { DEBUG, addressFor, frontendPaused, pendingBody, startRig, watchBodyPauses, type Rig, type Transport } from './support.js';

const PARAMS = { REQUEST_METHOD: 'GET', SCRIPT_NAME: '/x.py', QUERY_STRING: 'a=1' };

async function servesNormally(rig: Rig): Promise<void> {
  rig.pool.behaviour = echoParams;
  const r = await scgiRequest(rig.target, { ...PARAMS, CHECK: 'still-serving' });
  assert.equal(r.status, 200);
  assert.equal(JSON.parse(r.body.toString()).CHECK, 'still-serving');
}

for (const transport of ['tcp', 'unix'] as Transport[]) {
  describe(`SCGI listener over ${transport}`, { timeout: 60_000 }, () => {
    const scope = new Cleanup();
    let rig: Rig;

    before(async () => {
      rig = await startRig(scope, 'scgi', addressFor(scope, transport), {
        cfg: { params: { FROM_LISTENER: 'yes' } },
        limits: { maxBytes: 4096, maxCount: 50 },
      });
    });
    after(() => scope.run());

    it('answers a normal request and closes the connection', async () => {
      rig.pool.behaviour = echoParams;
      const r = await scgiRequest(rig.target, PARAMS);
      assert.equal(r.status, 200);
      const p = JSON.parse(r.body.toString());
      assert.equal(p.QUERY_STRING, 'a=1');
      assert.equal(p.CONTENT_LENGTH, '0');
      assert.equal(p.SCGI, '1');
      assert.equal(p.FROM_LISTENER, 'yes');
      assert.equal(rig.pool.dispatched.at(-1)!.frontend, 'scgi');
    });

    it('routes a request only after the chunk it came in: a bodyless one arrives complete', async () => {
      let complete: boolean | undefined;
      rig.pool.behaviour = (ex, pool) => {
        complete = ex.bodyComplete; // what an upstream sees when it writes the request head
        echoParams(ex, pool);
      };
      const r = await scgiRequest(rig.target, PARAMS);
      assert.equal(r.status, 200);
      assert.equal(complete, true, 'the body was known to be empty when the pool got the request');
    });

    it('streams 10 MB up and back down with back-pressure (sha256)', async (t) => {
      // Its own listener: the client stops reading for longer than the shared one's idle timeout.
      const rig = await startRig(t, 'scgi', addressFor(t, transport), { cfg: { idleTimeout: 10_000 } });
      let pushes: ReturnType<typeof watchBodyPauses> | undefined;
      rig.pool.behaviour = (ex, pool) => {
        pushes = watchBodyPauses(ex);
        echoBody(ex, pool);
      };
      const before = rig.pool.responsePauses;
      const upload = seededBytes(10 * 1024 * 1024, 3);
      const c = new RawConn(rig.target);
      await c.connected;
      // The client does not read until the server's writes have backed up all the way to the body.
      c.socket.pause();
      c.write(encodeScgiRequest({ ...PARAMS, REQUEST_METHOD: 'POST' }, upload));
      const ex = await waitFor(() => rig.pool.dispatched.at(-1), { what: 'the request' });
      await waitFor(() => frontendPaused(ex), { timeout: 30_000, what: 'the exchange to ask the listener to pause' });
      assert.ok(pendingBody(ex) < 1024 * 1024, 'the listener stopped reading instead of buffering the body');
      c.socket.resume();
      const res = await c.waitClose(30_000);
      assert.equal(res.ended, 'end');
      const out = parseCgiOutput(res.received);
      assert.equal(out.body.length, upload.length);
      assert.equal(sha256(out.body), sha256(upload));
      assert.ok(rig.pool.responsePauses > before, 'the response hit back-pressure');
      // Each pause held: past it, only the rest of the read being decoded arrived.
      assert.ok(pushes!.pauses > 0);
      assert.ok(pushes!.maxWhilePaused <= 256 * 1024, `${pushes!.maxWhilePaused} body bytes pushed during one pause (${pushes!.bytesWhilePaused} in ${pushes!.pauses} pauses)`);
    });

    it('treats a client that closes its side before the response as gone (like nginx)', async () => {
      rig.pool.behaviour = never;
      const n = rig.pool.dispatched.length;
      const c = new RawConn(rig.target);
      await c.connected;
      c.write(encodeScgiRequest(PARAMS, Buffer.from('body')));
      const ex = await rig.pool.nth(n + 1);
      c.end();
      await rig.pool.abortedP(ex);
      assert.equal((await c.waitClose(3000)).ended, 'end');
      await servesNormally(rig);
    });

    it('answers a bad netstring with 400, logs it, closes, and keeps serving', async () => {
      const c = new RawConn(rig.target);
      await c.connected;
      c.write('GET / HTTP/1.0\r\n\r\n');
      const res = await c.waitClose(3000);
      assert.equal(res.ended, 'end');
      assert.equal(parseCgiOutput(res.received).status, 400);
      const line = await rig.logged((l) => l.code === ErrorCodes.SCGI_BAD_NETSTRING);
      assert.equal(line.listener, rig.listener.address);
      assert.equal(typeof line.remote, 'string');
      await servesNormally(rig);
    });

    it('answers an oversized header with 431 before reading it', async () => {
      const c = new RawConn(rig.target);
      await c.connected;
      c.write('900000:CONTENT_LENGTH\x000\x00');
      const res = await c.waitClose(3000);
      assert.equal(parseCgiOutput(res.received).status, 431);
      await rig.logged((l) => l.code === ErrorCodes.SCGI_HEADER_TOO_LARGE);
      await servesNormally(rig);
    });

    it('answers too many variables with 431', async () => {
      const many: Record<string, string> = {};
      for (let i = 0; i < 60; i++) many[`V${i}`] = 'v';
      const n = rig.pool.dispatched.length;
      const r = await scgiRequest(rig.target, many);
      assert.equal(r.status, 431);
      assert.equal(rig.pool.dispatched.length, n);
      await rig.logged((l) => l.code === ErrorCodes.PARAMS_TOO_MANY);
      await servesNormally(rig);
    });

    it('a truncated header then close is logged', async () => {
      const c = new RawConn(rig.target);
      await c.connected;
      c.write(encodeScgiRequest(PARAMS).subarray(0, 15)); // then the FIN behind it
      c.end();
      const res = await c.waitClose(3000);
      assert.notEqual(res.ended, 'timeout');
      await rig.logged((l) => /before its request was complete/.test(l.msg));
      await servesNormally(rig);
    });

    it('a truncated body then close aborts the exchange', async () => {
      rig.pool.behaviour = never;
      const n = rig.pool.dispatched.length;
      const c = new RawConn(rig.target);
      await c.connected;
      const req = encodeScgiRequest(PARAMS, Buffer.alloc(1000, 1));
      c.write(req.subarray(0, req.length - 500));
      const ex = await rig.pool.nth(n + 1);
      c.end();
      await rig.pool.abortedP(ex);
      c.destroy();
      await servesNormally(rig);
    });

    it('closes a connection that sends nothing for the idle timeout', async () => {
      const c = new RawConn(rig.target);
      await c.connected;
      const res = await c.waitClose(3000);
      assert.equal(res.ended, 'end');
      await rig.logged((l) => /idle SCGI/.test(l.msg), DEBUG);
      await servesNormally(rig);
    });

    it('a client that keeps its side open after the response is closed after the idle timeout', async (t) => {
      if (transport === 'unix') return t.skip('a Unix socket is closed at once, no FIN awaited');
      // Its own listener (idle_timeout 300 ms, support.ts): its connection count is this client's.
      const own = await startRig(t, 'scgi', addressFor(t, transport));
      own.pool.behaviour = echoParams;
      const target = own.target as { port: number; host?: string };
      const c = connect({ port: target.port, host: target.host ?? '127.0.0.1', allowHalfOpen: true });
      try {
        const got: Buffer[] = [];
        c.on('data', (b: Buffer) => got.push(b));
        c.on('error', () => {});
        const ended = new Promise<number>((resolve) => c.once('end', () => resolve(performance.now())));
        c.write(encodeScgiRequest(PARAMS));
        const endAt = await ended; // the response is whole; our side stays open
        assert.equal(parseCgiOutput(Buffer.concat(got)).status, 200);
        await waitFor(() => own.listener.connections === 0, { timeout: 3000, what: 'the server to close the half-open connection' });
        const waited = performance.now() - endAt;
        assert.ok(waited >= 200, `closed ${waited.toFixed(0)} ms after its FIN: idle_timeout (300 ms) waited`);
      } finally {
        c.destroy();
      }
    });

    it('closes a connection that stalls mid-request', async () => {
      const c = new RawConn(rig.target);
      await c.connected;
      c.write('40:CONTENT_');
      const res = await c.waitClose(3000);
      assert.notEqual(res.ended, 'timeout');
      await rig.logged((l) => /stalled/.test(l.msg));
      await servesNormally(rig);
    });

    it('aborts the exchange when the client disconnects mid-request', async () => {
      rig.pool.behaviour = never;
      const n = rig.pool.dispatched.length;
      const c = new RawConn(rig.target);
      await c.connected;
      c.write(encodeScgiRequest(PARAMS));
      const ex = await rig.pool.nth(n + 1);
      c.destroy();
      await rig.pool.abortedP(ex);
      assert.equal(ex.state, 'aborted');
      await servesNormally(rig);
    });

    it('answers a failure before the head with a CGI error page', async () => {
      rig.pool.behaviour = failWith(new ProxyError(ErrorCodes.BACKEND_TIMEOUT, 504, 'slow'));
      const r = await scgiRequest(rig.target, PARAMS);
      assert.equal(r.status, 504);
      assert.match(r.body.toString(), /ERR_BACKEND_TIMEOUT/);
      await servesNormally(rig);
    });

    it('cuts the connection when the response fails after its head', async () => {
      rig.pool.behaviour = failAfterHead;
      const c = new RawConn(rig.target);
      await c.connected;
      c.write(encodeScgiRequest(PARAMS));
      const res = await c.waitClose(3000);
      assert.notEqual(res.ended, 'timeout');
      assert.match(res.received.toString(), /partial/);
      await rig.logged((l) => l.code === ErrorCodes.BACKEND_CLOSED);
      await servesNormally(rig);
    });

    it('logs backend STDERR one entry per record, rate-limited: a flood becomes a burst of entries and one drop count', async (t) => {
      const rig = await startRig(t, 'scgi', addressFor(t, transport));
      const records = 2000;
      rig.pool.behaviour = (ex) => {
        ex.respondHead(makeHead(200, [['Content-Type', 'text/plain']]));
        for (let i = 0; i < records; i++) ex.respondStderr(Buffer.from(`PHP Warning: noisy ${i}\nsecond line ${i}\n`));
        ex.respondBody(Buffer.from('ok'));
        ex.respondEnd();
      };
      const r = await scgiRequest(rig.target, { ...PARAMS, REQUEST_URI: '/noisy.py' });
      assert.equal(r.status, 200);
      const drop = await rig.logged((l) => String(l.msg).includes('rate-limited'));
      const entries = rig.lines.filter((l) => l.msg === 'backend wrote to stderr');
      assert.ok(entries.length > 0 && entries.length <= 150, `${entries.length} stderr entries logged for ${records} records`);
      assert.equal(entries[0]!.stderr, 'PHP Warning: noisy 0\nsecond line 0', 'the two lines of one record are one entry');
      assert.equal(entries[1]!.stderr, 'PHP Warning: noisy 1\nsecond line 1');
      assert.equal(entries[0]!.uri, '/noisy.py');
      assert.equal(entries[0]!.code, 'ERR_BACKEND_STDERR');
      assert.equal(drop.code, 'ERR_LOG_RATE_LIMITED');
      assert.equal(Number(drop.dropped) + entries.length, records);
    });
  });
}
