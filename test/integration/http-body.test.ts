/**
 * Request bodies through the HTTP listener to a real php-cgi: chunked uploads arrive
 * whole with their CONTENT_LENGTH (from memory, or from a temp file in the daemon's
 * private runtime dir that is gone afterwards), max_body_size answers 413 for chunked
 * and Content-Length bodies, and a client that gives up mid-upload leaves no file and
 * never held a worker.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ErrorCodes } from '../../src/errors.js';
import { startDaemon, type Daemon } from '../helpers/daemon.js';
import { httpRequest, httpUpload } from '../helpers/http-client.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { seededBytes } from '../helpers/payload.js';
import { startPhpCgi } from '../helpers/php.js';
import { freePort } from '../helpers/ports.js';
import { RawConn } from '../helpers/raw-socket.js';
import { Cleanup } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';

const MAX_BODY = 8 * 1024 * 1024;

describe('HTTP request bodies to php-cgi', { timeout: 120_000 }, () => {
  const scope = new Cleanup();
  let daemon: Daemon;
  let url: string;
  let port: number;
  let privateDir: string;

  before(async () => {
    const dir = makeTempDir(scope, 'fpm-body-');
    await startPhpCgi(scope, join(dir, 'php.sock'));
    port = await freePort();
    url = `http://127.0.0.1:${port}`;
    daemon = await startDaemon(scope, {
      runtime_dir: join(dir, 'run'),
      listen: [
        { protocol: 'http', address: `127.0.0.1:${port}`, pool: 'php', document_root: PHP_FIXTURES, status_path: '/status', body_buffer_size: '16KiB', max_body_size: '8MiB' },
      ],
      pools: { php: { backend: 'fastcgi', backends: [`unix:${dir}/php.sock`] } },
    }, { dir });
    const ready = await daemon.waitForLog((l) => l.kind === 'ready');
    privateDir = String(ready.runtime_dir);
  });
  after(() => scope.run());

  const bodyFiles = (): string[] => readdirSync(privateDir).filter((n) => n.startsWith('body-'));

  async function fpmStatus(): Promise<Record<string, number>> {
    const r = await httpRequest(`${url}/status?json`);
    assert.equal(r.status, 200, r.text);
    return JSON.parse(r.text) as Record<string, number>;
  }

  for (const [what, size] of [['1 byte', 1], ['100 KiB (memory, then a file)', 100 * 1024], ['5 MiB', 5 * 1024 * 1024]] as const) {
    it(`a chunked upload of ${what} reaches PHP whole, with its CONTENT_LENGTH; no temp file stays`, async () => {
      const block = seededBytes(Math.min(size, 7919), size);
      const hash = createHash('sha256');
      const r = await httpUpload(`${url}/echo.php`, block, size, { chunked: true, onChunk: (c) => hash.update(c) });
      assert.equal(r.status, 200, r.text);
      const seen = JSON.parse(r.text) as { body_length: number; body_sha256: string; cgi: Record<string, string> };
      assert.equal(seen.body_length, size);
      assert.equal(seen.body_sha256, hash.digest('hex'));
      assert.equal(seen.cgi.CONTENT_LENGTH, String(size));
      assert.deepEqual(bodyFiles(), []);
    });
  }

  it(`a chunked body over max_body_size is answered 413 ${ErrorCodes.HTTP_BODY_TOO_LARGE}, once, and its file removed`, async () => {
    const since = daemon.mark();
    const c = new RawConn({ port });
    await c.connected;
    const size = MAX_BODY + 1;
    c.write(`POST /echo.php HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n${size.toString(16)}\r\n`);
    c.write(Buffer.alloc(size, 0x61));
    const r = await c.waitClose(20_000);
    const text = r.received.toString('latin1');
    assert.match(text, /^HTTP\/1\.1 413 /, text);
    assert.equal(text.match(/HTTP\/1\.1 \d{3} /g)?.length, 1, 'one answer');
    assert.match(text, new RegExp(ErrorCodes.HTTP_BODY_TOO_LARGE));
    await daemon.waitForLog((l) => l.code === ErrorCodes.HTTP_BODY_TOO_LARGE, { since });
    assert.deepEqual(bodyFiles(), []);
  });

  for (const expect of ['', 'Expect: 100-continue\r\n']) {
    it(`a Content-Length over max_body_size is answered 413 before any body byte is sent${expect ? ', with no 100 Continue first' : ''}`, async () => {
      const c = new RawConn({ port });
      await c.connected;
      c.write(`POST /echo.php HTTP/1.1\r\nHost: x\r\n${expect}Content-Length: ${MAX_BODY + 1}\r\n\r\n`);
      const text = (await c.waitData((b) => b.includes('\r\n\r\n'), 10_000)).toString('latin1');
      c.destroy();
      assert.match(text, /^HTTP\/1\.1 413 /, text);
      assert.match(text, /connection: close/i);
    });
  }

  it('Expect: 100-continue for an admissible body gets the go-ahead and the body through', async () => {
    const c = new RawConn({ port });
    await c.connected;
    c.write('POST /echo.php HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\nConnection: close\r\n\r\n');
    assert.match((await c.waitData((b) => b.includes('\r\n\r\n'), 10_000)).toString('latin1'), /^HTTP\/1\.1 100 Continue\r\n\r\n/);
    c.write('hello');
    const r = await c.waitClose(10_000);
    assert.match(r.received.toString('latin1'), /\r\nHTTP\/1\.1 200 OK\r\n[\s\S]*"body_length":5/);
  });

  it('a client that gives up mid-upload held no worker while sending and leaves no temp file', async () => {
    const before = await fpmStatus();
    const c = new RawConn({ port });
    await c.connected;
    c.write(`POST /echo.php HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n${(1024 * 1024).toString(16)}\r\n`);
    c.write(Buffer.alloc(200 * 1024, 0x62)); // past body_buffer_size: on disk now
    await waitFor(() => bodyFiles().length === 1, { timeout: 10_000, what: 'the body spilling to a temp file' });
    assert.equal(statSync(join(privateDir, bodyFiles()[0]!)).mode & 0o777, 0o600, 'only the daemon may read an upload');
    const during = await fpmStatus();
    assert.equal(during['active processes'], 0, 'no worker waits for a body still arriving');
    assert.equal(during['accepted conn'], before['accepted conn'], 'the pool has not seen the request');
    c.destroy();
    await waitFor(() => bodyFiles().length === 0, { timeout: 10_000, what: 'the temp file to go' });
    const afterAbort = await fpmStatus();
    assert.equal(afterAbort['accepted conn'], before['accepted conn']);
    assert.equal(afterAbort['active processes'], 0);
    assert.equal((await httpRequest(`${url}/hello.php`)).status, 200);
  });
});
