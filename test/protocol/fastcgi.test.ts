/**
 * FastCGI codec: exact bytes (in the manner of Go's net/http/fcgi tests), decoder
 * behaviour, and the PARAMS collector's limits. Properties and fuzzing live in
 * fastcgi-fuzz.test.ts.
 */
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { ErrorCodes, ProtocolError } from '../../src/errors.js';
import {
  FCGI_KEEP_CONN,
  FCGI_MAX_CONTENT,
  FcgiDecoder,
  FcgiValueName,
  ParamsCollector,
  ProtocolStatus,
  RecordType,
  Role,
  decodeNameValues,
  encodeAbortRequest,
  encodeBeginRequest,
  encodeEndRequest,
  encodeGetValues,
  encodeGetValuesResult,
  encodeNameValues,
  encodeRecord,
  encodeRequestHead,
  encodeStream,
  encodeUnknownType,
  joinAdjacent,
  setRequestIds,
  parseBeginRequest,
  parseEndRequest,
  parseUnknownType,
  recordTypeName,
  type FcgiRecord,
} from '../../src/protocol/fastcgi.js';
import { CgiParams, DEFAULT_PARAMS_LIMITS } from '../../src/protocol/params.js';

const bytes = (...parts: Array<number[] | Buffer | string>): Buffer =>
  Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'latin1') : Buffer.from(p))));

function decodeAll(...chunks: Buffer[]): FcgiRecord[] {
  const out: FcgiRecord[] = [];
  const d = new FcgiDecoder((r) => out.push(r));
  for (const c of chunks) d.push(c);
  assert.equal(d.midRecord, false, 'stream ends on a record boundary');
  return out;
}

function throwsCode(fn: () => unknown, code: string): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof ProtocolError, `expected ProtocolError, got ${String(err)}`);
    assert.equal(err.code, code);
    return true;
  });
}

/** True when `view` lies inside `whole`'s bytes (small Buffers share pooled slabs, so comparing .buffer alone is not enough). */
function isViewOf(view: Buffer, whole: Buffer): boolean {
  return (
    view.buffer === whole.buffer &&
    view.byteOffset >= whole.byteOffset &&
    view.byteOffset + view.length <= whole.byteOffset + whole.length
  );
}

const BIG_LIMITS = { maxBytes: 1 << 30, maxCount: 1 << 20 };

describe('record header and padding', () => {
  // content length → [header bytes 4..6] and total size, padding = -len & 7.
  const table: Array<{ len: number; hdr: number[]; total: number }> = [
    { len: 0, hdr: [0x00, 0x00, 0], total: 8 },
    { len: 1, hdr: [0x00, 0x01, 7], total: 16 },
    { len: 7, hdr: [0x00, 0x07, 1], total: 16 },
    { len: 8, hdr: [0x00, 0x08, 0], total: 16 },
    { len: 9, hdr: [0x00, 0x09, 7], total: 24 },
    { len: 255, hdr: [0x00, 0xff, 1], total: 264 },
    { len: 256, hdr: [0x01, 0x00, 0], total: 264 },
    { len: 65528, hdr: [0xff, 0xf8, 0], total: 65536 },
    { len: 65535, hdr: [0xff, 0xff, 1], total: 65544 },
  ];
  for (const { len, hdr, total } of table) {
    test(`encodeRecord with ${len} content bytes`, () => {
      const content = Buffer.alloc(len, 0xab);
      const rec = encodeRecord(RecordType.Stdout, 0x0102, content);
      assert.equal(rec.length, total);
      assert.deepEqual([...rec.subarray(0, 8)], [1, RecordType.Stdout, 0x01, 0x02, ...hdr, 0]);
      assert.ok(rec.subarray(8, 8 + len).equals(content));
      assert.ok(rec.subarray(8 + len).every((b) => b === 0), 'padding is zeros');
      assert.equal(rec.length % 8, 0);
    });
  }

  test('empty record for every type and request id 0xFFFF', () => {
    for (let t = 1; t <= 11; t++) {
      assert.deepEqual([...encodeRecord(t, 0xffff)], [1, t, 0xff, 0xff, 0, 0, 0, 0]);
    }
  });

  test('content over 65535 bytes is refused', () => {
    assert.throws(() => encodeRecord(RecordType.Stdout, 1, Buffer.alloc(FCGI_MAX_CONTENT + 1)), RangeError);
  });
});

