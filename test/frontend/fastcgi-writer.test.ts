/**
 * The FastCGI writer's output for a backend's STDOUT records, on a socket that records
 * its writes: a small response read whole in one backend chunk leaves as that chunk's
 * bytes (ids rewritten) in one plain write; the backend's end records join the last
 * small record they follow.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { FcgiDecoder, ParamsCollector, RecordType, encodeEndRequest, encodeRecord, ProtocolStatus, Role, type FcgiRecord } from '../../src/protocol/fastcgi.js';
import { DEFAULT_PARAMS_LIMITS } from '../../src/protocol/params.js';
import { FcgiRequest, type FcgiConnection } from '../../src/frontend/fastcgi-request.js';
import { FcgiWriter } from '../../src/frontend/fastcgi-writer.js';
import { closeTurn, openTurn } from '../../src/util/turn.js';

/** What the writer uses of a socket; every write is kept as it was made. */
class RecordingSocket {
  writes: Buffer[] = [];
  corks = 0;
  writableLength = 0;
  destroyed = false;
  write(b: Buffer): boolean {
    this.writes.push(b);
    return true;
  }
  cork(): void {
    this.corks++;
  }
  uncork(): void {}
}

function rig(): { socket: RecordingSocket; writer: FcgiWriter; request: FcgiRequest } {
  const socket = new RecordingSocket();
  const writer = new FcgiWriter(socket as unknown as Socket, () => false, { activeAt: 0 });
  const session = { writer } as unknown as FcgiConnection;
  const request = new FcgiRequest(session, 7, Role.Responder, true, new ParamsCollector(DEFAULT_PARAMS_LIMITS));
  request.state = 'running';
  return { socket, writer, request };
}

/**
 * A backend's response for request id 1: STDOUT records, the empty STDOUT, END_REQUEST;
 * with `emptyStdout` false as php-cgi sends it, without the empty STDOUT.
 */
function backendResponse(bodies: Buffer[], emptyStdout = true): { chunk: Buffer; stdout: Buffer[]; end: Buffer } {
  const stdout = bodies.map((b) => encodeRecord(RecordType.Stdout, 1, b));
  const closing = encodeEndRequest(1, 0, ProtocolStatus.RequestComplete);
  const end = emptyStdout ? Buffer.concat([encodeRecord(RecordType.Stdout, 1), closing]) : closing;
  const chunk = Buffer.concat([...stdout, end]);
  // Views of the one chunk, as the upstream decoder hands them on.
  let at = 0;
  const views = stdout.map((r) => chunk.subarray(at, (at += r.length)));
  return { chunk, stdout: views, end: chunk.subarray(at) };
}

function decode(bytes: Buffer): Array<[number, number, number]> {
  const out: Array<[number, number, number]> = [];
  new FcgiDecoder((r: FcgiRecord) => out.push([r.type, r.requestId, r.content.length])).push(bytes);
  return out;
}

const RECORDS: Array<[number, number, number]> = [
  [RecordType.Stdout, 7, 8184],
  [RecordType.Stdout, 7, 560],
  [RecordType.Stdout, 7, 0],
  [RecordType.EndRequest, 7, 8],
];

const isViewOf = (b: Buffer, chunk: Buffer, from: number, to: number): boolean =>
  b.buffer === chunk.buffer && b.byteOffset === chunk.byteOffset + from && b.length === to - from;

test('a small response read whole in one backend chunk leaves in one plain write: the chunk itself, ids rewritten', () => {
  const { socket, writer, request } = rig();
  const { chunk, stdout, end } = backendResponse([Buffer.from('Content-Type: text/html\r\n\r\n' + 'x'.repeat(100))]);
  openTurn();
  for (const raw of stdout) assert.equal(writer.record(request, raw), true);
  writer.held(request, true, end);
  closeTurn();
  assert.equal(socket.writes.length, 1, 'one write');
  assert.equal(socket.corks, 0, 'not corked: a plain write, no writev');
  assert.ok(isViewOf(socket.writes[0]!, chunk, 0, chunk.length), 'a view of the backend chunk, not a copy');
  assert.deepEqual(decode(socket.writes[0]!), [
    [RecordType.Stdout, 7, 127],
    [RecordType.Stdout, 7, 0],
    [RecordType.EndRequest, 7, 8],
  ]);
});

test("php-cgi's small response (no empty STDOUT before its END_REQUEST) leaves as its chunk in one plain write, as php-fpm sends it", () => {
  const { socket, writer, request } = rig();
  const { chunk, stdout, end } = backendResponse([Buffer.from('Content-Type: text/html\r\n\r\n' + 'x'.repeat(100))], false);
  openTurn();
  for (const raw of stdout) writer.record(request, raw);
  writer.held(request, true, end);
  closeTurn();
  assert.equal(socket.writes.length, 1, 'one write');
  assert.ok(isViewOf(socket.writes[0]!, chunk, 0, chunk.length), 'a view of the backend chunk, not a copy');
  assert.deepEqual(decode(socket.writes[0]!), [
    [RecordType.Stdout, 7, 127],
    [RecordType.EndRequest, 7, 8],
  ]);
});

test('a larger response: the large record at once, the last small one with the backend end as one view', () => {
  const { socket, writer, request } = rig();
  const { chunk, stdout, end } = backendResponse([Buffer.alloc(8184, 0x61), Buffer.alloc(560, 0x62)]);
  openTurn();
  for (const raw of stdout) writer.record(request, raw);
  assert.equal(socket.writes.length, 1, 'the large record at once (corked with the rest of the turn)');
  writer.held(request, true, end);
  closeTurn();
  assert.equal(socket.writes.length, 2);
  assert.ok(isViewOf(socket.writes[1]!, chunk, stdout[1]!.byteOffset - chunk.byteOffset, chunk.length), 'the last record and the end: one view of the chunk');
  assert.deepEqual(decode(Buffer.concat(socket.writes)), RECORDS);
});

test('the backend end in another chunk: the held record, then the end, the same records', () => {
  const { socket, writer, request } = rig();
  const { stdout, end } = backendResponse([Buffer.alloc(8184, 0x61), Buffer.alloc(560, 0x62)]);
  openTurn();
  for (const raw of stdout) writer.record(request, raw);
  writer.held(request, true, Buffer.from(end)); // not next to the records
  closeTurn();
  assert.deepEqual(decode(Buffer.concat(socket.writes)), RECORDS);
});

test('small records side by side in a backend chunk are held as one view and leave at the end of the turn', () => {
  const { socket, writer, request } = rig();
  const { chunk, stdout } = backendResponse([Buffer.alloc(300, 0x61), Buffer.alloc(300, 0x62)]);
  openTurn();
  for (const raw of stdout) writer.record(request, raw);
  assert.equal(socket.writes.length, 0);
  closeTurn();
  assert.equal(socket.writes.length, 1);
  assert.ok(isViewOf(socket.writes[0]!, chunk, 0, stdout[0]!.length + stdout[1]!.length), 'one view of both');
  assert.deepEqual(decode(socket.writes[0]!), [
    [RecordType.Stdout, 7, 300],
    [RecordType.Stdout, 7, 300],
  ]);
});
