/**
 * FcgiParams: request variables kept as the FastCGI client's bytes, read lazily, and
 * sent on unchanged. Byte tables written by hand (1- and 4-byte lengths), every split
 * of the PARAMS stream into records, the listener override, and the request head the
 * encoder builds from them compared with the one it builds from decoded strings.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ErrorCodes, ProtocolError } from '../../src/errors.js';
import {
  FcgiDecoder,
  FcgiParams,
  ParamsCollector,
  RecordType,
  encodeNameValues,
  encodeRequestHead,
  type FcgiRecord,
} from '../../src/protocol/fastcgi.js';
import { CgiParams, type ParamsLimits } from '../../src/protocol/params.js';
import { assertSplitInvariant } from './split.js';

const BIG: ParamsLimits = { maxBytes: 1 << 24, maxCount: 100_000 };

/** Collects `records` as one PARAMS stream and returns the view. */
function collect(records: Buffer[], limits: ParamsLimits = BIG): FcgiParams {
  const c = new ParamsCollector(limits);
  for (const r of records) if (r.length > 0) assert.equal(c.add(r), undefined);
  const p = c.add(Buffer.alloc(0));
  assert.ok(p instanceof FcgiParams);
  return p;
}

const L200 = 'v'.repeat(200);

// Hand-written: "A"="1" (1-byte lengths), "SCRIPT_NAME"="/x.php", "B"=200 bytes (4-byte
// value length 0x800000C8), ""="" (empty pair), "AB"="2".
const TABLE = Buffer.concat([
  Buffer.from([1, 1]), Buffer.from('A1', 'latin1'),
  Buffer.from([11, 6]), Buffer.from('SCRIPT_NAME/x.php', 'latin1'),
  Buffer.from([1, 0x80, 0, 0, 200]), Buffer.from('B' + L200, 'latin1'),
  Buffer.from([0, 0]),
  Buffer.from([2, 1]), Buffer.from('AB2', 'latin1'),
]);
const TABLE_PAIRS = ['A', '1', 'SCRIPT_NAME', '/x.php', 'B', L200, '', '', 'AB', '2'];

describe('FcgiParams over a byte table', () => {
  test('get reads names from the bytes, without decoding the rest', () => {
    const p = collect([TABLE]);
    assert.equal(p.get('A'), '1');
    assert.equal(p.get('AB'), '2'); // a name that extends another is not confused with it
    assert.equal(p.get('SCRIPT_NAME'), '/x.php');
    assert.equal(p.get('B'), L200);
    assert.equal(p.get(''), '');
    assert.equal(p.get('C'), undefined);
    assert.equal(p.size, 5);
    // Still the client's bytes: nothing was decoded.
    assert.ok(p.wire !== undefined);
    assert.ok(p.wire.equals(TABLE));
  });

  test('one record is kept as a view of it, not copied', () => {
    const p = collect([TABLE]);
    assert.equal(p.wire!.buffer, TABLE.buffer);
  });

  test('listing the pairs decodes them all, in order', () => {
    const p = collect([TABLE]);
    assert.deepEqual(p.pairs, TABLE_PAIRS);
    assert.equal(p.wire, undefined);
    assert.equal(p.get('B'), L200);
  });

  test('set and delete decode first, then act on the strings', () => {
    const p = collect([TABLE]);
    p.set('A', 'changed');
    p.delete('AB');
    assert.deepEqual(p.pairs, ['A', 'changed', 'SCRIPT_NAME', '/x.php', 'B', L200, '', '']);
    assert.equal(p.wireLength(), encodeNameValues(new CgiParams([...p.pairs])).length);
  });

  test('latin1: every byte value survives', () => {
    const all = Buffer.alloc(256);
    for (let i = 0; i < 256; i++) all[i] = i;
    const body = Buffer.concat([Buffer.from([1, 0x80, 0, 1, 0]), Buffer.from('X', 'latin1'), all]);
    const p = collect([body]);
    assert.ok(Buffer.from(p.get('X')!, 'latin1').equals(all));
  });
});