describe('name-value lengths (Go sizeTests)', () => {
  const sizes: Array<[number, number[]]> = [
    [0, [0x00]],
    [1, [0x01]],
    [127, [0x7f]],
    [128, [0x80, 0x00, 0x00, 0x80]],
    [1000, [0x80, 0x00, 0x03, 0xe8]],
    [65535, [0x80, 0x00, 0xff, 0xff]],
    [65536, [0x80, 0x01, 0x00, 0x00]],
    [33554431, [0x81, 0xff, 0xff, 0xff]],
  ];
  for (const [n, prefix] of sizes) {
    test(`value length ${n}`, () => {
      const value = 'v'.repeat(n);
      const body = encodeNameValues(new CgiParams(['N', value]));
      assert.deepEqual([...body.subarray(0, 1 + prefix.length)], [0x01, ...prefix]);
      assert.equal(body.length, 1 + prefix.length + 1 + n);
      const back = decodeNameValues(body, BIG_LIMITS);
      assert.equal(back.get('N')?.length, n);
    });
    if (n < 70000) {
      test(`name length ${n}`, () => {
        const name = 'n'.repeat(n);
        const body = encodeNameValues(new CgiParams([name, 'v']));
        assert.deepEqual([...body.subarray(0, prefix.length + 1)], [...prefix, 0x01]);
        assert.deepEqual(decodeNameValues(body, BIG_LIMITS).pairs, [name, 'v']);
      });
    }
  }

  test('exact bytes of a small pair list', () => {
    const body = encodeNameValues(new CgiParams(['A', '1', 'EMPTY', '', '', 'x']));
    assert.deepEqual(body, bytes([1, 1], 'A1', [5, 0], 'EMPTY', [0, 1], 'x'));
  });

  test('127/128 boundary on both name and value', () => {
    const n127 = 'a'.repeat(127);
    const n128 = 'b'.repeat(128);
    const body = encodeNameValues(new CgiParams([n127, n128, n128, n127]));
    assert.deepEqual(
      body,
      bytes([0x7f, 0x80, 0, 0, 0x80], n127, n128, [0x80, 0, 0, 0x80, 0x7f], n128, n127),
    );
    assert.deepEqual(decodeNameValues(body, BIG_LIMITS).pairs, [n127, n128, n128, n127]);
  });

  test('a 1-byte-encodable length written with 4 bytes is still decoded', () => {
    // The spec allows the long form for any length; some encoders always use it.
    const body = bytes([0x80, 0, 0, 1, 0x80, 0, 0, 2], 'Nvv');
    assert.deepEqual(decodeNameValues(body, BIG_LIMITS).pairs, ['N', 'vv']);
  });

  test('latin1: every byte value survives as one char', () => {
    const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const body = bytes([3, 0x80, 0, 1, 0], 'KEY', all);
    const p = decodeNameValues(body, BIG_LIMITS);
    const v = p.get('KEY')!;
    assert.equal(v.length, 256);
    assert.ok(Buffer.from(v, 'latin1').equals(all));
    assert.ok(encodeNameValues(p).equals(body));
  });

  test('UTF-8 bytes arrive as latin1 and go back out unchanged', () => {
    const utf8 = Buffer.from('/caf\u00e9/\u{1f600}', 'utf8');
    const body = bytes([11, utf8.length], 'REQUEST_URI', utf8);
    const p = decodeNameValues(body, BIG_LIMITS);
    assert.equal(Buffer.from(p.get('REQUEST_URI')!, 'latin1').toString('utf8'), '/caf\u00e9/\u{1f600}');
    assert.ok(encodeNameValues(p).equals(body));
  });
});

