// The HTTP listener's client timeouts are the configured ones, as on FastCGI and SCGI:
// a head that trickles in is cut header_timeout after its first byte (within a second,
// not when node's 30 s connection check comes round), and a stalled request body is cut
// by body_timeout, not by the much longer idle_timeout.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { startDaemon } from '../helpers/daemon.js';
import { PHP_FIXTURES, PHP_FLAGS } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';

/** Resolves with the ms from `since` to the socket's close. */
function closedAfter(s: Socket, since: () => number): Promise<number> {
  return new Promise((resolve) => s.once('close', () => resolve(Date.now() - since())));
}

test('HTTP: header_timeout cuts a trickling head within a second of it; body_timeout cuts a stalled body', { timeout: 60_000 }, async (t) => {
  const port = await freePort();
  const d = await startDaemon(t, {
    control_socket: 'off',
    listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'php', document_root: PHP_FIXTURES, header_timeout: '3s', body_timeout: '2s', idle_timeout: '40s' }],
    pools: { php: { command: ['php-cgi', ...PHP_FLAGS], max_children: 1 } },
    log: { level: 'info', access: true },
  });

  // A head that keeps trickling: one header byte every 200 ms never completes it.
  const head = connect(port, '127.0.0.1');
  await new Promise((r) => head.once('connect', r));
  let firstByte = 0;
  head.on('error', () => {});
  const headClosed = closedAfter(head, () => firstByte);
  let answer = '';
  head.on('data', (b: Buffer) => (answer += b.toString('latin1')));
  firstByte = Date.now();
  head.write('GET /hello.php HTTP/1.1\r\nHost: x\r\nX-Slow: ');
  const trickle = setInterval(() => head.writable && head.write('a'), 200);
  const headMs = await headClosed;
  clearInterval(trickle);
  t.diagnostic(`head cut after ${headMs} ms (header_timeout 3000)`);
  assert.ok(headMs >= 2900 && headMs <= 4000, `the trickling head was cut after ${headMs} ms, not within a second of header_timeout`);
  assert.match(answer, /^HTTP\/1\.1 408 /, 'answered 408 before the close');

  // A body that stalls after 10 of 100 bytes: cut at body_timeout (2 s), long before idle_timeout (40 s).
  const mark = d.mark();
  const body = connect(port, '127.0.0.1');
  body.on('error', () => {});
  await new Promise((r) => body.once('connect', r));
  let sent = 0;
  const bodyClosed = closedAfter(body, () => sent);
  body.write('POST /echo.php HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: 100\r\n\r\n0123456789');
  sent = Date.now();
  const bodyMs = await Promise.race([bodyClosed, new Promise<number>((r) => setTimeout(() => r(-1), 10_000))]);
  body.destroy();
  t.diagnostic(`stalled body cut after ${bodyMs} ms (body_timeout 2000, idle_timeout 40000)`);
  assert.ok(bodyMs >= 1900 && bodyMs <= 3500, `the stalled body was cut after ${bodyMs} ms (-1: not within 10 s)`);
  await d.waitForLog((l) => l.code === 'ERR_HTTP_BODY_TIMEOUT', { since: mark, timeout: 2000, what: 'the body-timeout warning' });
});

test('HTTP: the first head is due header_timeout after the accept: a client silent past it is closed before its head', { timeout: 60_000 }, async (t) => {
  const port = await freePort();
  await startDaemon(t, {
    control_socket: 'off',
    listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'php', document_root: PHP_FIXTURES, header_timeout: '1s', idle_timeout: '40s' }],
    pools: { php: { command: ['php-cgi', ...PHP_FLAGS], max_children: 1 } },
    log: { level: 'info' },
  });
  const s = connect(port, '127.0.0.1');
  s.on('error', () => {});
  await new Promise((r) => s.once('connect', r));
  let answer = '';
  s.on('data', (b: Buffer) => (answer += b.toString('latin1')));
  const closed = new Promise<void>((r) => s.once('close', () => r()));
  // Silent for five times header_timeout, then a whole head: counted from the first byte
  // (as node's headersTimeout does) it would be served.
  const late = setTimeout(() => s.writable && s.write('GET /hello.php HTTP/1.1\r\nHost: x\r\n\r\n'), 5000);
  const outcome = await Promise.race([closed.then(() => 'closed'), new Promise<string>((r) => setTimeout(() => r('open'), 15_000))]);
  clearTimeout(late);
  s.destroy();
  assert.equal(outcome, 'closed');
  // Closed by our deadline (no answer: no byte came) or by node's own check of the same
  // timeout (a 408), whichever runs first; never served.
  assert.ok(answer === '' || /^HTTP\/1\.1 408 /.test(answer), answer);
});