describe('FcgiParams.detach', () => {
  test('a small view of a large chunk is copied out; a view that is most of its chunk is kept', () => {
    const chunk = Buffer.alloc(64 * 1024);
    TABLE.copy(chunk, 16);
    const p = collect([chunk.subarray(16, 16 + TABLE.length)]);
    p.detach();
    assert.notEqual(p.wire!.buffer, chunk.buffer);
    assert.equal(p.wire!.buffer.byteLength, TABLE.length);
    assert.ok(p.wire!.equals(TABLE));
    assert.equal(p.get('SCRIPT_NAME'), '/x.php');
    const exact = Buffer.alloc(TABLE.length); // its own memory, as a socket read is
    TABLE.copy(exact);
    const own = collect([exact]);
    const before = own.wire;
    own.detach();
    assert.equal(own.wire, before);
  });
});

describe('ParamsCollector: the stream split into records anywhere', () => {
  test('every split gives the same bytes and the same pairs', () => {
    const decode = (chunks: Buffer[]): { wire: string; pairs: readonly string[]; b: string | undefined } => {
      const p = collect(chunks);
      const wire = p.wire!.toString('hex');
      const b = p.get('B');
      return { wire, pairs: p.pairs, b };
    };
    assertSplitInvariant(TABLE, decode, { wire: TABLE.toString('hex'), pairs: TABLE_PAIRS, b: L200 });
  });

  test('a split 4-byte length is read whole', () => {
    const big = 'n'.repeat(300);
    const body = Buffer.concat([Buffer.from([0x80, 0, 1, 44, 0x80, 0, 1, 44]), Buffer.from(big + big, 'latin1')]);
    for (let i = 1; i < 8; i++) {
      const p = collect([body.subarray(0, i), body.subarray(i)]);
      assert.equal(p.get(big), big, `split at ${i}`);
    }
  });

  test('SCRIPT_FILENAME, noted by the collector, is the first pair of that name whatever the split', () => {
    // Its first pair (a 4-byte value length), a second one, and its name inside another's value.
    const first = '/srv/' + 'd'.repeat(150) + '.php';
    const table = Buffer.concat([
      Buffer.from([1, 1]), Buffer.from('A1', 'latin1'),
      Buffer.from([1, 15]), Buffer.from('VSCRIPT_FILENAME', 'latin1'),
      Buffer.from([15, 0x80, 0, 0, first.length]), Buffer.from('SCRIPT_FILENAME' + first, 'latin1'),
      Buffer.from([15, 6]), Buffer.from('SCRIPT_FILENAME/b.php', 'latin1'),
    ]);
    const read = (chunks: Buffer[]): { script: string | undefined; again: string | undefined } => {
      const p = collect(chunks);
      return { script: p.get('SCRIPT_FILENAME'), again: new FcgiParams(p.wire!, p.size).get('SCRIPT_FILENAME') };
    };
    assertSplitInvariant(table, read, { script: first, again: first });
    // Overridden, and absent.
    const p = collect([table]);
    p.override(['SCRIPT_FILENAME', '/o.php']);
    assert.equal(p.get('SCRIPT_FILENAME'), '/o.php');
    assert.equal(collect([TABLE]).get('SCRIPT_FILENAME'), undefined);
  });

  test('limits hold whatever the split: count and bytes', () => {
    for (let i = 0; i <= TABLE.length; i++) {
      const records = [TABLE.subarray(0, i), TABLE.subarray(i)];
      assert.throws(() => collect(records, { maxBytes: BIG.maxBytes, maxCount: 4 }), codeIs(ErrorCodes.PARAMS_TOO_MANY), `count, split at ${i}`);
      // Names and values of the table: 2 + 17 + 201 + 0 + 3 = 223 bytes.
      assert.throws(() => collect(records, { maxBytes: 222, maxCount: 100 }), codeIs(ErrorCodes.PARAMS_TOO_LARGE), `bytes, split at ${i}`);
      assert.equal(collect(records, { maxBytes: 223, maxCount: 5 }).size, 5);
    }
  });

  test('a pair claiming more than the limit is refused from its lengths alone', () => {
    const c = new ParamsCollector({ maxBytes: 1000, maxCount: 10 });
    assert.throws(() => c.add(Buffer.from([1, 0xff, 0xff, 0xff, 0xff])), codeIs(ErrorCodes.PARAMS_TOO_LARGE));
  });

  test('a stream ending inside a pair is refused, wherever it ends', () => {
    for (let i = 1; i < TABLE.length; i++) {
      const c = new ParamsCollector(BIG);
      c.add(TABLE.subarray(0, i));
      const atBoundary = [0, 4, 23, 229, 231].includes(i);
      if (atBoundary) assert.ok(c.add(Buffer.alloc(0)) instanceof FcgiParams, `ends at pair boundary ${i}`);
      else assert.throws(() => c.add(Buffer.alloc(0)), codeIs(ErrorCodes.FCGI_BAD_PARAMS), `ends at ${i}`);
    }
  });
});