describe('stream encoding', () => {
  test('66,000 bytes split in two records plus the empty closer (Go streamTests)', () => {
    const data = Buffer.alloc(66000);
    const out: Buffer[] = [];
    encodeStream(RecordType.Stdin, 300, data, out);
    out.push(encodeRecord(RecordType.Stdin, 300));
    const expected = bytes(
      [1, RecordType.Stdin, 0x01, 0x2c, 0xff, 0xff, 1, 0],
      Buffer.alloc(65536),
      [1, RecordType.Stdin, 0x01, 0x2c, 0x01, 0xd1, 7, 0],
      Buffer.alloc(472),
      [1, RecordType.Stdin, 0x01, 0x2c, 0, 0, 0, 0],
    );
    assert.ok(Buffer.concat(out).equals(expected));
  });

  test('large data goes out as views, padding from one shared zero buffer', () => {
    const data = Buffer.alloc(66000, 7);
    const out: Buffer[] = [];
    encodeStream(RecordType.Stdout, 1, data, out);
    // [header, view, pad, header, view, pad]
    assert.equal(out.length, 6);
    assert.ok(isViewOf(out[1]!, data) && out[1]!.byteOffset === data.byteOffset, 'first record is a view');
    assert.equal(out[1]!.length, 65535);
    assert.ok(isViewOf(out[4]!, data) && out[4]!.byteOffset === data.byteOffset + 65535, 'second record is a view');
    assert.equal(out[2]!.length, 1);
    assert.equal(out[5]!.length, 7);
    assert.ok(out[2]!.buffer === out[5]!.buffer && out[2]!.byteOffset === out[5]!.byteOffset, 'padding shares one buffer');
    const again: Buffer[] = [];
    encodeStream(RecordType.Stdout, 2, Buffer.alloc(2001), again);
    assert.equal(again.length, 3);
    assert.ok(again[2]!.buffer === out[2]!.buffer && again[2]!.byteOffset === out[2]!.byteOffset, 'shared across calls');
    assert.ok(out[2]!.every((b) => b === 0) && out[5]!.every((b) => b === 0));
  });

  test('data of exactly 65535, 65536 and 65528 bytes', () => {
    const cases: Array<[number, number[]]> = [
      [65535, [65535]],
      [65536, [65535, 1]],
      [65528, [65528]],
      [65535 * 3, [65535, 65535, 65535]],
    ];
    for (const [n, lens] of cases) {
      const out: Buffer[] = [];
      encodeStream(RecordType.Stdout, 1, Buffer.alloc(n, 1), out);
      const recs = decodeAll(Buffer.concat(out));
      assert.deepEqual(
        recs.map((r) => r.content.length),
        lens,
        `${n} bytes`,
      );
    }
  });

  test('small data is one buffer with exact bytes', () => {
    const out: Buffer[] = [];
    encodeStream(RecordType.Stdout, 1, Buffer.from('hello'), out);
    assert.equal(out.length, 1);
    assert.deepEqual(out[0], bytes([1, 6, 0, 1, 0, 5, 3, 0], 'hello', [0, 0, 0]));
  });

  test('empty data appends nothing (the closer is the caller\'s)', () => {
    const out: Buffer[] = [];
    encodeStream(RecordType.Stdout, 1, Buffer.alloc(0), out);
    assert.equal(out.length, 0);
  });
});

