import { test } from 'node:test';
import assert from 'node:assert/strict';
import { accessFields, createAccessLogger, STATUS_CLIENT_CLOSED } from '../../src/log/access.js';
import { ErrorCodes, ProxyError } from '../../src/errors.js';
import { Exchange, type ResponseSink } from '../../src/protocol/exchange.js';
import { CgiParams } from '../../src/protocol/params.js';
import { captureLogger, waitForLine } from './fakes.js';

const sink: ResponseSink = { head() {}, body: () => true, stderr() {}, end() {}, fail: () => 0 };

test('an error is logged with its status and code', () => {
  const ex = new Exchange(CgiParams.fromObject({ REQUEST_METHOD: 'POST', REQUEST_URI: '/upload' }), sink, 'fastcgi', 100);
  ex.pool = 'php';
  ex.respondError(new ProxyError(ErrorCodes.QUEUE_FULL, 503, 'queue full', 1));
  const f = accessFields(ex, 112.34);
  assert.deepEqual(
    { method: f.method, uri: f.uri, status: f.status, error: f.error, ms: f.ms, pool: f.pool, aborted: f.aborted },
    { method: 'POST', uri: '/upload', status: 503, error: 'ERR_QUEUE_FULL', ms: 12.3, pool: 'php', aborted: undefined },
  );
});

test('a client that left before the head is logged as 499; no REQUEST_URI falls back to SCRIPT_NAME etc.', () => {
  const ex = new Exchange(CgiParams.fromObject({ REQUEST_METHOD: 'GET', SCRIPT_NAME: '/a.php', PATH_INFO: '/b', QUERY_STRING: 'q=1' }), sink, 'scgi', 0);
  ex.abort();
  const f = accessFields(ex, 1);
  assert.equal(f.status, STATUS_CLIENT_CLOSED);
  assert.equal(f.aborted, true);
  assert.equal(f.uri, '/a.php/b?q=1');
});

test('request variables are bytes; the log shows them as UTF-8 text', () => {
  const latin1 = Buffer.from('/café', 'utf8').toString('latin1');
  const ex = new Exchange(CgiParams.fromObject({ REQUEST_METHOD: 'GET', REQUEST_URI: latin1 }), sink, 'http', 0);
  assert.equal(accessFields(ex, 0).uri, '/café');
});

test('the access logger is one shared function, absent when disabled', async () => {
  const { logger, lines } = captureLogger('info');
  const log = createAccessLogger(logger, true)!;
  assert.equal(typeof log, 'function');
  assert.equal(createAccessLogger(logger, false), undefined);
  assert.equal(createAccessLogger(captureLogger('warn').logger, true), undefined, 'info disabled: nothing to do per request');
  const ex = new Exchange(CgiParams.fromObject({ REQUEST_METHOD: 'HEAD', REQUEST_URI: '/' }), sink, 'http', performance.now());
  ex.onFinish = log;
  ex.respondHead({ status: 204, reason: 'No Content', headers: [], raw: Buffer.alloc(0) });
  ex.respondEnd();
  const line = await waitForLine(lines, (l) => l.kind === 'access');
  assert.equal(line.status, 204);
  assert.equal(line.msg, 'HEAD / 204');
});
