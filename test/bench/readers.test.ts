// Reply readers: whatever way the reply bytes are split into reads, the same status,
// body size and completion come out.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HttpResponseParser } from '../../src/bench/http-response.js';
import { FcgiReplyReader, HttpReplyReader, ScgiReplyReader, type ReplyReader } from '../../src/bench/readers.js';
import { RecordType, encodeEndRequest, encodeRecord, ProtocolStatus } from '../../src/protocol/fastcgi.js';

interface Outcome {
  status: number;
  bodyBytes: number;
  completeAt: number;
  eofCompletes: boolean;
}

/** Feeds `bytes` as two reads split at `at`; returns when it completed (-1: not before EOF). */
function feed(reader: ReplyReader, bytes: Buffer, at: number): Outcome {
  reader.reset(true);
  let completeAt = -1;
  const parts = [bytes.subarray(0, at), bytes.subarray(at)];
  let seen = 0;
  for (const p of parts) {
    if (p.length === 0) continue;
    if (reader.push(p) && completeAt < 0) completeAt = seen + p.length;
    seen += p.length;
  }
  return { status: reader.status, bodyBytes: reader.bodyBytes, completeAt, eofCompletes: completeAt < 0 && reader.eof() };
}

function everySplit(reader: () => ReplyReader, bytes: Buffer, want: Omit<Outcome, 'completeAt'> & { complete: boolean }): void {
  for (let at = 0; at <= bytes.length; at++) {
    const o = feed(reader(), bytes, at);
    assert.equal(o.status, want.status, `split at ${at}`);
    assert.equal(o.bodyBytes, want.bodyBytes, `split at ${at}`);
    assert.equal(o.completeAt >= 0, want.complete, `split at ${at}`);
    if (!want.complete) assert.equal(o.eofCompletes, want.eofCompletes, `split at ${at}`);
  }
}

test('FastCGI: head across STDOUT records, body counted, END_REQUEST completes', () => {
  const out = Buffer.concat([
    encodeRecord(RecordType.Stdout, 1, Buffer.from('Status: 404 Not Found\r\nContent-Ty')),
    encodeRecord(RecordType.Stderr, 1, Buffer.from('warning')),
    encodeRecord(RecordType.Stdout, 1, Buffer.from('pe: text/plain\r\n\r\nhello')),
    encodeRecord(RecordType.Stdout, 1, Buffer.from(' world')),
    encodeRecord(RecordType.Stdout, 1),
    encodeEndRequest(1, 0, ProtocolStatus.RequestComplete),
  ]);
  everySplit(() => new FcgiReplyReader(true), out, { status: 404, bodyBytes: 11, complete: true, eofCompletes: false });
});

test('FastCGI: END_REQUEST without a head, or garbage, throws (a protocol error)', () => {
  const r = new FcgiReplyReader(true);
  r.reset(true);
  assert.throws(() => r.push(encodeEndRequest(1, 0, ProtocolStatus.Overloaded)));
  r.reset(true);
  assert.throws(() => r.push(Buffer.from('HTTP/1.1 200 OK\r\n\r\n')));
  // A keep-alive reader carries on after a reset without a fresh decoder.
  r.reset(true);
  const one = Buffer.concat([encodeRecord(RecordType.Stdout, 1, Buffer.from('\r\n')), encodeEndRequest(1, 0, 0)]);
  assert.equal(r.push(one), true);
  r.reset(false);
  assert.equal(r.push(one), true);
  assert.equal(r.status, 200);
});

test('HTTP: Content-Length, chunked, until-close, HEAD and 204', () => {
  const cl = Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789');
  everySplit(() => new HttpReplyReader(false, true), cl, { status: 200, bodyBytes: 10, complete: true, eofCompletes: false });
  const chunked = Buffer.from('HTTP/1.1 503 Busy\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n');
  everySplit(() => new HttpReplyReader(false, true), chunked, { status: 503, bodyBytes: 11, complete: true, eofCompletes: false });
  const close = Buffer.from('HTTP/1.0 302 Found\r\nLocation: /x\r\n\r\nbody');
  everySplit(() => new HttpReplyReader(false, true), close, { status: 302, bodyBytes: 4, complete: false, eofCompletes: true });
  const head = Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n');
  everySplit(() => new HttpReplyReader(true, true), head, { status: 200, bodyBytes: 0, complete: true, eofCompletes: false });
  const interim = Buffer.from('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n');
  everySplit(() => new HttpReplyReader(false, true), interim, { status: 204, bodyBytes: 0, complete: true, eofCompletes: false });
});

test('HTTP: keep-alive follows the server (Connection: close, HTTP/1.0)', () => {
  const p = new HttpResponseParser();
  p.reset(false);
  p.push(Buffer.from('HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n'));
  assert.equal(p.keepAlive, false);
  p.reset(false);
  p.push(Buffer.from('HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n'));
  assert.equal(p.keepAlive, true);
  p.reset(false);
  p.push(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n'));
  assert.equal(p.keepAlive, true);
  assert.equal(new HttpReplyReader(false, false).reusable, false, 'the bench asked for Connection: close');
});

test('HTTP: bad status line or framing throws', () => {
  const p = new HttpResponseParser();
  p.reset(false);
  assert.throws(() => p.push(Buffer.from('Status: 200\r\n\r\n')));
  p.reset(false);
  assert.throws(() => p.push(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n')));
  p.reset(false);
  assert.throws(() => p.push(Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n')));
});

test('SCGI: a CGI head or an HTTP status line; the body runs to EOF', () => {
  const cgi = Buffer.from('Status: 503 Service Unavailable\r\nContent-Type: text/plain\r\n\r\nbusy');
  everySplit(() => new ScgiReplyReader(), cgi, { status: 503, bodyBytes: 4, complete: false, eofCompletes: true });
  const http = Buffer.from('HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n\r\nnope!');
  everySplit(() => new ScgiReplyReader(), http, { status: 404, bodyBytes: 5, complete: false, eofCompletes: true });
  const cut = new ScgiReplyReader();
  cut.reset();
  cut.push(Buffer.from('Status: 200 OK\r\n'));
  assert.equal(cut.eof(), false, 'EOF inside the head is not a reply');
});
