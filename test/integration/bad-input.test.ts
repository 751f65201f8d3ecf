/**
 * Issue acceptance (f): bad input on every listener (FastCGI, SCGI, HTTP). Each case
 * must end in a closed connection or a proper error answer, leave a log line, and the
 * daemon must go on serving.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { RecordType, encodeBeginRequest, encodeRecord, Role, FCGI_KEEP_CONN } from '../../src/protocol/fastcgi.js';
import { LogLevel, startDaemon, type Daemon, type LogLine } from '../helpers/daemon.js';
import { FcgiClient, paramsRecords, parseCgiOutput, phpParams, requestRecords } from '../helpers/fcgi-client.js';
import { httpRequest } from '../helpers/http-client.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { startPhpCgi } from '../helpers/php.js';
import { freePort } from '../helpers/ports.js';
import { RawConn, rawExchange, type RawResult } from '../helpers/raw-socket.js';
import { encodeScgiRequest, scgiRequest } from '../helpers/scgi-client.js';
import { Cleanup } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';
import { sleep } from '../helpers/wait.js';

describe('bad input on every listener', { timeout: 60_000 }, () => {
  const scope = new Cleanup();
  let daemon: Daemon;
  let fcgi: { port: number };
  let http: { port: number };
  let scgi: { path: string };

  before(async () => {
    const dir = makeTempDir(scope);
    await startPhpCgi(scope, join(dir, 'php1.sock'));
    await startPhpCgi(scope, join(dir, 'php2.sock'));
    fcgi = { port: await freePort() };
    http = { port: await freePort() };
    scgi = { path: join(dir, 'front.sock') };
    daemon = await startDaemon(scope, {
      listen: [
        { protocol: 'fastcgi', address: `127.0.0.1:${fcgi.port}`, pool: 'php', idle_timeout: '500ms' },
        { protocol: 'scgi', address: `unix:${scgi.path}`, pool: 'php', idle_timeout: '500ms' },
        { protocol: 'http', address: `127.0.0.1:${http.port}`, pool: 'php', idle_timeout: '500ms', body_timeout: '500ms', document_root: PHP_FIXTURES, index: 'index.php' },
      ],
      limits: { max_params_bytes: '2KiB' },
      pools: {
        php: { backend: 'fastcgi', backends: [`unix:${dir}/php1.sock`, `unix:${dir}/php2.sock`], max_conns_per_backend: 1 },
      },
      // debug: a client that never sent a byte is logged at debug level, by design.
      log: { level: 'debug', access: true },
    });
  });
  after(() => scope.run());

  /** Waits until the log is quiet (earlier requests' lines are in), returns the index to search from. */
  async function quietMark(): Promise<number> {
    let n = -1;
    while (n !== daemon.logs.length) {
      n = daemon.logs.length;
      await sleep(120);
    }
    return n;
  }

  /**
   * Waits for the line this case must leave: every field of `want` equal (a RegExp tests
   * the field's text). A case names its code, so another case's line cannot stand in.
   */
  async function expectLog(since: number, what: string, want: Record<string, string | number | boolean | RegExp>): Promise<LogLine> {
    const matches = (l: LogLine): boolean => Object.entries(want).every(([k, v]) => (v instanceof RegExp ? v.test(String(l[k])) : l[k] === v));
    return daemon.waitForLog(matches, { since, timeout: 3000, what: `${what} ${JSON.stringify(want, (_k, v: unknown) => (v instanceof RegExp ? String(v) : v))}` });
  }

  function assertClosed(r: RawResult, what: string): void {
    assert.notEqual(r.ended, 'timeout', `${what}: connection still open after ${r.elapsed} ms; got ${JSON.stringify(r.received.toString('latin1').slice(0, 200))}`);
  }

  const params = (script: string, extra: Record<string, string> = {}): Record<string, string> => phpParams(PHP_FIXTURES, script, extra);

  async function fcgiServes(): Promise<void> {
    assert.ok(daemon.running, 'daemon still running');
    const c = await FcgiClient.connect(fcgi);
    try {
      c.request(1, params('/hello.php'));
      assert.equal(parseCgiOutput((await c.response(1)).stdout).body.toString(), 'Hello from PHP\n');
    } finally {
      c.close();
    }
  }
  async function scgiServes(): Promise<void> {
    assert.ok(daemon.running, 'daemon still running');
    const r = await scgiRequest(scgi, params('/hello.php'));
    assert.equal(r.status, 200);
    assert.equal(r.body.toString(), 'Hello from PHP\n');
  }
  async function httpServes(): Promise<void> {
    assert.ok(daemon.running, 'daemon still running');
    const r = await httpRequest(`http://127.0.0.1:${http.port}/hello.php`);
    assert.equal(r.status, 200);
    assert.equal(r.text, 'Hello from PHP\n');
  }

  // ---- FastCGI ------------------------------------------------------------------

  describe('FastCGI listener', () => {
    it('garbage bytes: connection closed, warning logged', async () => {
      const since = await quietMark();
      const r = await rawExchange(fcgi, ['GET / HTTP/1.1\r\nHost: x\r\n\r\n']);
      assertClosed(r, 'garbage');
      await expectLog(since, 'about the bad FastCGI input', { level: LogLevel.warn, code: 'ERR_FCGI_BAD_VERSION' });
      await fcgiServes();
    });

    it('truncated record then EOF: connection closed, warning logged', async () => {
      const since = await quietMark();
      const begin = encodeBeginRequest(1, Role.Responder, FCGI_KEEP_CONN);
      const params = encodeRecord(RecordType.Params, 1, Buffer.alloc(200, 0x41));
      const r = await rawExchange(fcgi, [begin, params.subarray(0, 60)], { halfClose: true });
      assertClosed(r, 'truncated record');
      await expectLog(since, 'about the truncated record', { level: LogLevel.warn, code: 'ERR_FCGI_TRUNCATED', msg: /middle of a record/ });
      await fcgiServes();
    });

    it('PARAMS over limits.max_params_bytes: answered 431, connection kept, warning logged', async () => {
      const since = await quietMark();
      const c = await FcgiClient.connect(fcgi);
      try {
        c.send(encodeBeginRequest(1, Role.Responder, FCGI_KEEP_CONN), ...paramsRecords(1, params('/hello.php', { HTTP_X_BIG: 'x'.repeat(3000) }), 1000));
        c.send(encodeRecord(RecordType.Stdin, 1));
        const out = await c.response(1, 5000);
        assert.equal(parseCgiOutput(out.stdout).status, 431, `answered ${out.stdout.toString('latin1').slice(0, 100)}`);
        assert.ok(!out.stdout.includes('Hello from PHP'), 'the oversized request must not reach PHP');
        c.request(2, params('/hello.php'));
        assert.equal(parseCgiOutput((await c.response(2)).stdout).body.toString(), 'Hello from PHP\n', 'the connection serves on');
      } finally {
        c.close();
      }
      await expectLog(since, 'about the oversized params', { level: LogLevel.warn, code: 'ERR_PARAMS_TOO_LARGE', protocol: 'fastcgi' });
      await fcgiServes();
    });

    it('unknown management record type: FCGI_UNKNOWN_TYPE answer, connection stays usable', async () => {
      const c = await FcgiClient.connect(fcgi);
      try {
        c.send(encodeRecord(42, 0, Buffer.from('whatever')));
        const rec = await c.waitRecord((r) => r.type === RecordType.UnknownType, 5000);
        assert.equal(rec.requestId, 0);
        assert.equal(rec.content[0], 42, 'UNKNOWN_TYPE body names the type');
        c.request(1, params('/hello.php'));
        assert.equal(parseCgiOutput((await c.response(1)).stdout).body.toString(), 'Hello from PHP\n');
      } finally {
        c.close();
      }
    });

    it('a client that sends nothing is closed after the listener idle_timeout, and logged', async () => {
      const since = await quietMark();
      const r = await rawExchange(fcgi, [], { waitMs: 4000 });
      assertClosed(r, 'idle client (idle_timeout 500ms)');
      assert.equal(r.received.length, 0);
      await expectLog(since, 'about the idle connection', { level: LogLevel.debug, msg: /^idle FastCGI connection closed/ });
      await fcgiServes();
    });

    it('a client that stalls mid-request is closed after idle_timeout, warning logged', async () => {
      const since = await quietMark();
      const r = await rawExchange(fcgi, [encodeBeginRequest(1, Role.Responder, FCGI_KEEP_CONN), paramsRecords(1, params('/hello.php'))[0]!], { waitMs: 4000 });
      assertClosed(r, 'client idle mid-request');
      assert.ok(!r.received.includes('Hello from PHP'));
      await expectLog(since, 'about the stalled client', { level: LogLevel.warn, code: 'ERR_FCGI_TRUNCATED', msg: /stalled/ });
      await fcgiServes();
    });

    it('a client that disconnects mid-request (mid-body, and while PHP runs): logged, daemon serves on', async () => {
      const since = await quietMark();
      const c = new RawConn(fcgi);
      await c.connected;
      const recs = requestRecords(1, params('/upload-hash.php', { REQUEST_METHOD: 'POST', CONTENT_LENGTH: '100000', REQUEST_URI: '/upload-hash.php?cut=body' }), Buffer.alloc(0));
      c.write(Buffer.concat(recs.slice(0, -1))); // BEGIN + PARAMS, no STDIN end
      c.write(encodeRecord(RecordType.Stdin, 1, Buffer.alloc(1000, 1)));
      await sleep(100);
      c.destroy();
      await expectLog(since, 'the access line of the client gone mid-body: 499, aborted', { kind: 'access', uri: '/upload-hash.php?cut=body', status: 499, aborted: true });

      const since2 = daemon.mark();
      const c2 = new RawConn(fcgi);
      await c2.connected;
      c2.write(Buffer.concat(requestRecords(1, params('/sleep.php?ms=600&cut=run', { REQUEST_URI: '/sleep.php?ms=600&cut=run' }))));
      await sleep(150);
      c2.destroy();
      await expectLog(since2, 'the access line of the client gone while PHP runs: 499, aborted', { kind: 'access', uri: '/sleep.php?ms=600&cut=run', status: 499, aborted: true });
      // Both backends still work (one may finish the 600 ms script first).
      await Promise.all([fcgiServes(), fcgiServes()]);
    });
  });

  // ---- SCGI -----------------------------------------------------------------------

  describe('SCGI listener', () => {
    it('garbage bytes: connection closed, warning logged', async () => {
      const since = await quietMark();
      const r = await rawExchange(scgi, ['hello world, this is not a netstring\r\n']);
      assertClosed(r, 'garbage');
      await expectLog(since, 'about the bad SCGI input', { level: LogLevel.warn, code: 'ERR_SCGI_BAD_NETSTRING', msg: /bad SCGI request/ });
      await scgiServes();
    });

    it('truncated netstring then EOF: connection closed, warning logged', async () => {
      const since = await quietMark();
      const r = await rawExchange(scgi, ['70:CONTENT_LENGTH\x000\x00SCGI\x001\x00REQ'], { halfClose: true });
      assertClosed(r, 'truncated netstring');
      await expectLog(since, 'about the truncated header', { level: LogLevel.warn, code: 'ERR_SCGI_BAD_NETSTRING', msg: /closed before its request was complete/ });
      await scgiServes();
    });

    it('header over limits.max_params_bytes: refused, warning logged', async () => {
      const since = await quietMark();
      const r = await rawExchange(scgi, [encodeScgiRequest(params('/hello.php', { HTTP_X_BIG: 'x'.repeat(3000) }))]);
      assertClosed(r, 'oversized header');
      assert.ok(!r.received.includes('Hello from PHP'), 'the oversized request must not reach PHP');
      if (r.received.length > 0) assert.ok(parseCgiOutput(r.received).status >= 400);
      await expectLog(since, 'about the oversized header', { level: LogLevel.warn, code: 'ERR_SCGI_HEADER_TOO_LARGE' });
      await scgiServes();
    });

    it('header without CONTENT_LENGTH first: refused, warning logged', async () => {
      const since = await quietMark();
      const head = 'SCGI\x001\x00REQUEST_METHOD\x00GET\x00';
      const r = await rawExchange(scgi, [`${head.length}:${head},`]);
      assertClosed(r, 'missing CONTENT_LENGTH');
      if (r.received.length > 0) assert.ok(parseCgiOutput(r.received).status >= 400);
      await expectLog(since, 'about the bad header', { level: LogLevel.warn, code: 'ERR_SCGI_BAD_HEADERS' });
      await scgiServes();
    });

    it('a client that sends nothing is closed after the listener idle_timeout, and logged', async () => {
      const since = await quietMark();
      const r = await rawExchange(scgi, [], { waitMs: 4000 });
      assertClosed(r, 'idle client (idle_timeout 500ms)');
      assert.equal(r.received.length, 0);
      await expectLog(since, 'about the idle connection', { level: LogLevel.debug, msg: /^idle SCGI connection closed/ });
      await scgiServes();
    });

    it('a client that stalls mid-header is closed after idle_timeout, warning logged', async () => {
      const since = await quietMark();
      const r = await rawExchange(scgi, ['70:CONTENT_LENGTH\x000\x00'], { waitMs: 4000 });
      assertClosed(r, 'client idle mid-header');
      await expectLog(since, 'about the stalled client', { level: LogLevel.warn, code: 'ERR_SCGI_BAD_NETSTRING', msg: /stalled/ });
      await scgiServes();
    });

    it('a client that disconnects mid-body: logged, daemon serves on', async () => {
      const since = await quietMark();
      const c = new RawConn(scgi);
      await c.connected;
      const full = encodeScgiRequest(params('/upload-hash.php', { REQUEST_METHOD: 'POST', REQUEST_URI: '/upload-hash.php?cut=scgi' }), Buffer.alloc(100_000, 2));
      c.write(full.subarray(0, full.length - 60_000));
      await sleep(100);
      c.destroy();
      await expectLog(since, 'the access line of the client gone mid-body: 499, aborted', { kind: 'access', uri: '/upload-hash.php?cut=scgi', status: 499, aborted: true });
      await Promise.all([scgiServes(), scgiServes()]);
    });
  });

  // ---- HTTP -----------------------------------------------------------------------

  describe('HTTP listener', () => {
    it('garbage bytes: 400 or closed, warning logged', async () => {
      const since = await quietMark();
      const r = await rawExchange(http, [Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]), '\r\n\r\n']);
      assertClosed(r, 'garbage');
      if (r.received.length > 0) assert.match(r.received.toString('latin1'), /^HTTP\/1\.[01] 4\d\d /);
      await expectLog(since, 'about the bad HTTP input', { level: LogLevel.warn, code: 'ERR_HTTP_BAD_REQUEST', parserCode: 'HPE_INVALID_METHOD' });
      await httpServes();
    });

    it('truncated request head then EOF: connection closed, logged', async () => {
      const since = await quietMark();
      const r = await rawExchange(http, ['GET /hello.php HTTP/1.1\r\nHost: x\r\nX-Partial: y'], { halfClose: true });
      assertClosed(r, 'truncated head');
      assert.ok(!r.received.includes('Hello from PHP'));
      await expectLog(since, 'about the truncated request', { level: LogLevel.warn, code: 'ERR_HTTP_BAD_REQUEST', parserCode: 'HPE_INVALID_EOF_STATE' });
      await httpServes();
    });

    it('oversized request head: 431/400 or closed, warning logged', async () => {
      const since = await quietMark();
      const r = await rawExchange(http, [`GET /hello.php HTTP/1.1\r\nHost: x\r\nX-Big: ${'x'.repeat(40_000)}\r\n\r\n`]);
      assertClosed(r, 'oversized head');
      assert.ok(!r.received.includes('Hello from PHP'));
      if (r.received.length > 0) assert.match(r.received.toString('latin1'), /^HTTP\/1\.[01] 4\d\d /);
      await expectLog(since, 'about the oversized head', { level: LogLevel.warn, code: 'ERR_HTTP_BAD_REQUEST', parserCode: 'HPE_HEADER_OVERFLOW' });
      await httpServes();
    });

    it('request variables over limits.max_params_bytes: 431, warning logged', async () => {
      const since = await quietMark();
      const r = await httpRequest(`http://127.0.0.1:${http.port}/hello.php`, { headers: { 'x-big': 'x'.repeat(3000) } });
      assert.equal(r.status, 431);
      assert.doesNotMatch(r.text, /Hello from PHP/);
      await expectLog(since, 'about the oversized request variables', { level: LogLevel.warn, code: 'ERR_PARAMS_TOO_LARGE', protocol: 'http' });
      await httpServes();
    });

    it('paths that escape document_root are refused, never run', async () => {
      for (const path of ['/../../../../etc/passwd', '/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd', '/hello.php/../../../../../etc/passwd', '/..%2f..%2f..%2f..%2fetc/passwd', '/echo.php%00.txt']) {
        const r = await rawExchange(http, [`GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`]);
        const text = r.received.toString('latin1');
        assert.match(text, /^HTTP\/1\.1 4\d\d /, `${path}: ${text.slice(0, 80)}`);
        assert.doesNotMatch(text, /root:/, `${path} leaked /etc/passwd`);
      }
      await httpServes();
    });

    it('unknown protocol version: 4xx or closed, warning logged', async () => {
      const since = await quietMark();
      const r = await rawExchange(http, ['BREW /hello.php HTCPCP/1.0\r\nHost: x\r\n\r\n']);
      assertClosed(r, 'unknown protocol');
      assert.ok(!r.received.includes('Hello from PHP'));
      await expectLog(since, 'about the unknown protocol', { level: LogLevel.warn, code: 'ERR_HTTP_BAD_REQUEST', parserCode: 'HPE_INVALID_METHOD' });
      await httpServes();
    });

    it('a client that sends nothing is closed after the listener idle_timeout, and logged', async () => {
      const since = await quietMark();
      const r = await rawExchange(http, [], { waitMs: 4000 });
      assertClosed(r, 'idle client (idle_timeout 500ms)');
      assert.equal(r.received.length, 0, 'nothing sent to a client that sent nothing');
      await expectLog(since, 'about the idle connection', { level: LogLevel.debug, msg: /^idle HTTP connection closed/ });
      await httpServes();
    });

    it('a client that stalls mid-head is closed after idle_timeout, warning logged', async () => {
      const since = await quietMark();
      const r = await rawExchange(http, ['GET /hello.php HTTP/1.1\r\nHost: x\r\n'], { waitMs: 4000 });
      assertClosed(r, 'client idle mid-head');
      assert.ok(!r.received.includes('Hello from PHP'));
      await expectLog(since, 'about the stalled client', { level: LogLevel.warn, code: 'ERR_HTTP_HEAD_TIMEOUT' });
      await httpServes();
    });

    it('a client that disconnects mid-body: logged, daemon serves on', async () => {
      const since = await quietMark();
      const c = new RawConn(http);
      await c.connected;
      c.write('POST /upload-hash.php?cut=http HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: 100000\r\n\r\n');
      c.write(Buffer.alloc(20_000, 3));
      await sleep(100);
      c.destroy();
      const access = await expectLog(since, 'the access line of the client gone mid-body: 499, aborted', { kind: 'access', uri: '/upload-hash.php?cut=http', status: 499, aborted: true });
      // Ended when the client left, not later as a stalled body (body_timeout) nor as bad input.
      const before = daemon.logs.slice(since, daemon.logs.indexOf(access));
      assert.deepEqual(before.filter((l) => l.code !== undefined).map((l) => l.code), [], daemon.dump());
      await Promise.all([httpServes(), httpServes()]);
    });
  });

  it('stops on SIGTERM with exit code 0', async () => {
    assert.deepEqual(await daemon.stop(), { code: 0, signal: null }, daemon.dump());
  });
});