describe('FcgiParams with a listener override', () => {
  // The client sent HTTPS twice; the listener sets HTTPS and adds SERVER_ROLE.
  const client = encodeNameValues(new CgiParams(['HTTPS', 'off', 'A', '1', 'HTTPS', 'sneaky', 'B', '2']));
  const override = ['HTTPS', 'on', 'SERVER_ROLE', 'front'];

  test('get sees the override; the wire drops every client copy and appends it', () => {
    const p = collect([client]);
    p.override(override);
    assert.equal(p.get('HTTPS'), 'on');
    assert.equal(p.get('SERVER_ROLE'), 'front');
    assert.equal(p.get('A'), '1');
    assert.equal(p.wire, undefined); // not the bytes as received any more
    const out = Buffer.alloc(p.wireLength());
    assert.equal(p.writeWire(out, 0), out.length);
    const back = collect([out]);
    assert.deepEqual(back.pairs, ['A', '1', 'B', '2', 'HTTPS', 'on', 'SERVER_ROLE', 'front']);
  });

  test('decoding after an override gives the same variables (one copy of each name)', () => {
    const p = collect([client]);
    p.override(override);
    assert.deepEqual(p.toObject(), { HTTPS: 'on', A: '1', B: '2', SERVER_ROLE: 'front' });
    assert.equal(p.size, 4);
  });

  test('a plain CgiParams override also replaces every copy', () => {
    const p = new CgiParams(['HTTPS', 'off', 'A', '1', 'HTTPS', 'sneaky']);
    p.override(override);
    assert.deepEqual(p.pairs, ['HTTPS', 'on', 'A', '1', 'SERVER_ROLE', 'front']);
  });
});

describe('encodeRequestHead from received bytes', () => {
  function records(buf: Buffer): Array<{ type: number; id: number; content: string }> {
    const out: Array<{ type: number; id: number; content: string }> = [];
    const d = new FcgiDecoder((r: FcgiRecord) => out.push({ type: r.type, id: r.requestId, content: r.content.toString('hex') }));
    d.push(buf);
    assert.equal(d.midRecord, false);
    return out;
  }

  test('the same bytes as from decoded strings, small and over 64 KiB', () => {
    for (const size of [10, 70_000, 140_000]) {
      const flat = ['SCRIPT_FILENAME', '/srv/x.php', 'HTTP_COOKIE', 'c'.repeat(size), 'Z', ''];
      const wire = encodeNameValues(new CgiParams(flat));
      const lazy = collect([wire]);
      const fromBytes = encodeRequestHead(7, 1, 1, lazy);
      // Up to one record the bytes are copied as received; more are re-packed pair by pair (php-cgi reads each record alone).
      if (size < 60_000) assert.ok(lazy.wire !== undefined, 'encoding did not decode the params');
      assert.ok(fromBytes.equals(encodeRequestHead(7, 1, 1, new CgiParams(flat))), `size ${size}`);
    }
  });

  test('noBody appends the empty STDIN to the same buffer', () => {
    const lazy = collect([TABLE]);
    const recs = records(encodeRequestHead(1, 1, 0, lazy, true));
    assert.deepEqual(recs.map((r) => r.type), [RecordType.BeginRequest, RecordType.Params, RecordType.Params, RecordType.Stdin]);
    assert.equal(recs[1]!.content, TABLE.toString('hex'));
    assert.equal(recs[3]!.content, '');
  });
});

function codeIs(code: string): (err: unknown) => boolean {
  return (err: unknown) => err instanceof ProtocolError && err.code === code;
}
