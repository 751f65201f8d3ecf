/**
 * Issue acceptance (e): the FastCGI front end as a multiplexing responder.
 * Raw client (no nginx) → fcgi-pm FastCGI listener → php-cgi backends.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { RecordType } from '../../src/protocol/fastcgi.js';
import { startDaemon, type Daemon } from '../helpers/daemon.js';
import { FcgiClient, interleave, parseCgiOutput, phpParams, requestRecords } from '../helpers/fcgi-client.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { bigSha256, seededBytes, sha256 } from '../helpers/payload.js';
import { startPhpCgi, type PhpCgi } from '../helpers/php.js';
import { freePort } from '../helpers/ports.js';
import { tcpConnections } from '../helpers/proc.js';
import { Cleanup } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';

describe('FastCGI front end: multiplexing, GET_VALUES, ABORT_REQUEST', { timeout: 60_000 }, () => {
  const scope = new Cleanup();
  let daemon: Daemon;
  let portA: number;
  let portB: number;
  let slow: PhpCgi[];
  const slowPorts: number[] = [];

  before(async () => {
    const dir = makeTempDir(scope);
    await startPhpCgi(scope, join(dir, 'php1.sock'));
    await startPhpCgi(scope, join(dir, 'php2.sock'));
    slowPorts.push(await freePort(), await freePort());
    slow = [await startPhpCgi(scope, `127.0.0.1:${slowPorts[0]}`), await startPhpCgi(scope, `127.0.0.1:${slowPorts[1]}`)];
    portA = await freePort();
    portB = await freePort();
    daemon = await startDaemon(scope, {
      listen: [
        { protocol: 'fastcgi', address: `127.0.0.1:${portA}`, pool: 'php', max_conns: 50 },
        { protocol: 'fastcgi', address: `127.0.0.1:${portB}`, pool: 'slow' },
      ],
      pools: {
        php: { backend: 'fastcgi', backends: [`unix:${dir}/php1.sock`, `unix:${dir}/php2.sock`], max_conns_per_backend: 1 },
        slow: { backend: 'fastcgi', backends: slowPorts.map((p) => `127.0.0.1:${p}`), max_conns_per_backend: 1 },
      },
      log: { level: 'info', access: true },
    });
  });
  after(() => scope.run());

  it('answers 5 requests whose records are interleaved on one connection', async () => {
    const c = await FcgiClient.connect({ port: portA });
    try {
      const upload = seededBytes(300_000, 99);
      const reqs = [
        requestRecords(1, phpParams(PHP_FIXTURES, '/echo.php?id=1', { HTTP_X_ID: 'one' }), undefined, { maxRecord: 64 }),
        requestRecords(
          2,
          phpParams(PHP_FIXTURES, '/upload-hash.php', { REQUEST_METHOD: 'POST', CONTENT_TYPE: 'application/octet-stream', CONTENT_LENGTH: String(upload.length) }),
          upload,
          { maxRecord: 4000 },
        ),
        requestRecords(3, phpParams(PHP_FIXTURES, '/hello.php'), undefined, { maxRecord: 64 }),
        requestRecords(9, phpParams(PHP_FIXTURES, '/big.php?mb=1'), undefined, { maxRecord: 64 }),
        requestRecords(65535, phpParams(PHP_FIXTURES, '/echo.php?id=max'), undefined, { maxRecord: 100 }),
      ];
      for (const rec of interleave(reqs)) c.send(rec);

      const [r1, r2, r3, r9, rMax] = await Promise.all([1, 2, 3, 9, 65535].map((id) => c.response(id, 20_000)));
      for (const r of [r1!, r2!, r3!, r9!, rMax!]) assert.equal(r.protocolStatus, 0, `request ${r.requestId} protocol status`);

      const e1 = JSON.parse(parseCgiOutput(r1!.stdout).body.toString());
      assert.equal(e1.query, 'id=1');
      assert.equal(e1.headers.HTTP_X_ID, 'one');
      assert.deepEqual(JSON.parse(parseCgiOutput(r2!.stdout).body.toString()), { sha256: sha256(upload), bytes: upload.length });
      assert.equal(parseCgiOutput(r3!.stdout).body.toString(), 'Hello from PHP\n');
      const big = parseCgiOutput(r9!.stdout);
      assert.equal(big.body.length, 1048576);
      assert.equal(sha256(big.body), bigSha256(1));
      assert.equal(JSON.parse(parseCgiOutput(rMax!.stdout).body.toString()).query, 'id=max');

      // The connection stays open (FCGI_KEEP_CONN) and a finished id can be used again.
      c.request(1, phpParams(PHP_FIXTURES, '/hello.php'));
      const again = await c.waitRecord((r) => r.type === RecordType.EndRequest && r.requestId === 1, 10_000, c.records.findIndex((r) => r.type === RecordType.EndRequest && r.requestId === 1) + 1);
      assert.ok(again);
      assert.equal(c.closed, false);
    } finally {
      c.close();
    }
  });

  it('answers FCGI_GET_VALUES with MAX_CONNS, MAX_REQS and MPXS_CONNS', async () => {
    const c = await FcgiClient.connect({ port: portA });
    try {
      const v = await c.getValues(['FCGI_MAX_CONNS', 'FCGI_MAX_REQS', 'FCGI_MPXS_CONNS', 'NO_SUCH_VARIABLE']);
      assert.equal(v.FCGI_MPXS_CONNS, '1');
      assert.equal(v.FCGI_MAX_CONNS, '50', 'max_conns of the listener');
      assert.match(v.FCGI_MAX_REQS ?? '', /^[1-9]\d*$/);
      assert.equal('NO_SUCH_VARIABLE' in v, false, 'unknown names are left out');
      // A management record does not end the connection.
      c.request(1, phpParams(PHP_FIXTURES, '/hello.php'));
      assert.equal(parseCgiOutput((await c.response(1)).stdout).body.toString(), 'Hello from PHP\n');
    } finally {
      c.close();
    }
  });

  it('FCGI_ABORT_REQUEST cancels a running request: END_REQUEST, backend connection closed, others unaffected', async () => {
    const c = await FcgiClient.connect({ port: portB });
    try {
      c.request(5, phpParams(PHP_FIXTURES, '/sleep.php?ms=4000&flush=1'));
      // The script is running once its first output arrives.
      await c.waitRecord((r) => r.type === RecordType.Stdout && r.requestId === 5 && r.content.includes('started'), 10_000);
      const pid = Number(/started pid (\d+)/.exec(c.collect(5).stdout.toString())?.[1]);
      const i = slow.findIndex((p) => p.pid === pid);
      assert.ok(i >= 0, `request 5 ran in one of the slow pool's php-cgi (pid ${pid})`);
      const busyPort = slowPorts[i]!;
      assert.ok(tcpConnections(busyPort).some((t) => t.localPort === busyPort && t.state === 'ESTABLISHED'));

      // Another request on the same connection runs meanwhile on the other backend.
      c.request(6, phpParams(PHP_FIXTURES, '/hello.php'));
      const r6 = await c.response(6, 10_000);
      assert.equal(parseCgiOutput(r6.stdout).body.toString(), 'Hello from PHP\n');
      assert.equal(c.collect(5).appStatus, -1, 'request 5 still running');

      const t0 = Date.now();
      c.abort(5);
      const r5 = await c.response(5, 10_000);
      assert.ok(Date.now() - t0 < 3000, 'END_REQUEST came from the abort, not from the script finishing');
      assert.equal(r5.protocolStatus, 0);
      // fcgi-pm closed its side of the backend connection: php-cgi's side is no longer ESTABLISHED.
      await waitFor(() => !tcpConnections(busyPort).some((t) => t.localPort === busyPort && t.state === 'ESTABLISHED'), {
        timeout: 2500,
        what: `backend connection on port ${busyPort} to be closed after the abort`,
      });
      assert.equal(c.closed, false, 'the front-end connection stays open');
    } finally {
      c.close();
    }
  });

  it('without FCGI_KEEP_CONN the connection is closed after the response', async () => {
    const c = await FcgiClient.connect({ port: portA });
    try {
      c.request(3, phpParams(PHP_FIXTURES, '/hello.php'), undefined, { keepConn: false });
      const r = await c.response(3);
      assert.equal(parseCgiOutput(r.stdout).body.toString(), 'Hello from PHP\n');
      assert.equal(await c.waitClose(5000), true, 'daemon closed the connection');
    } finally {
      c.close();
    }
  });

  it('stops on SIGTERM with exit code 0', async () => {
    assert.deepEqual(await daemon.stop(), { code: 0, signal: null }, daemon.dump());
  });
});