describe('typed record bodies', () => {
  test('BEGIN_REQUEST', () => {
    const rec = encodeBeginRequest(1, Role.Responder, FCGI_KEEP_CONN);
    assert.deepEqual([...rec], [1, 1, 0, 1, 0, 8, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0]);
    const auth = encodeBeginRequest(0x1234, Role.Authorizer, 0);
    assert.deepEqual([...auth], [1, 1, 0x12, 0x34, 0, 8, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0]);
    const [r] = decodeAll(rec);
    assert.deepEqual(parseBeginRequest(r!.content), { role: Role.Responder, flags: FCGI_KEEP_CONN });
    assert.deepEqual(parseBeginRequest(Buffer.from([0, 3, 0, 0, 0, 0, 0, 0])), { role: Role.Filter, flags: 0 });
  });

  test('END_REQUEST', () => {
    const rec = encodeEndRequest(258, 0x01020304, ProtocolStatus.Overloaded);
    assert.deepEqual([...rec], [1, 3, 1, 2, 0, 8, 0, 0, 1, 2, 3, 4, 2, 0, 0, 0]);
    assert.deepEqual(parseEndRequest(rec.subarray(8)), { appStatus: 0x01020304, protocolStatus: 2 });
    // appStatus is unsigned 32-bit (exit status -1 arrives as 0xFFFFFFFF).
    const neg = encodeEndRequest(1, -1, ProtocolStatus.RequestComplete);
    assert.deepEqual([...neg.subarray(8)], [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
    assert.equal(parseEndRequest(neg.subarray(8)).appStatus, 0xffffffff);
    for (const s of [ProtocolStatus.CantMpxConn, ProtocolStatus.UnknownRole]) {
      assert.equal(parseEndRequest(encodeEndRequest(1, 0, s).subarray(8)).protocolStatus, s);
    }
  });

  test('ABORT_REQUEST', () => {
    assert.deepEqual([...encodeAbortRequest(5)], [1, 2, 0, 5, 0, 0, 0, 0]);
  });

  test('UNKNOWN_TYPE', () => {
    const rec = encodeUnknownType(42);
    assert.deepEqual([...rec], [1, 11, 0, 0, 0, 8, 0, 0, 42, 0, 0, 0, 0, 0, 0, 0]);
    assert.equal(parseUnknownType(rec.subarray(8)), 42);
  });

  test('GET_VALUES and GET_VALUES_RESULT', () => {
    const q = encodeGetValues([FcgiValueName.MaxConns, FcgiValueName.MaxReqs, FcgiValueName.MpxsConns]);
    // 14+13+15 name bytes + 6 length bytes = 48 content bytes, no padding.
    assert.deepEqual(
      q,
      bytes([1, 9, 0, 0, 0, 48, 0, 0], [14, 0], 'FCGI_MAX_CONNS', [13, 0], 'FCGI_MAX_REQS', [15, 0], 'FCGI_MPXS_CONNS'),
    );
    const [r] = decodeAll(q);
    assert.equal(r!.type, RecordType.GetValues);
    assert.equal(r!.requestId, 0);
    assert.deepEqual(decodeNameValues(r!.content, DEFAULT_PARAMS_LIMITS).pairs, [
      'FCGI_MAX_CONNS',
      '',
      'FCGI_MAX_REQS',
      '',
      'FCGI_MPXS_CONNS',
      '',
    ]);
    const a = encodeGetValuesResult(new CgiParams(['FCGI_MAX_CONNS', '1024', 'FCGI_MPXS_CONNS', '1']));
    // 2+14+4 + 2+15+1 = 38 content bytes, 2 padding.
    assert.deepEqual(
      a,
      bytes([1, 10, 0, 0, 0, 38, 2, 0], [14, 4], 'FCGI_MAX_CONNS1024', [15, 1], 'FCGI_MPXS_CONNS1', [0, 0]),
    );
  });

  test('short typed bodies are refused', () => {
    throwsCode(() => parseBeginRequest(Buffer.alloc(7)), ErrorCodes.FCGI_BAD_RECORD);
    throwsCode(() => parseEndRequest(Buffer.alloc(3)), ErrorCodes.FCGI_BAD_RECORD);
    throwsCode(() => parseUnknownType(Buffer.alloc(0)), ErrorCodes.FCGI_BAD_RECORD);
  });

  test('record type names', () => {
    assert.equal(recordTypeName(RecordType.Stdout), 'STDOUT');
    assert.equal(recordTypeName(RecordType.GetValuesResult), 'GET_VALUES_RESULT');
    assert.equal(recordTypeName(99), 'UNKNOWN(99)');
  });
});

describe('request head', () => {
  test('exact bytes: BEGIN_REQUEST + PARAMS + empty PARAMS', () => {
    const head = encodeRequestHead(1, Role.Responder, FCGI_KEEP_CONN, new CgiParams(['REQUEST_METHOD', 'GET', 'X', '']));
    // pairs: 2+14+3 + 2+1+0 = 22 bytes, padding 2.
    assert.deepEqual(
      head,
      bytes(
        [1, 1, 0, 1, 0, 8, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0],
        [1, 4, 0, 1, 0, 22, 2, 0],
        [14, 3],
        'REQUEST_METHODGET',
        [1, 0],
        'X',
        [0, 0],
        [1, 4, 0, 1, 0, 0, 0, 0],
      ),
    );
  });

  test('no params: BEGIN_REQUEST and the empty PARAMS only', () => {
    const head = encodeRequestHead(7, Role.Responder, 0, new CgiParams());
    assert.deepEqual(head, bytes([1, 1, 0, 7, 0, 8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0], [1, 4, 0, 7, 0, 0, 0, 0]));
  });

  test('params over one record are split at pair boundaries', () => {
    const big = 'z'.repeat(140000);
    const params = new CgiParams(['SCRIPT_NAME', '/a.php', 'HTTP_X_BIG', big, 'LAST', '1']);
    const head = encodeRequestHead(3, Role.Responder, 0, params);
    const recs = decodeAll(head);
    // SCRIPT_NAME pair 19 bytes alone (the big pair does not fit after it), the
    // 140015-byte pair in 65535-byte pieces, its 8945-byte tail joined by LAST (7).
    assert.deepEqual(
      recs.map((r) => [r.type, r.requestId, r.content.length]),
      [
        [RecordType.BeginRequest, 3, 8],
        [RecordType.Params, 3, 19],
        [RecordType.Params, 3, 65535],
        [RecordType.Params, 3, 65535],
        [RecordType.Params, 3, 8952],
        [RecordType.Params, 3, 0],
      ],
    );
    assert.ok(Buffer.concat(recs.slice(1).map((r) => r.content)).equals(encodeNameValues(params)));
    const c = new ParamsCollector(BIG_LIMITS);
    let got: CgiParams | undefined;
    for (const r of recs.slice(1)) got = c.add(r.content);
    assert.deepEqual(got?.pairs, params.pairs);
  });

  // php-cgi refuses a PARAMS record whose content + padding passes 65535 and decodes each
  // record alone: 65,515..65,535 bytes of pairs used to go out as 65535 + padding 1, or
  // with a pair cut across two records, and php-cgi closed without an answer (502).
  test('exact headers around the 65535-byte boundary: content + padding within 65535, no pair cut', () => {
    // [content length, padding] of each PARAMS record for X=<value> then A=b
    // (pairs of 6 + value and 4 bytes).
    const cases: Array<{ value: number; records: Array<[number, number]> }> = [
      { value: 65509, records: [[65519, 1]] },
      { value: 65515, records: [[65525, 3]] },
      { value: 65525, records: [[65535, 0]] },
      { value: 65526, records: [[65532, 0], [4, 4]] },
      { value: 65529, records: [[65535, 0], [4, 4]] },
      // A pair longer than a record is the one case that straddles.
      { value: 65530, records: [[65535, 0], [5, 3]] },
    ];
    for (const { value, records } of cases) {
      const params = new CgiParams(['X', 'v'.repeat(value), 'A', 'b']);
      const head = encodeRequestHead(1, Role.Responder, 0, params);
      const got: Array<[number, number]> = [];
      for (let off = 16; ; ) {
        const cl = head.readUInt16BE(off + 4);
        const pad = head[off + 6]!;
        assert.equal(head[off + 1], RecordType.Params);
        off += 8 + cl + pad;
        if (cl === 0) {
          assert.equal(off, head.length);
          break;
        }
        assert.ok(cl + pad <= 65535, `record of ${cl} + ${pad} padding`);
        got.push([cl, pad]);
      }
      assert.deepEqual(got, records, `value of ${value} bytes`);
    }
  });

  test('pairs that fit a record are never cut: each record decodes on its own (as php-cgi reads them)', () => {
    const flat: string[] = [];
    for (let i = 0; i < 40; i++) flat.push(`HTTP_X_${i}`, 'y'.repeat(3000 + i * 37));
    const recs = decodeAll(encodeRequestHead(1, Role.Responder, 0, new CgiParams(flat))).slice(1, -1);
    assert.ok(recs.length > 1);
    const names = recs.flatMap((r) => decodeNameValues(r.content, BIG_LIMITS).pairs.filter((_, i) => i % 2 === 0));
    assert.deepEqual(names, flat.filter((_, i) => i % 2 === 0));
  });

  test('params of exactly 65535 encoded bytes fit one record', () => {
    // 1 + 4 + 1 + v = 65535 → v = 65529
    const params = new CgiParams(['N', 'v'.repeat(65529)]);
    assert.equal(encodeNameValues(params).length, 65535);
    const recs = decodeAll(encodeRequestHead(1, Role.Responder, 0, params));
    assert.deepEqual(
      recs.map((r) => r.content.length),
      [8, 65535, 0],
    );
  });
});

describe('decoder', () => {
  const stream = Buffer.concat([
    encodeBeginRequest(1, Role.Responder, 0),
    encodeRecord(RecordType.Params, 1, Buffer.from([1, 1, 65, 66])),
    encodeRecord(RecordType.Params, 1),
    encodeRecord(RecordType.Stdin, 1, Buffer.from('body!')),
    encodeRecord(RecordType.Stdin, 1),
  ]);

  test('decodes records in order with views into the chunk', () => {
    const recs = decodeAll(stream);
    assert.deepEqual(
      recs.map((r) => [r.type, r.requestId, r.content.toString('latin1')]),
      [
        [1, 1, '\x00\x01\x00\x00\x00\x00\x00\x00'],
        [4, 1, '\x01\x01AB'],
        [4, 1, ''],
        [5, 1, 'body!'],
        [5, 1, ''],
      ],
    );
    for (const r of recs) if (r.content.length > 0) assert.ok(isViewOf(r.content, stream), 'view, not copy');
  });

  test('a record straddling chunks is copied; header split byte by byte needs no copy of the content', () => {
    const rec = encodeRecord(RecordType.Stdout, 9, Buffer.from('0123456789'));
    // split inside the content
    let got = decodeAll(rec.subarray(0, 12), rec.subarray(12));
    assert.equal(got[0]!.content.toString(), '0123456789');
    assert.ok(!isViewOf(got[0]!.content, rec), 'straddling record is copied');
    // split inside the header only: content arrives whole, so it is a view
    const second = Buffer.from(rec.subarray(3));
    got = decodeAll(rec.subarray(0, 3), second);
    assert.equal(got[0]!.content.toString(), '0123456789');
    assert.ok(isViewOf(got[0]!.content, second), 'content arrived whole: a view');
  });

  test('one byte at a time', () => {
    const out: FcgiRecord[] = [];
    const d = new FcgiDecoder((r) => out.push({ ...r, content: Buffer.from(r.content) }));
    for (let i = 0; i < stream.length; i++) d.push(stream.subarray(i, i + 1));
    assert.deepEqual(
      out.map((r) => r.content.toString('hex')),
      decodeAll(stream).map((r) => r.content.toString('hex')),
    );
  });

  test('midRecord reports a truncated header, content or padding', () => {
    const rec = encodeRecord(RecordType.Stdout, 1, Buffer.from('abc')); // 8 + 3 + 5 padding
    for (let cut = 0; cut <= rec.length; cut++) {
      const d = new FcgiDecoder(() => {});
      d.push(rec.subarray(0, cut));
      assert.equal(d.midRecord, cut > 0 && cut < rec.length, `cut at ${cut}`);
    }
  });

  test('a record is delivered as soon as its content is complete, before its padding', () => {
    const rec = encodeRecord(RecordType.Stdout, 1, Buffer.from('abc'));
    const out: FcgiRecord[] = [];
    const d = new FcgiDecoder((r) => out.push(r));
    d.push(rec.subarray(0, 11));
    assert.equal(out.length, 1);
    assert.equal(d.midRecord, true);
    d.push(rec.subarray(11));
    assert.equal(d.midRecord, false);
  });

  test('unknown record types and a non-zero reserved byte pass through', () => {
    const odd = bytes([1, 200, 0, 0, 0, 2, 6, 0xee], 'hi', [9, 9, 9, 9, 9, 9]);
    const recs = decodeAll(odd, encodeRecord(12, 0));
    assert.deepEqual(
      recs.map((r) => [r.type, r.requestId, r.content.toString()]),
      [
        [200, 0, 'hi'],
        [12, 0, ''],
      ],
    );
  });

  test('padding longer than 7 bytes is skipped (the spec allows up to 255)', () => {
    const rec = bytes([1, 6, 0, 1, 0, 1, 255, 0], 'x', Buffer.alloc(255, 0x55), encodeRecord(6, 1));
    assert.deepEqual(
      decodeAll(rec).map((r) => r.content.toString()),
      ['x', ''],
    );
  });

  const bad: Array<[string, Buffer, string]> = [
    ['version 0', bytes([0, 6, 0, 1, 0, 0, 0, 0]), ErrorCodes.FCGI_BAD_VERSION],
    ['version 2', bytes([2, 6, 0, 1, 0, 0, 0, 0]), ErrorCodes.FCGI_BAD_VERSION],
    ['an HTTP request', Buffer.from('GET / HTTP/1.1\r\n\r\n'), ErrorCodes.FCGI_BAD_VERSION],
    ['type 0', bytes([1, 0, 0, 1, 0, 0, 0, 0]), ErrorCodes.FCGI_BAD_RECORD],
    ['BEGIN_REQUEST of 7 bytes', bytes([1, 1, 0, 1, 0, 7, 1, 0]), ErrorCodes.FCGI_BAD_RECORD],
    ['BEGIN_REQUEST of 0 bytes', bytes([1, 1, 0, 1, 0, 0, 0, 0]), ErrorCodes.FCGI_BAD_RECORD],
    ['END_REQUEST of 16 bytes', bytes([1, 3, 0, 1, 0, 16, 0, 0]), ErrorCodes.FCGI_BAD_RECORD],
    ['UNKNOWN_TYPE of 0 bytes', bytes([1, 11, 0, 0, 0, 0, 0, 0]), ErrorCodes.FCGI_BAD_RECORD],
    ['ABORT_REQUEST with content', bytes([1, 2, 0, 1, 0, 1, 7, 0]), ErrorCodes.FCGI_BAD_RECORD],
  ];
  for (const [name, input, code] of bad) {
    test(`refuses ${name} as soon as the header is complete, then stays dead`, () => {
      const seen: FcgiRecord[] = [];
      const d = new FcgiDecoder((r) => seen.push(r));
      // The valid record before the bad one is still delivered.
      const good = encodeRecord(RecordType.Stdout, 1, Buffer.from('ok'));
      throwsCode(() => d.push(Buffer.concat([good, input.subarray(0, 8)])), code);
      assert.equal(seen.length, 1);
      assert.equal(d.dead, true);
      throwsCode(() => d.push(good), code);
      assert.equal(seen.length, 1, 'nothing decoded after death');
    });
  }

  test('bad header split across chunks is refused when its last byte arrives', () => {
    const d = new FcgiDecoder(() => {});
    d.push(Buffer.from([1, 1, 0, 1, 0]));
    throwsCode(() => d.push(Buffer.from([9, 0, 0])), ErrorCodes.FCGI_BAD_RECORD);
  });

  test('an exception from onRecord propagates and kills the decoder', () => {
    let calls = 0;
    const d = new FcgiDecoder(() => {
      calls++;
      throw new TypeError('consumer bug');
    });
    assert.throws(() => d.push(Buffer.concat([encodeRecord(6, 1), encodeRecord(6, 1)])), TypeError);
    assert.equal(calls, 1);
    throwsCode(() => d.push(encodeRecord(6, 1)), ErrorCodes.FCGI_BAD_RECORD);
    assert.equal(calls, 1);
  });

  test('empty chunks are harmless', () => {
    const out: FcgiRecord[] = [];
    const d = new FcgiDecoder((r) => out.push(r));
    d.push(Buffer.alloc(0));
    d.push(encodeRecord(6, 1).subarray(0, 4));
    d.push(Buffer.alloc(0));
    d.push(encodeRecord(6, 1).subarray(4));
    assert.equal(out.length, 1);
  });
});

describe('decoder with raw STDOUT and END_REQUEST records', () => {
  const records = [
    encodeRecord(RecordType.Stdout, 3, Buffer.from('Status: 200\r\n\r\nhi')), // padded
    encodeRecord(RecordType.Stderr, 3, Buffer.from('warn')),
    encodeRecord(RecordType.Stdout, 3, Buffer.alloc(40, 0x61)), // no padding
    encodeRecord(RecordType.Stdout, 3),
    encodeEndRequest(3, 0, ProtocolStatus.RequestComplete),
  ];
  const stream = Buffer.concat(records);

  /** Pushes `stream` cut at `cuts`; returns [type, raw] of each record. */
  function rawOf(cuts: number[]): Array<[number, Buffer | undefined]> {
    const got: Array<[number, Buffer | undefined]> = [];
    const dec = new FcgiDecoder((r: FcgiRecord) => got.push([r.type, r.raw && Buffer.from(r.raw)]), true, true);
    let at = 0;
    for (const c of [...cuts, stream.length]) {
      dec.push(stream.subarray(at, c));
      at = c;
    }
    return got;
  }

  test('every STDOUT and END_REQUEST record carries its whole bytes wherever the chunks are cut; others none', () => {
    for (let a = 0; a <= stream.length; a++) {
      for (const b of [a, a + 3, a + 9]) {
        const cuts = b > a && b < stream.length ? [a, b] : [a];
        const got = rawOf(cuts);
        assert.equal(got.length, records.length, `cuts ${cuts}`);
        got.forEach(([type, raw], i) => {
          if (type === RecordType.Stdout || type === RecordType.EndRequest) assert.deepEqual(raw, records[i], `record ${i}, cuts ${cuts}`);
          else assert.equal(raw, undefined, `record ${i} is neither STDOUT nor END_REQUEST`);
        });
      }
    }
  });

  test('a record inside one chunk is a view of it, not a copy', () => {
    const seen: Buffer[] = [];
    new FcgiDecoder((r: FcgiRecord) => r.raw && seen.push(r.raw), true, true).push(stream);
    assert.equal(seen.length, 4);
    for (const raw of seen) {
      const inside = raw.buffer === stream.buffer && raw.byteOffset >= stream.byteOffset && raw.byteOffset + raw.length <= stream.byteOffset + stream.length;
      assert.ok(inside, 'raw lies in the pushed chunk');
    }
  });

  test('records read in one chunk join into one view; the ids of every record in it are set', () => {
    const seen: Buffer[] = [];
    const chunk = Buffer.from(Buffer.concat([records[2]!, records[3]!, records[4]!])); // STDOUT, empty STDOUT, END_REQUEST
    new FcgiDecoder((r: FcgiRecord) => r.raw && seen.push(r.raw), true, true).push(chunk);
    const whole = joinAdjacent(joinAdjacent(seen[0]!, seen[1]!)!, seen[2]!)!;
    assert.ok(whole.buffer === chunk.buffer && whole.byteOffset === chunk.byteOffset && whole.length === chunk.length, 'one view of the chunk');
    assert.equal(joinAdjacent(seen[0]!, seen[2]!), undefined, 'not side by side: no view');
    assert.equal(joinAdjacent(seen[0]!, Buffer.from(seen[1]!)), undefined, 'another buffer: no view');
    setRequestIds(whole, 0x1234);
    const got: Array<[number, number, string]> = [];
    new FcgiDecoder((r: FcgiRecord) => got.push([r.type, r.requestId, r.content.toString('hex')])).push(chunk);
    const before: Array<[number, number, string]> = [];
    new FcgiDecoder((r: FcgiRecord) => before.push([r.type, 0x1234, r.content.toString('hex')])).push(Buffer.concat([records[2]!, records[3]!, records[4]!]));
    assert.deepEqual(got, before, 'the ids changed, nothing else');
  });
});

describe('ParamsCollector limits', () => {
  const pair = (n: string, v: string): Buffer => encodeNameValues(new CgiParams([n, v]));

  test('exactly maxCount pairs pass, one more is refused', () => {
    const body = Buffer.concat(Array.from({ length: 10 }, (_, i) => pair(`N${i}`, 'v')));
    assert.equal(decodeNameValues(body, { maxBytes: 1000, maxCount: 10 }).size, 10);
    throwsCode(() => decodeNameValues(body, { maxBytes: 1000, maxCount: 9 }), ErrorCodes.PARAMS_TOO_MANY);
  });

  test('exactly maxBytes of names and values pass, one more is refused', () => {
    // names + values = 4 + 6 = 10 bytes; the 4 length bytes do not count.
    const body = Buffer.concat([pair('AB', 'cde'), pair('FG', 'hij')]);
    assert.equal(decodeNameValues(body, { maxBytes: 10, maxCount: 10 }).size, 2);
    throwsCode(() => decodeNameValues(body, { maxBytes: 9, maxCount: 10 }), ErrorCodes.PARAMS_TOO_LARGE);
  });

  test('a pair claiming 2 GB is refused from its length bytes alone', () => {
    const c = new ParamsCollector(DEFAULT_PARAMS_LIMITS);
    throwsCode(() => c.add(Buffer.from([1, 0xff, 0xff, 0xff, 0xff])), ErrorCodes.PARAMS_TOO_LARGE);
  });

  test('a pair header split across records is checked when it completes', () => {
    const c = new ParamsCollector({ maxBytes: 100, maxCount: 10 });
    assert.equal(c.add(Buffer.from([0x80, 0])), undefined);
    throwsCode(() => c.add(Buffer.from([0, 200, 1])), ErrorCodes.PARAMS_TOO_LARGE);
  });

  test('an endless PARAMS stream is refused long before it ends', () => {
    const c = new ParamsCollector({ maxBytes: 64 * 1024, maxCount: 1000 });
    const record = Buffer.concat(Array.from({ length: 100 }, (_, i) => pair(`HTTP_X_${i}`, 'y')));
    let sent = 0;
    assert.throws(() => {
      for (;;) {
        c.add(record);
        sent++;
        assert.ok(sent < 100, 'refused within 100 records');
      }
    }, (e: unknown) => e instanceof ProtocolError && e.code === ErrorCodes.PARAMS_TOO_MANY);
    assert.equal(sent, 10);
  });

  test('a pair running past the end of the stream is FCGI_BAD_PARAMS', () => {
    throwsCode(() => decodeNameValues(Buffer.from([1, 5, 65, 66]), BIG_LIMITS), ErrorCodes.FCGI_BAD_PARAMS);
    throwsCode(() => decodeNameValues(Buffer.from([0x80, 0, 0]), BIG_LIMITS), ErrorCodes.FCGI_BAD_PARAMS);
    throwsCode(() => decodeNameValues(Buffer.from([3]), BIG_LIMITS), ErrorCodes.FCGI_BAD_PARAMS);
    const c = new ParamsCollector(BIG_LIMITS);
    c.add(Buffer.from([1, 2, 65]));
    throwsCode(() => c.add(Buffer.alloc(0)), ErrorCodes.FCGI_BAD_PARAMS);
  });

  test('after an error every later add throws the same error', () => {
    const c = new ParamsCollector({ maxBytes: 100, maxCount: 1 });
    c.add(pair('A', 'b'));
    throwsCode(() => c.add(pair('C', 'd')), ErrorCodes.PARAMS_TOO_MANY);
    throwsCode(() => c.add(Buffer.alloc(0)), ErrorCodes.PARAMS_TOO_MANY);
  });

  test('a PARAMS record after the closing one is refused', () => {
    const c = new ParamsCollector(BIG_LIMITS);
    assert.equal(c.add(Buffer.alloc(0))?.size, 0);
    throwsCode(() => c.add(pair('A', 'b')), ErrorCodes.FCGI_BAD_PARAMS);
  });

  test('pairs split at every offset across two records decode the same', () => {
    const body = Buffer.concat([pair('SHORT', 'x'), pair('n'.repeat(130), 'v'.repeat(300)), pair('', ''), pair('Z', '')]);
    const want = decodeNameValues(body, BIG_LIMITS).pairs;
    for (let cut = 0; cut <= body.length; cut++) {
      const c = new ParamsCollector(BIG_LIMITS);
      if (cut > 0) c.add(body.subarray(0, cut));
      if (cut < body.length) c.add(body.subarray(cut));
      assert.deepEqual(c.add(Buffer.alloc(0))?.pairs, want, `cut at ${cut}`);
    }
  });

  test('one byte per record', () => {
    const body = Buffer.concat([pair('A'.repeat(200), 'B'), pair('C', 'D'.repeat(129))]);
    const c = new ParamsCollector(BIG_LIMITS);
    for (let i = 0; i < body.length; i++) assert.equal(c.add(body.subarray(i, i + 1)), undefined);
    assert.deepEqual(c.add(Buffer.alloc(0))?.pairs, ['A'.repeat(200), 'B', 'C', 'D'.repeat(129)]);
  });
});
