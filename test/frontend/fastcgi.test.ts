/**
 * The FastCGI front end over TCP and a Unix socket, driven by a raw record-level client
 * against a fake pool: normal requests, 10 MB both ways, multiplexing, management
 * records, aborts, roles, keep-conn, and every kind of bad input followed by a check that
 * the listener still serves.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ErrorCodes, ProxyError } from '../../src/errors.js';
import {
  FCGI_KEEP_CONN,
  FcgiDecoder,
  ProtocolStatus,
  RecordType,
  Role,
  encodeBeginRequest,
  encodeEndRequest,
  encodeRecord,
  parseUnknownType,
  type FcgiRecord,
} from '../../src/protocol/fastcgi.js';
import type { Exchange } from '../../src/protocol/exchange.js';
import { FcgiClient, interleave, paramsRecords, parseCgiOutput, requestRecords, stdinRecords } from '../helpers/fcgi-client.js';
import { delayed, echoBody, echoParams, failAfterHead, failWith, makeHead, never, readBody, respond, type Behaviour } from '../helpers/fake-pool.js';
import { seededBytes, sha256 } from '../helpers/payload.js';
import { RawConn } from '../helpers/raw-socket.js';
import { Cleanup } from '../helpers/scope.js';
import { waitFor } from '../helpers/wait.js';
import { DEBUG, addressFor, frontendPaused, pendingBody, startRig, watchBodyPauses, type Rig, type Transport } from './support.js';

const PARAMS = { REQUEST_METHOD: 'GET', SCRIPT_NAME: '/x.php', QUERY_STRING: 'a=1' };

/** The records in `bytes` (content copied). */
function records(bytes: Buffer): FcgiRecord[] {
  const out: FcgiRecord[] = [];
  new FcgiDecoder((r) => out.push({ ...r, content: Buffer.from(r.content) })).push(bytes);
  return out;
}

async function servesNormally(rig: Rig): Promise<void> {
  rig.pool.behaviour = echoParams;
  const c = await FcgiClient.connect(rig.target);
  try {
    c.request(1, { ...PARAMS, CHECK: 'still-serving' });
    const r = await c.response(1);
    assert.equal(r.protocolStatus, 0);
    assert.equal(JSON.parse(parseCgiOutput(r.stdout).body.toString()).CHECK, 'still-serving');
  } finally {
    c.close();
  }
}

/** Answers JSON {id, bodySha, bodyBytes} once the body is complete. */
const echoIdAndBodyHash: Behaviour = (ex) => {
  readBody(ex, (body) => {
    const out = Buffer.from(JSON.stringify({ id: ex.params.get('X_ID'), sha: sha256(body), bytes: body.length }));
    ex.respondHead(makeHead(200, [['Content-Type', 'application/json']]));
    // Two pieces so responses of different requests can interleave too.
    ex.respondBody(out.subarray(0, 5));
    setImmediate(() => {
      ex.respondBody(out.subarray(5));
      ex.respondEnd();
    });
  });
};

