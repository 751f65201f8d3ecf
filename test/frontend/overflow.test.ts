/**
 * Connections a listener cannot take get an "overloaded" answer and a clean close, not
 * a reset: past max_conns, and past the open-files reserve (FdGuard with a fake count).
 * Warnings about them come once per episode, with counts.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ErrorCodes } from '../../src/errors.js';
import { FdGuard } from '../../src/frontend/fd-guard.js';
import { encodeBeginRequest, FcgiDecoder, FCGI_KEEP_CONN, parseEndRequest, ProtocolStatus, RecordType, Role, type FcgiRecord } from '../../src/protocol/fastcgi.js';
import { FcgiClient, paramsRecords, parseCgiOutput } from '../helpers/fcgi-client.js';
import { RawConn } from '../helpers/raw-socket.js';
import { encodeScgiRequest } from '../helpers/scgi-client.js';
import { Cleanup } from '../helpers/scope.js';
import { waitFor } from '../helpers/wait.js';
import { startRig, type Rig } from './support.js';

const PARAMS = { REQUEST_METHOD: 'GET', SCRIPT_NAME: '/x' };
const HTTP_GET = 'GET /x HTTP/1.1\r\nHost: t\r\n\r\n';

/** Opens one connection and waits until the listener counts it. */
async function holdOne(rig: Rig): Promise<RawConn> {
  const c = new RawConn(rig.target);
  await c.connected;
  await waitFor(() => rig.listener.connections === 1, { timeout: 2000, what: 'the first connection counted' });
  return c;
}

function records(b: Buffer): FcgiRecord[] {
  const out: FcgiRecord[] = [];
  new FcgiDecoder((r) => out.push({ ...r, content: Buffer.from(r.content) })).push(b);
  return out;
}

describe('connections over max_conns', { timeout: 30_000 }, () => {
  const scope = new Cleanup();
  after(() => scope.run());

  it('FastCGI: the extra connection gets a 503 page and END_REQUEST with FCGI_OVERLOADED, then a clean close', async () => {
    const rig = await startRig(scope, 'fastcgi', '127.0.0.1:0', { cfg: { maxConns: 1, idleTimeout: 5000 } });
    const first = await holdOne(rig);
    const extra = new RawConn(rig.target);
    await extra.connected;
    extra.write(Buffer.concat([encodeBeginRequest(7, Role.Responder, FCGI_KEEP_CONN), ...paramsRecords(7, PARAMS)]));
    const r = await extra.waitClose(3000);
    assert.equal(r.ended, 'end', `closed cleanly, not ${r.ended} (${r.error})`);
    const recs = records(r.received);
    assert.deepEqual(recs.map((x) => [x.type, x.requestId]), [[RecordType.Stdout, 7], [RecordType.Stdout, 7], [RecordType.EndRequest, 7]]);
    assert.equal(parseEndRequest(recs[2]!.content).protocolStatus, ProtocolStatus.Overloaded);
    const page = parseCgiOutput(recs[0]!.content);
    assert.equal(page.status, 503);
    assert.equal(page.header('retry-after'), '1');
    assert.match(page.body.toString(), new RegExp(ErrorCodes.TOO_MANY_CONNECTIONS));
    await rig.logged((l) => l.code === ErrorCodes.TOO_MANY_CONNECTIONS && l.why === 'max_conns');
    // The held connection is served as before, and once it is gone a new one is too.
    first.destroy();
    await waitFor(() => rig.listener.connections === 0, { timeout: 2000, what: 'the first connection gone' });
    const c = await FcgiClient.connect(rig.target);
    try {
      c.request(1, PARAMS);
      assert.equal((await c.response(1)).protocolStatus, ProtocolStatus.RequestComplete);
    } finally {
      c.close();
    }
  });

  it('HTTP: the extra connection gets 503 with Retry-After and Connection: close', async () => {
    const rig = await startRig(scope, 'http', '127.0.0.1:0', { cfg: { maxConns: 1, idleTimeout: 5000 } });
    const first = await holdOne(rig);
    const extra = new RawConn(rig.target);
    await extra.connected;
    extra.write(HTTP_GET);
    const r = await extra.waitClose(3000);
    first.destroy();
    assert.equal(r.ended, 'end', `closed cleanly, not ${r.ended} (${r.error})`);
    const text = r.received.toString('latin1');
    assert.match(text, /^HTTP\/1\.1 503 Service Unavailable\r\n/);
    assert.match(text, /\r\nRetry-After: 1\r\n/);
    assert.match(text, /\r\nConnection: close\r\n/);
    assert.equal(rig.pool.dispatched.length, 0, 'nothing was dispatched');
  });

  it('SCGI: the extra connection gets a 503 response', async () => {
    const rig = await startRig(scope, 'scgi', '127.0.0.1:0', { cfg: { maxConns: 1, idleTimeout: 5000 } });
    const first = await holdOne(rig);
    const extra = new RawConn(rig.target);
    await extra.connected;
    extra.write(encodeScgiRequest(PARAMS));
    const r = await extra.waitClose(3000);
    first.destroy();
    assert.equal(r.ended, 'end');
    assert.equal(parseCgiOutput(r.received).status, 503);
  });

  it('many overflowing connections: one warning for the episode, not one each', async () => {
    const rig = await startRig(scope, 'http', '127.0.0.1:0', { cfg: { maxConns: 1, idleTimeout: 5000 } });
    const first = await holdOne(rig);
    const since = rig.lines.length;
    const extras = await Promise.all(
      Array.from({ length: 20 }, async () => {
        const c = new RawConn(rig.target);
        await c.connected;
        c.write(HTTP_GET);
        return c.waitClose(3000);
      }),
    );
    first.destroy();
    for (const r of extras) assert.match(r.received.toString('latin1'), /^HTTP\/1\.1 503 /);
    const warnings = rig.lines.slice(since).filter((l) => l.level >= 40 && l.code === ErrorCodes.TOO_MANY_CONNECTIONS);
    assert.equal(warnings.length, 1, JSON.stringify(warnings));
  });
});

describe('open-files reserve', () => {
  it('FdGuard: ok below limit - reserve, overflow in the reserve, exhausted in its last half', () => {
    let open = 0;
    const g = new FdGuard(1024, () => open);
    assert.equal(g.reserve, 64);
    open = 900;
    assert.equal(g.room(), 'ok');
    // Counted again only near the limit; connections opened since are estimated.
    for (let i = 0; i < 59; i++) g.opened();
    assert.equal(g.room(), 'ok', '959 is just outside the reserve');
    g.opened();
    assert.equal(g.room(), 'overflow');
    for (let i = 0; i < 32; i++) g.opened();
    assert.equal(g.room(), 'exhausted');
  });

  it('a listener whose process is in the reserve answers overloaded, even under max_conns', async (t) => {
    const rig = await startRig(t, 'http', '127.0.0.1:0', { cfg: { maxConns: 100, idleTimeout: 5000 }, fds: new FdGuard(1024, () => 970) });
    const c = new RawConn(rig.target);
    await c.connected;
    c.write(HTTP_GET);
    const r = await c.waitClose(3000);
    assert.match(r.received.toString('latin1'), /^HTTP\/1\.1 503 /);
    await rig.logged((l) => l.code === ErrorCodes.TOO_MANY_CONNECTIONS && l.why === 'open_files');
  });
});
