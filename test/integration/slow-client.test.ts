/**
 * A FastCGI client whose request body stalls, against a real php-cgi pool of one
 * worker: the request is answered 408 after body_timeout, logged with the client's
 * code, and the worker is freed for the next request. It used to hold the worker
 * until read_timeout and answer 504, blaming the backend.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ErrorCodes } from '../../src/errors.js';
import { encodeBeginRequest, encodeRecord, FCGI_KEEP_CONN, RecordType, Role } from '../../src/protocol/fastcgi.js';
import { startDaemon, type Daemon } from '../helpers/daemon.js';
import { FcgiClient, paramsRecords, parseCgiOutput, phpParams } from '../helpers/fcgi-client.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { Cleanup } from '../helpers/scope.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';

describe('a stalled FastCGI request body', { timeout: 60_000 }, () => {
  const scope = new Cleanup();
  let daemon: Daemon;
  let port: number;

  before(async () => {
    const dir = makeTempDir(scope);
    port = await freePort();
    daemon = await startDaemon(scope, {
      listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'php', body_timeout: '500ms' }],
      // One worker, and read_timeout far above the waits below: only body_timeout can free it in time.
      pools: { php: { command: phpCommand(dir, 'slow-client'), pm: 'static', max_children: 1, read_timeout: '120s' } },
    });
  });
  after(() => scope.run());

  it('is answered 408, logged as the client, and frees the worker', async () => {
    const since = daemon.mark();
    const slow = await FcgiClient.connect({ port });
    const params = phpParams(PHP_FIXTURES, '/echo.php', { REQUEST_METHOD: 'POST', CONTENT_TYPE: 'application/octet-stream', CONTENT_LENGTH: '1000' });
    slow.sendTogether([encodeBeginRequest(1, Role.Responder, FCGI_KEEP_CONN), ...paramsRecords(1, params), encodeRecord(RecordType.Stdin, 1, Buffer.alloc(10, 0x61))]);
    const res = await slow.response(1, 10_000);
    slow.close();
    assert.equal(parseCgiOutput(res.stdout).status, 408);

    const next = await FcgiClient.connect({ port });
    try {
      next.request(1, phpParams(PHP_FIXTURES, '/hello.php'));
      assert.equal(parseCgiOutput((await next.response(1, 15_000)).stdout).status, 200, 'the only worker serves the next request');
    } finally {
      next.close();
    }
    const lines = daemon.logsSince(since);
    assert.ok(lines.some((l) => l.code === ErrorCodes.CLIENT_BODY_TIMEOUT), daemon.dump(since));
    const blamed = lines.filter((l) => l.code === ErrorCodes.BACKEND_TIMEOUT || l.code === ErrorCodes.REQUEST_TIMEOUT || /request_timeout/.test(String(l.msg)));
    assert.deepEqual(blamed, [], 'nothing blames the backend');
  });
});
