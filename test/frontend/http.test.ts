/**
 * The HTTP front end over TCP and a Unix socket against a fake pool: RFC 3875 variables
 * from a real temp document root, script/PATH_INFO splitting, status codes, redirects,
 * HEAD, framing, 10 MB both ways, bad input, stalls and disconnects.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http, { type IncomingHttpHeaders } from 'node:http';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ErrorCodes, ProxyError } from '../../src/errors.js';
import { echoBody, echoParams, failAfterHead, failWith, never, respond, streamBytes } from '../helpers/fake-pool.js';
import { seededBytes, sha256 } from '../helpers/payload.js';
import { RawConn } from '../helpers/raw-socket.js';
import { Cleanup } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor, type ConnectTarget } from '../helpers/wait.js';
import { DEBUG, addressFor, frontendPaused, pendingBody, startRig, watchBodyPauses, type Rig, type Transport } from './support.js';

interface Res {
  status: number;
  statusMessage: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  body: Buffer;
  reused: boolean;
}

function request(
  target: ConnectTarget,
  path: string,
  opts: { method?: string; headers?: Record<string, string | string[]>; body?: Buffer; agent?: http.Agent } = {},
): Promise<Res> {
  return new Promise((resolve, reject) => {
    const where = 'path' in target ? { socketPath: target.path } : { host: target.host ?? '127.0.0.1', port: target.port };
    const headers = { ...opts.headers };
    if (opts.body) headers['content-length'] = String(opts.body.length);
    const req = http.request({ ...where, path, method: opts.method ?? 'GET', headers, agent: opts.agent ?? false });
    const timer = setTimeout(() => req.destroy(new Error('no response in 20 s')), 20_000);
    req.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
      res.on('end', () => {
        clearTimeout(timer);
        resolve({
          status: res.statusCode!,
          statusMessage: res.statusMessage ?? '',
          headers: res.headers,
          rawHeaders: res.rawHeaders,
          body: Buffer.concat(chunks),
          reused: req.reusedSocket,
        });
      });
    });
    req.end(opts.body);
  });
}

async function params(rig: Rig, path: string, opts: Parameters<typeof request>[2] = {}): Promise<Record<string, string>> {
  rig.pool.behaviour = echoParams;
  const r = await request(rig.target, path, opts);
  assert.equal(r.status, 200, r.body.toString());
  return JSON.parse(r.body.toString()) as Record<string, string>;
}

async function servesNormally(rig: Rig): Promise<void> {
  rig.pool.behaviour = echoParams;
  const r = await request(rig.target, '/index.php?still=serving');
  assert.equal(r.status, 200);
  assert.equal(JSON.parse(r.body.toString()).QUERY_STRING, 'still=serving');
}

for (const transport of ['tcp', 'unix'] as Transport[]) {
  describe(`HTTP listener over ${transport}`, { timeout: 60_000 }, () => {
    const scope = new Cleanup();
    let rig: Rig;
    let root: string;

    before(async () => {
      root = makeTempDir(scope, 'fpm-docroot-');
      writeFileSync(join(root, 'index.php'), '<?php');
      writeFileSync(join(root, 'a b.php'), '<?php');
      mkdirSync(join(root, 'sub'));
      writeFileSync(join(root, 'sub', 'index.php'), '<?php');
      writeFileSync(join(root, 'sub', 'page.php'), '<?php');
      mkdirSync(join(root, 'empty'));
      rig = await startRig(scope, 'http', addressFor(scope, transport), {
        // A stalled body is cut by body_timeout on HTTP too: as short as the rig's idle_timeout.
        cfg: { documentRoot: root, params: { FROM_LISTENER: 'yes', SERVER_SOFTWARE: 'overridden' }, bodyTimeout: 300 },
        limits: { maxBytes: 8192, maxCount: 60 },
      });
    });
    after(() => scope.run());

    it('builds the CGI variables for /index.php/extra?x=1', async () => {
      const p = await params(rig, '/index.php/extra?x=1', {
        headers: {
          Host: 'example.test:8080',
          'X-Multi': ['a', 'b'],
          Cookie: ['c1=1', 'c2=2'],
          Proxy: 'http://evil.example',
          'X_Under': 'spoof',
          'User-Agent': 'test-agent',
        },
      });
      assert.equal(p.GATEWAY_INTERFACE, 'CGI/1.1');
      assert.equal(p.SERVER_SOFTWARE, 'overridden', 'listener params are applied last');
      assert.equal(p.FROM_LISTENER, 'yes');
      assert.equal(p.REQUEST_METHOD, 'GET');
      assert.equal(p.REQUEST_URI, '/index.php/extra?x=1');
      assert.equal(p.QUERY_STRING, 'x=1');
      assert.equal(p.SCRIPT_NAME, '/index.php');
      assert.equal(p.PATH_INFO, '/extra');
      assert.equal(p.PATH_TRANSLATED, root + '/extra');
      assert.equal(p.SCRIPT_FILENAME, join(root, 'index.php'));
      assert.equal(p.DOCUMENT_ROOT, root);
      assert.equal(p.DOCUMENT_URI, '/index.php/extra');
      assert.equal(p.SERVER_NAME, 'example.test');
      assert.equal(p.SERVER_PROTOCOL, 'HTTP/1.1');
      assert.equal(p.REDIRECT_STATUS, '200');
      assert.equal(p.HTTP_HOST, 'example.test:8080');
      assert.equal(p.HTTP_USER_AGENT, 'test-agent');
      assert.equal(p.HTTP_X_MULTI, 'a, b');
      assert.equal(p.HTTP_COOKIE, 'c1=1; c2=2');
      assert.equal('HTTP_PROXY' in p, false, 'httpoxy: the Proxy header is never passed');
      assert.equal('HTTP_X_UNDER' in p, false, 'header names with underscores are dropped');
      assert.equal('HTTPS' in p, false);
      assert.equal('CONTENT_LENGTH' in p, false, 'no CONTENT_LENGTH without a body');
      assert.equal('CONTENT_TYPE' in p, false);
      if (transport === 'tcp') {
        assert.equal(p.REMOTE_ADDR, '127.0.0.1');
        assert.match(p.REMOTE_PORT ?? '', /^\d+$/);
        assert.equal(p.SERVER_ADDR, '127.0.0.1');
        assert.equal(p.SERVER_PORT, String((rig.target as { port: number }).port));
      } else {
        assert.equal(p.REMOTE_ADDR, 'unix:');
        assert.equal(p.SERVER_PORT, '8080', 'from the Host header on a Unix socket');
      }
      assert.equal(rig.pool.dispatched.at(-1)!.frontend, 'http');
    });

    it('passes CONTENT_TYPE and CONTENT_LENGTH for a request with a body', async () => {
      const p = await params(rig, '/sub/page.php', { method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: Buffer.from('hello') });
      assert.equal(p.CONTENT_LENGTH, '5');
      assert.equal(p.CONTENT_TYPE, 'text/plain');
      assert.equal('HTTP_CONTENT_LENGTH' in p, false);
      assert.equal(p.SCRIPT_NAME, '/sub/page.php');
      assert.equal(p.PATH_INFO, '');
    });

    it('splits paths the way lighttpd does', async () => {
      let p = await params(rig, '/');
      assert.equal(p.SCRIPT_NAME, '/index.php', 'a directory gets the index');
      p = await params(rig, '/sub/');
      assert.equal(p.SCRIPT_NAME, '/sub/index.php');
      assert.equal(p.SCRIPT_FILENAME, join(root, 'sub', 'index.php'));
      p = await params(rig, '/sub/page.php/a/b/');
      assert.equal(p.SCRIPT_NAME, '/sub/page.php');
      assert.equal(p.PATH_INFO, '/a/b/');
      p = await params(rig, '/a%20b.php/x%2Fy');
      assert.equal(p.SCRIPT_NAME, '/a b.php', 'percent-decoded');
      assert.equal(p.PATH_INFO, '/x/y');
      assert.equal(p.REQUEST_URI, '/a%20b.php/x%2Fy', 'REQUEST_URI stays raw');
      p = await params(rig, '/sub/./page.php//x');
      assert.equal(p.SCRIPT_NAME, '/sub/page.php');
      assert.equal(p.PATH_INFO, '/x');
      p = await params(rig, '/nope/deeper');
      assert.equal(p.SCRIPT_NAME, '/nope/deeper', 'nothing found: the backend will 404');
      assert.equal(p.PATH_INFO, '');
      p = await params(rig, '/empty/');
      assert.equal(p.SCRIPT_NAME, '/empty/', 'directory without index');
    });

    it('rejects paths escaping the document root with 400', async () => {
      for (const target of ['/../etc/passwd', '/sub/../../etc/passwd', '/%2e%2e/etc/passwd', '/bad%zzescape', '/nul%00.php']) {
        const c = new RawConn(rig.target);
        await c.connected;
        c.write(`GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
        const res = await c.waitClose(3000);
        assert.match(res.received.toString(), /^HTTP\/1\.1 400 /, target);
      }
      await rig.logged((l) => l.code === 'ERR_HTTP_BAD_PATH');
      await servesNormally(rig);
    });

    it('passes status codes and reasons, and Location redirects', async () => {
      rig.pool.behaviour = respond(404, [['Content-Type', 'text/plain']], 'missing', 'Not Here');
      let r = await request(rig.target, '/index.php');
      assert.equal(r.status, 404);
      assert.equal(r.statusMessage, 'Not Here');
      assert.equal(r.body.toString(), 'missing');
      rig.pool.behaviour = respond(302, [['Location', '/elsewhere'], ['Set-Cookie', 'a=1'], ['Set-Cookie', 'b=2']]);
      r = await request(rig.target, '/index.php');
      assert.equal(r.status, 302);
      assert.equal(r.headers.location, '/elsewhere');
      assert.deepEqual(r.headers['set-cookie'], ['a=1', 'b=2']);
    });

    it('sends Content-Length when the backend gave one, chunked otherwise, and drops hop-by-hop headers', async () => {
      rig.pool.behaviour = respond(200, [['Content-Length', '5'], ['Connection', 'close'], ['Transfer-Encoding', 'chunked']], 'hello');
      let r = await request(rig.target, '/index.php');
      assert.equal(r.headers['content-length'], '5');
      assert.equal(r.headers['transfer-encoding'], undefined);
      assert.equal(r.body.toString(), 'hello');
      rig.pool.behaviour = respond(200, [['Content-Type', 'text/plain']], 'no length');
      r = await request(rig.target, '/index.php');
      assert.equal(r.headers['transfer-encoding'], 'chunked');
      assert.equal(r.headers['content-length'], undefined);
      assert.equal(r.body.toString(), 'no length');
    });

    it('answers HTTP/1.0 without chunking, closing to end the body', async () => {
      rig.pool.behaviour = respond(200, [['Content-Type', 'text/plain']], 'ten-body!!');
      const c = new RawConn(rig.target);
      await c.connected;
      c.write('GET /index.php HTTP/1.0\r\n\r\n');
      const res = await c.waitClose(3000);
      assert.equal(res.ended, 'end');
      const text = res.received.toString();
      assert.doesNotMatch(text, /transfer-encoding/i);
      assert.ok(text.endsWith('\r\n\r\nten-body!!'), text);
    });

    it('sends no body for HEAD', async () => {
      rig.pool.behaviour = respond(200, [['Content-Length', '5']], 'hello');
      const c = new RawConn(rig.target);
      await c.connected;
      c.write('HEAD /index.php HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
      const res = await c.waitClose(3000);
      const text = res.received.toString();
      assert.match(text, /^HTTP\/1\.1 200 /);
      assert.match(text, /content-length: 5/i);
      assert.ok(text.endsWith('\r\n\r\n'), 'nothing after the head');
      assert.equal(rig.pool.dispatched.at(-1)!.params.get('REQUEST_METHOD'), 'HEAD');
    });

    it('keeps connections alive between requests', async () => {
      rig.pool.behaviour = respond(200, [['Content-Length', '3']], 'one');
      const c = new RawConn(rig.target);
      await c.connected;
      try {
        c.write('GET /index.php HTTP/1.1\r\nHost: x\r\n\r\n');
        await c.waitData((b) => b.toString().endsWith('\r\n\r\none'), 3000);
        c.write('GET /index.php HTTP/1.1\r\nHost: x\r\n\r\n');
        const both = await c.waitData((b) => (b.toString().match(/\r\n\r\none/g) ?? []).length === 2, 3000);
        assert.equal((both.toString().match(/HTTP\/1\.1 200 /g) ?? []).length, 2);
        assert.equal(c.closed, false);
      } finally {
        c.destroy();
      }
    });

    it('streams 10 MB up and back down with back-pressure (sha256)', async (t) => {
      // Its own listener: the client stops reading for longer than the shared one's idle timeout.
      const rig = await startRig(t, 'http', addressFor(t, transport), { cfg: { idleTimeout: 10_000, documentRoot: root } });
      let pushes: ReturnType<typeof watchBodyPauses> | undefined;
      rig.pool.behaviour = (ex, pool) => {
        pushes = watchBodyPauses(ex);
        echoBody(ex, pool);
      };
      const before = rig.pool.responsePauses;
      const upload = seededBytes(10 * 1024 * 1024, 5);
      const c = new RawConn(rig.target);
      await c.connected;
      // The client does not read until the server's writes have backed up all the way to the body.
      c.socket.pause();
      c.write(`POST /index.php HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: ${upload.length}\r\n\r\n`);
      c.write(upload);
      const ex = await waitFor(() => rig.pool.dispatched.at(-1), { what: 'the request' });
      await waitFor(() => frontendPaused(ex), { timeout: 30_000, what: 'the exchange to ask the listener to pause' });
      assert.ok(pendingBody(ex) < 1024 * 1024, 'the listener stopped reading instead of buffering the body');
      c.socket.resume();
      const res = await c.waitClose(30_000);
      const raw = res.received;
      const headEnd = raw.indexOf('\r\n\r\n');
      assert.match(raw.subarray(0, headEnd).toString(), /transfer-encoding: chunked/i);
      const body = dechunk(raw.subarray(headEnd + 4));
      assert.equal(body.length, upload.length);
      assert.equal(sha256(body), sha256(upload));
      assert.ok(rig.pool.responsePauses > before, 'the response hit back-pressure');
      // Each pause held: past it, only the rest of the read being decoded arrived.
      assert.ok(pushes!.pauses > 0);
      assert.ok(pushes!.maxWhilePaused <= 256 * 1024, `${pushes!.maxWhilePaused} body bytes pushed during one pause (${pushes!.bytesWhilePaused} in ${pushes!.pauses} pauses)`);
    });

    it('streams a 10 MB response to a slow reader', async () => {
      const block = seededBytes(65536, 11);
      rig.pool.behaviour = streamBytes(block, 160 * 65536, [['Content-Length', String(160 * 65536)]]);
      const r = await request(rig.target, '/index.php');
      assert.equal(r.body.length, 160 * 65536);
      assert.equal(sha256(r.body.subarray(0, 65536)), sha256(block));
    });

    it('answers a failure before the head with its status, text and Retry-After', async () => {
      rig.pool.behaviour = failWith(new ProxyError(ErrorCodes.QUEUE_FULL, 503, 'queue full', 7));
      const r = await request(rig.target, '/index.php');
      assert.equal(r.status, 503);
      assert.equal(r.headers['retry-after'], '7');
      assert.match(r.headers['content-type'] ?? '', /^text\/plain/);
      assert.match(r.body.toString(), /ERR_QUEUE_FULL/);
    });

    it('cuts the connection when the response fails after its head', async () => {
      rig.pool.behaviour = failAfterHead;
      await assert.rejects(request(rig.target, '/index.php'));
      await rig.logged((l) => l.code === ErrorCodes.BACKEND_CLOSED);
      await servesNormally(rig);
    });

    it('answers garbage with 400, logs it, and keeps serving', async () => {
      const c = new RawConn(rig.target);
      await c.connected;
      c.write(Buffer.from([0, 1, 2, 3, 0xff, 13, 10, 13, 10]));
      const res = await c.waitClose(3000);
      assert.match(res.received.toString(), /^HTTP\/1\.1 400 /);
      const line = await rig.logged((l) => l.code === 'ERR_HTTP_BAD_REQUEST' && typeof l.parserCode === 'string' && l.parserCode.startsWith('HPE_'));
      assert.equal(line.listener, rig.listener.address);
      await servesNormally(rig);
    });

    it('answers an unknown method with 400', async () => {
      const c = new RawConn(rig.target);
      await c.connected;
      c.write('BREW /pot HTTP/1.1\r\nHost: x\r\n\r\n');
      assert.match((await c.waitClose(3000)).received.toString(), /^HTTP\/1\.1 400 /);
      await servesNormally(rig);
    });

    it('a truncated head or body then close: nothing dispatched, or the exchange aborted', async () => {
      rig.pool.behaviour = never;
      const n = rig.pool.dispatched.length;
      let c = new RawConn(rig.target);
      await c.connected;
      c.write('GET /index.php HTTP/1.1\r\nHo');
      c.end();
      await c.waitClose(3000);
      assert.equal(rig.pool.dispatched.length, n);
      c = new RawConn(rig.target);
      await c.connected;
      c.write('POST /index.php HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nhalf');
      const ex = await rig.pool.nth(n + 1);
      c.end();
      await rig.pool.abortedP(ex);
      c.destroy();
      await servesNormally(rig);
    });

    it('answers a head over the limits with 431', async () => {
      let r = await request(rig.target, '/index.php', { headers: { 'X-Big': 'x'.repeat(20_000) } });
      assert.equal(r.status, 431);
      const many: Record<string, string> = {};
      for (let i = 0; i < 70; i++) many[`X-H${i}`] = 'v';
      r = await request(rig.target, '/index.php', { headers: many });
      assert.equal(r.status, 431);
      await rig.logged((l) => l.code === ErrorCodes.PARAMS_TOO_MANY);
      await servesNormally(rig);
    });

    it('closes a connection that sends nothing for the idle timeout', async () => {
      const c = new RawConn(rig.target);
      await c.connected;
      const res = await c.waitClose(3000);
      assert.notEqual(res.ended, 'timeout');
      await rig.logged((l) => /idle HTTP|stalled/.test(l.msg), DEBUG);
      await servesNormally(rig);
    });

    it('closes a connection that stalls in its request head', async () => {
      const c = new RawConn(rig.target);
      await c.connected;
      c.write('GET /index.php HTTP/1.1\r\nHost: x\r\n');
      const res = await c.waitClose(3000);
      assert.notEqual(res.ended, 'timeout');
      await rig.logged((l) => l.code === 'ERR_HTTP_HEAD_TIMEOUT');
      await servesNormally(rig);
    });

    it('closes a connection that stalls in its request body, aborting the exchange', async () => {
      rig.pool.behaviour = never;
      const n = rig.pool.dispatched.length;
      const c = new RawConn(rig.target);
      await c.connected;
      c.write('POST /index.php HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly-part');
      const ex = await rig.pool.nth(n + 1);
      await rig.pool.abortedP(ex);
      assert.notEqual((await c.waitClose(3000)).ended, 'timeout');
      await rig.logged((l) => l.code === 'ERR_HTTP_BODY_TIMEOUT');
      await servesNormally(rig);
    });

    it('closes a connection whose client stops reading its response, aborting the exchange', async () => {
      rig.pool.behaviour = streamBytes(seededBytes(65536, 1), 64 * 1024 * 1024);
      const n = rig.pool.dispatched.length;
      const c = new RawConn(rig.target);
      await c.connected;
      c.write('GET /index.php HTTP/1.1\r\nHost: x\r\n\r\n');
      c.socket.pause();
      const ex = await rig.pool.nth(n + 1);
      await rig.pool.abortedP(ex);
      assert.ok(ex.bytesOut < 64 * 1024 * 1024);
      await rig.logged((l) => l.code === 'ERR_HTTP_SEND_TIMEOUT');
      c.destroy();
      await servesNormally(rig);
    });

    it('keeps a connection waiting for a slow backend past the idle timeout', async () => {
      rig.pool.behaviour = (ex, pool) => setTimeout(() => respond(200, [], 'late')(ex, pool), 700);
      const r = await request(rig.target, '/index.php');
      assert.equal(r.body.toString(), 'late');
    });

    it('aborts the exchange when the client disconnects mid-request', async () => {
      rig.pool.behaviour = never;
      const n = rig.pool.dispatched.length;
      const c = new RawConn(rig.target);
      await c.connected;
      c.write('GET /index.php HTTP/1.1\r\nHost: x\r\n\r\n');
      const ex = await rig.pool.nth(n + 1);
      c.destroy();
      await rig.pool.abortedP(ex);
      assert.equal(ex.state, 'aborted');
      await servesNormally(rig);
    });
  });
}

describe('HTTP listener without a document root', { timeout: 20_000 }, () => {
  const scope = new Cleanup();
  after(() => scope.run());
  it('passes the path as PATH_INFO with an empty SCRIPT_NAME, and answers 500 without a pool', async () => {
    const rig = await startRig(scope, 'http', '127.0.0.1:0');
    const p = await params(rig, '/app/x%20y?q');
    assert.equal(p.SCRIPT_NAME, '');
    assert.equal(p.PATH_INFO, '/app/x y');
    assert.equal('SCRIPT_FILENAME' in p, false);
    assert.equal('DOCUMENT_ROOT' in p, false);
    const other = await startRig(scope, 'http', '127.0.0.1:0', { poolName: 'other' });
    const r = await request(other.target, '/');
    assert.equal(r.status, 500);
    assert.match(r.body.toString(), /ERR_NO_POOL/);
  });
});

/** Decodes a chunked body (the test reads raw bytes to see the framing). */
function dechunk(b: Buffer): Buffer {
  const out: Buffer[] = [];
  let pos = 0;
  for (;;) {
    const nl = b.indexOf('\r\n', pos);
    const size = Number.parseInt(b.subarray(pos, nl).toString(), 16);
    if (size === 0) break;
    out.push(b.subarray(nl + 2, nl + 2 + size));
    pos = nl + 2 + size + 2;
  }
  return Buffer.concat(out);
}