for (const transport of ['tcp', 'unix'] as Transport[]) {
  describe(`FastCGI listener over ${transport}`, { timeout: 60_000 }, () => {
    const scope = new Cleanup();
    let rig: Rig;

    before(async () => {
      rig = await startRig(scope, 'fastcgi', addressFor(scope, transport), {
        cfg: { params: { FROM_LISTENER: 'yes', SERVER_SOFTWARE: 'overridden' }, maxConns: 77 },
        limits: { maxBytes: 4096, maxCount: 50 },
      });
    });
    after(() => scope.run());

    it('answers a normal request with the params the client sent plus the listener params', async () => {
      rig.pool.behaviour = echoParams;
      const c = await FcgiClient.connect(rig.target);
      try {
        c.request(1, { ...PARAMS, SERVER_SOFTWARE: 'nginx' });
        const r = await c.response(1);
        assert.equal(r.protocolStatus, ProtocolStatus.RequestComplete);
        assert.equal(r.appStatus, 0);
        const out = parseCgiOutput(r.stdout);
        assert.equal(out.status, 200);
        const p = JSON.parse(out.body.toString());
        assert.equal(p.QUERY_STRING, 'a=1');
        assert.equal(p.FROM_LISTENER, 'yes');
        assert.equal(p.SERVER_SOFTWARE, 'overridden', 'listener params override the client');
        assert.equal(rig.pool.dispatched.at(-1)!.frontend, 'fastcgi');
      } finally {
        c.close();
      }
    });

    it('routes a request only after the chunk it came in: a bodyless one arrives complete', async () => {
      let complete: boolean | undefined;
      rig.pool.behaviour = (ex, pool) => {
        complete = ex.bodyComplete; // what an upstream sees when it writes the request head
        echoParams(ex, pool);
      };
      const c = await FcgiClient.connect(rig.target);
      try {
        c.request(1, PARAMS); // BEGIN_REQUEST, PARAMS and the empty STDIN in one write, as nginx sends a GET
        assert.equal(parseCgiOutput((await c.response(1)).stdout).status, 200);
        assert.equal(complete, true, 'the body was known to be empty when the pool got the request');
      } finally {
        c.close();
      }
    });

    it('streams 10 MB up and back down with back-pressure (sha256)', async (t) => {
      // Its own listener: the client stops reading for longer than the shared one's idle timeout.
      const rig = await startRig(t, 'fastcgi', addressFor(t, transport), { cfg: { idleTimeout: 10_000 } });
      let pushes: ReturnType<typeof watchBodyPauses> | undefined;
      rig.pool.behaviour = (ex, pool) => {
        pushes = watchBodyPauses(ex);
        echoBody(ex, pool);
      };
      const pausesBefore = rig.pool.responsePauses;
      const upload = seededBytes(10 * 1024 * 1024, 7);
      const c = await FcgiClient.connect(rig.target);
      try {
        // The client does not read until the server's writes have backed up all the way to the body.
        c.socket.pause();
        c.request(3, { ...PARAMS, REQUEST_METHOD: 'POST', CONTENT_LENGTH: String(upload.length) }, upload);
        const ex = await waitFor(() => rig.pool.dispatched.at(-1), { what: 'the request' });
        await waitFor(() => frontendPaused(ex), { timeout: 30_000, what: 'the exchange to ask the listener to pause' });
        assert.ok(pendingBody(ex) < 1024 * 1024, 'the listener stopped reading instead of buffering the body');
        c.socket.resume();
        const r = await c.response(3, 30_000);
        assert.equal(r.protocolStatus, 0);
        const out = parseCgiOutput(r.stdout);
        assert.equal(out.body.length, upload.length);
        assert.equal(sha256(out.body), sha256(upload));
        assert.ok(rig.pool.responsePauses > pausesBefore, 'the response hit back-pressure');
        // Each pause held: past it, only the rest of the read being decoded arrived.
        assert.ok(pushes!.pauses > 0);
        assert.ok(pushes!.maxWhilePaused <= 256 * 1024, `${pushes!.maxWhilePaused} body bytes pushed during one pause (${pushes!.bytesWhilePaused} in ${pushes!.pauses} pauses)`);
      } finally {
        c.close();
      }
    });

    it('serves requests whose records of 4 ids interleave on one connection', async () => {
      rig.pool.behaviour = echoIdAndBodyHash;
      const c = await FcgiClient.connect(rig.target);
      try {
        const ids = [1, 2, 3, 65535];
        const bodies = ids.map((id, i) => seededBytes(1000 + i * 3000, id));
        const lists = ids.map((id, i) => requestRecords(id, { ...PARAMS, X_ID: String(id) }, bodies[i], { maxRecord: 50 }));
        for (const rec of interleave(lists)) c.send(rec);
        const rs = await Promise.all(ids.map((id) => c.response(id)));
        rs.forEach((r, i) => {
          assert.equal(r.protocolStatus, 0);
          const j = JSON.parse(parseCgiOutput(r.stdout).body.toString());
          assert.deepEqual(j, { id: String(ids[i]), sha: sha256(bodies[i]!), bytes: bodies[i]!.length });
        });
        assert.equal(c.closed, false);
      } finally {
        c.close();
      }
    });

    it('answers FCGI_GET_VALUES with only the names asked', async () => {
      const c = await FcgiClient.connect(rig.target);
      try {
        assert.deepEqual(await c.getValues(['FCGI_MAX_CONNS', 'FCGI_MPXS_CONNS', 'NO_SUCH_NAME']), { FCGI_MAX_CONNS: '77', FCGI_MPXS_CONNS: '1' });
        const v = await c.getValues(['FCGI_MAX_REQS']);
        assert.deepEqual(Object.keys(v), ['FCGI_MAX_REQS']);
        assert.ok(Number(v.FCGI_MAX_REQS) >= 77);
      } finally {
        c.close();
      }
    });

    it('FCGI_ABORT_REQUEST reaches the exchange, then END_REQUEST follows; the connection stays', async () => {
      rig.pool.behaviour = never;
      const n = rig.pool.dispatched.length;
      const c = await FcgiClient.connect(rig.target);
      try {
        c.send(...requestRecords(7, PARAMS).slice(0, -1)); // body not finished: the request is mid-flight
        const ex = await rig.pool.nth(n + 1);
        c.abort(7);
        await rig.pool.abortedP(ex);
        assert.equal(ex.state, 'aborted');
        const r = await c.response(7);
        assert.equal(r.protocolStatus, ProtocolStatus.RequestComplete);
        assert.equal(r.stdout.length, 0);
        rig.pool.behaviour = echoParams;
        c.request(8, { ...PARAMS, AFTER: 'abort' });
        assert.equal(JSON.parse(parseCgiOutput((await c.response(8)).stdout).body.toString()).AFTER, 'abort');
      } finally {
        c.close();
      }
    });

    it('answers an unknown record type with UNKNOWN_TYPE and keeps serving', async () => {
      const c = await FcgiClient.connect(rig.target);
      try {
        c.send(encodeRecord(42, 0, Buffer.alloc(3)));
        const u = await c.waitRecord((r) => r.type === RecordType.UnknownType);
        assert.equal(parseUnknownType(u.content), 42);
        c.send(encodeRecord(200, 5, Buffer.from('x')));
        const u2 = await c.waitRecord((r) => r.type === RecordType.UnknownType && parseUnknownType(r.content) === 200);
        assert.equal(u2.requestId, 0);
        rig.pool.behaviour = echoParams;
        c.request(1, PARAMS);
        assert.equal((await c.response(1)).protocolStatus, 0);
      } finally {
        c.close();
      }
    });

    it('answers the filter role with FCGI_UNKNOWN_ROLE and dispatches nothing', async () => {
      const n = rig.pool.dispatched.length;
      const c = await FcgiClient.connect(rig.target);
      try {
        c.send(encodeBeginRequest(4, Role.Filter, FCGI_KEEP_CONN), ...paramsRecords(4, PARAMS), ...stdinRecords(4, Buffer.alloc(0)));
        const r = await c.response(4);
        assert.equal(r.protocolStatus, ProtocolStatus.UnknownRole);
        assert.equal(rig.pool.dispatched.length, n);
        await rig.logged((l) => l.role === Role.Filter && l.code === ErrorCodes.FCGI_UNKNOWN_ROLE);
        rig.pool.behaviour = echoParams;
        c.request(5, PARAMS);
        assert.equal((await c.response(5)).protocolStatus, 0);
      } finally {
        c.close();
      }
    });

    it('keeps the connection with FCGI_KEEP_CONN and closes it without', async () => {
      rig.pool.behaviour = echoParams;
      const c = await FcgiClient.connect(rig.target);
      try {
        c.request(1, PARAMS);
        await c.response(1);
        c.request(2, PARAMS);
        await c.response(2);
        assert.equal(c.closed, false);
        c.request(3, PARAMS, undefined, { keepConn: false });
        assert.equal((await c.response(3)).protocolStatus, 0);
        assert.equal(await c.waitClose(3000), true, 'closed after END_REQUEST');
        assert.equal(c.closeError, undefined, 'a clean close, not a reset');
      } finally {
        c.close();
      }
    });

    it('closes on garbage bytes, logs a warning with the code, and keeps serving', async () => {
      const raw = new RawConn(rig.target);
      await raw.connected;
      raw.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
      const res = await raw.waitClose(3000);
      assert.notEqual(res.ended, 'timeout');
      const line = await rig.logged((l) => l.code === ErrorCodes.FCGI_BAD_VERSION);
      assert.equal(typeof line.remote, 'string');
      assert.equal(line.listener, rig.listener.address);
      await servesNormally(rig);
    });

    it('a truncated record then close aborts the request in flight and is logged', async () => {
      rig.pool.behaviour = never;
      const n = rig.pool.dispatched.length;
      const raw = new RawConn(rig.target);
      await raw.connected;
      const recs = requestRecords(9, PARAMS, Buffer.alloc(100, 1));
      raw.write(Buffer.concat(recs.slice(0, -2))); // BEGIN + PARAMS: dispatched
      const ex = await rig.pool.nth(n + 1);
      raw.write(recs.at(-2)!.subarray(0, 20)); // half a STDIN record, then the FIN behind it
      raw.end();
      await rig.pool.abortedP(ex);
      await rig.logged((l) => l.code === ErrorCodes.FCGI_TRUNCATED);
      raw.destroy();
      await servesNormally(rig);
    });

    it('answers params over the limits with 431 and keeps the connection', async () => {
      const n = rig.pool.dispatched.length;
      const c = await FcgiClient.connect(rig.target);
      try {
        c.request(1, { ...PARAMS, BIG: 'x'.repeat(5000) }, undefined, {});
        const r1 = await c.response(1);
        assert.equal(r1.protocolStatus, 0);
        assert.equal(parseCgiOutput(r1.stdout).status, 431);
        const many: Record<string, string> = {};
        for (let i = 0; i < 60; i++) many[`V${i}`] = 'v';
        c.request(2, many);
        assert.equal(parseCgiOutput((await c.response(2)).stdout).status, 431);
        assert.equal(rig.pool.dispatched.length, n, 'nothing dispatched');
        await rig.logged((l) => l.code === ErrorCodes.PARAMS_TOO_LARGE);
        await rig.logged((l) => l.code === ErrorCodes.PARAMS_TOO_MANY);
        rig.pool.behaviour = echoParams;
        c.request(3, PARAMS);
        assert.equal(parseCgiOutput((await c.response(3)).stdout).status, 200);
        assert.equal(c.closed, false);
      } finally {
        c.close();
      }
    });

    it('answers malformed name-value pairs with 400 and keeps the connection', async () => {
      const c = await FcgiClient.connect(rig.target);
      try {
        // A pair whose name length runs past the end of the stream.
        c.send(encodeBeginRequest(1, Role.Responder, FCGI_KEEP_CONN), encodeRecord(RecordType.Params, 1, Buffer.from([100, 1, 65])), encodeRecord(RecordType.Params, 1));
        assert.equal(parseCgiOutput((await c.response(1)).stdout).status, 400);
        await rig.logged((l) => l.code === ErrorCodes.FCGI_BAD_PARAMS);
        rig.pool.behaviour = echoParams;
        c.request(2, PARAMS);
        assert.equal((await c.response(2)).protocolStatus, 0);
      } finally {
        c.close();
      }
    });

    it('closes a connection that sends nothing for the idle timeout', async () => {
      const raw = new RawConn(rig.target);
      await raw.connected;
      const res = await raw.waitClose(3000);
      assert.equal(res.ended, 'end');
      await rig.logged((l) => /idle/.test(l.msg), DEBUG);
      await servesNormally(rig);
    });

    it('counts the idle timeout from the last response byte, not from the request', async () => {
      // idle_timeout 300 ms (support.ts); the answer comes 250 ms after the request.
      rig.pool.behaviour = delayed(250, echoParams);
      const c = await FcgiClient.connect(rig.target);
      try {
        c.request(1, PARAMS);
        assert.equal((await c.response(1)).protocolStatus, 0);
        const answered = performance.now();
        assert.equal(await c.waitClose(3000), true, 'closed as idle');
        const quiet = performance.now() - answered;
        assert.ok(quiet >= 200, `closed ${quiet.toFixed(0)} ms after the answer: the idle time counts from the write`);
      } finally {
        c.close();
      }
    });

    it('closes a connection that stalls in the middle of a record', async () => {
      const raw = new RawConn(rig.target);
      await raw.connected;
      raw.write(encodeBeginRequest(1, Role.Responder, FCGI_KEEP_CONN).subarray(0, 5));
      const res = await raw.waitClose(3000);
      assert.notEqual(res.ended, 'timeout');
      await rig.logged((l) => l.code === ErrorCodes.FCGI_TRUNCATED && /stalled/.test(l.msg));
      await servesNormally(rig);
    });

    it('aborts the exchange when the client disconnects mid-request', async () => {
      rig.pool.behaviour = never;
      const n = rig.pool.dispatched.length;
      const c = await FcgiClient.connect(rig.target);
      c.request(1, PARAMS);
      const ex = await rig.pool.nth(n + 1);
      c.close();
      await rig.pool.abortedP(ex);
      assert.equal(ex.state, 'aborted');
      await servesNormally(rig);
    });

    it('answers a failure before the head with a CGI error page (and Retry-After)', async () => {
      rig.pool.behaviour = failWith(new ProxyError(ErrorCodes.QUEUE_FULL, 503, 'queue full', 7));
      const c = await FcgiClient.connect(rig.target);
      try {
        c.request(1, PARAMS);
        const r = await c.response(1);
        assert.equal(r.protocolStatus, 0);
        const out = parseCgiOutput(r.stdout);
        assert.equal(out.status, 503);
        assert.equal(out.header('retry-after'), '7');
        assert.match(out.body.toString(), /ERR_QUEUE_FULL/);
        assert.equal(c.closed, false);
      } finally {
        c.close();
      }
    });

    it('cuts the connection when the response fails after its head', async () => {
      rig.pool.behaviour = failAfterHead;
      const c = await FcgiClient.connect(rig.target);
      try {
        c.request(1, PARAMS);
        assert.equal(await c.waitClose(3000), true);
        assert.match(c.collect(1).stdout.toString(), /partial/);
        assert.equal(c.collect(1).protocolStatus, -1, 'no END_REQUEST: the response must not look complete');
      } finally {
        c.close();
      }
      await servesNormally(rig);
    });

    it('frames a small response as one STDOUT record (head and body), then empty STDOUT and END_REQUEST', async () => {
      rig.pool.behaviour = respond(200, [['Content-Type', 'text/plain']], 'hello');
      const c = new RawConn(rig.target);
      await c.connected;
      c.write(Buffer.concat(requestRecords(1, PARAMS, undefined, { keepConn: false })));
      const res = await c.waitClose(3000);
      assert.equal(res.ended, 'end');
      const head = makeHead(200, [['Content-Type', 'text/plain']]).raw;
      const want = Buffer.concat([
        encodeRecord(RecordType.Stdout, 1, Buffer.concat([head, Buffer.from('hello')])),
        encodeRecord(RecordType.Stdout, 1),
        encodeEndRequest(1, 0, ProtocolStatus.RequestComplete),
      ]);
      assert.deepEqual(res.received, want);
    });

    it('sends a streaming backend\'s head before its body exists', async () => {
      let held: Exchange | undefined;
      rig.pool.behaviour = (ex) => readBody(ex, () => {
        held = ex;
        ex.respondHead(makeHead(200, [['Content-Type', 'text/event-stream']]));
      });
      const c = new RawConn(rig.target);
      await c.connected;
      c.write(Buffer.concat(requestRecords(1, PARAMS, undefined, { keepConn: false })));
      await c.waitData((b) => b.includes('text/event-stream'), 3000);
      assert.ok(held !== undefined);
      held.respondBody(Buffer.from('data: 1\n\n'));
      held.respondEnd();
      const res = await c.waitClose(3000);
      const out = parseCgiOutput(Buffer.concat(records(res.received).filter((r) => r.type === RecordType.Stdout).map((r) => r.content)));
      assert.equal(out.body.toString(), 'data: 1\n\n');
      assert.equal(records(res.received).filter((r) => r.type === RecordType.Stdout && r.content.length > 0).length, 2);
    });

    it('forwards the backend stderr as STDERR records', async () => {
      rig.pool.behaviour = (ex) => {
        ex.respondStderr(Buffer.from('PHP Notice: x'));
        respond(200, [], 'ok')(ex, rig.pool);
      };
      const c = await FcgiClient.connect(rig.target);
      try {
        c.request(1, PARAMS);
        const r = await c.response(1);
        assert.equal(r.stderr.toString(), 'PHP Notice: x');
        assert.equal(parseCgiOutput(r.stdout).body.toString(), 'ok');
      } finally {
        c.close();
      }
    });
  });
}

describe('FastCGI listener naming a missing pool', { timeout: 20_000 }, () => {
  const scope = new Cleanup();
  after(() => scope.run());
  it('answers 500 ERR_NO_POOL', async () => {
    const rig = await startRig(scope, 'fastcgi', '127.0.0.1:0', { poolName: 'other' });
    const c = await FcgiClient.connect(rig.target);
    try {
      c.request(1, PARAMS);
      const out = parseCgiOutput((await c.response(1)).stdout);
      assert.equal(out.status, 500);
      assert.match(out.body.toString(), /ERR_NO_POOL/);
    } finally {
      c.close();
    }
  });
});
