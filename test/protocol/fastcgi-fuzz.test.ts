/**
 * FastCGI properties (fast-check): encode→decode round trips, decoding unchanged by
 * how the input is split, and hostile input (random bytes, mutated valid streams)
 * raising nothing but ProtocolError. A small whole-buffer reference decoder written
 * here from the spec is the oracle for split and mutation runs.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ErrorCodes, ProtocolError } from '../../src/errors.js';
import {
  FCGI_MAX_CONTENT,
  FcgiDecoder,
  ParamsCollector,
  RecordType,
  Role,
  decodeNameValues,
  encodeNameValues,
  encodeRecord,
  encodeRequestHead,
  encodeStream,
  parseBeginRequest,
  parseEndRequest,
  parseUnknownType,
  type FcgiRecord,
} from '../../src/protocol/fastcgi.js';
import { CgiParams, type ParamsLimits } from '../../src/protocol/params.js';
import { assertSplitInvariant, cutsArb as cutsArb12, splitAt } from './split.js';

const BIG_LIMITS: ParamsLimits = { maxBytes: 1 << 30, maxCount: 1 << 20 };

// ---- arbitraries ------------------------------------------------------------------

const latin1Char = fc.integer({ min: 0, max: 255 }).map((c) => String.fromCharCode(c));
/** Latin1 strings, weighted towards the 1-/4-byte length boundary and sometimes long. */
const nvString = fc.oneof(
  { weight: 6, arbitrary: fc.string({ unit: latin1Char, maxLength: 40 }) },
  { weight: 2, arbitrary: fc.tuple(latin1Char, fc.integer({ min: 125, max: 131 })).map(([c, n]) => c.repeat(n)) },
  { weight: 1, arbitrary: fc.string({ unit: latin1Char, minLength: 120, maxLength: 400 }) },
  { weight: 1, arbitrary: fc.tuple(latin1Char, fc.integer({ min: 0, max: 70000 })).map(([c, n]) => c.repeat(n)) },
);
const paramsArb = fc
  .array(fc.tuple(nvString, nvString), { maxLength: 30 })
  .map((pairs) => new CgiParams(pairs.flat()));

const recordArb: fc.Arbitrary<{ type: number; requestId: number; content: Buffer }> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      type: fc.constantFrom(4, 5, 6, 7, 8, 9, 10),
      requestId: fc.integer({ min: 0, max: 0xffff }),
      content: fc.uint8Array({ maxLength: 200 }).map((a) => Buffer.from(a)),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      type: fc.constantFrom(RecordType.BeginRequest, RecordType.EndRequest, RecordType.UnknownType),
      requestId: fc.integer({ min: 0, max: 0xffff }),
      content: fc.uint8Array({ minLength: 8, maxLength: 8 }).map((a) => Buffer.from(a)),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      type: fc.constant(RecordType.AbortRequest as number),
      requestId: fc.integer({ min: 0, max: 0xffff }),
      content: fc.constant(Buffer.alloc(0)),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      type: fc.integer({ min: 12, max: 255 }),
      requestId: fc.integer({ min: 0, max: 0xffff }),
      content: fc.uint8Array({ maxLength: 40 }).map((a) => Buffer.from(a)),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      type: fc.constantFrom(5, 6),
      requestId: fc.integer({ min: 1, max: 0xffff }),
      content: fc
        .oneof(fc.integer({ min: 65520, max: FCGI_MAX_CONTENT }), fc.integer({ min: 0, max: 3000 }))
        .map((n) => Buffer.alloc(n, n & 0xff)),
    }),
  },
);
const recordsArb = fc.array(recordArb, { maxLength: 12 });

const cutsArb = cutsArb12();


// ---- oracle -----------------------------------------------------------------------

type Rec = [type: number, requestId: number, hex: string];
interface Outcome {
  records: Rec[];
  error: string | undefined;
  mid: boolean;
}

const FIXED: Record<number, number> = {
  [RecordType.BeginRequest]: 8,
  [RecordType.EndRequest]: 8,
  [RecordType.UnknownType]: 8,
  [RecordType.AbortRequest]: 0,
};

/** Whole-buffer decoding straight from the spec, for comparison. */
function referenceDecode(buf: Buffer): Outcome {
  const records: Rec[] = [];
  let p = 0;
  while (p < buf.length) {
    if (buf.length - p < 8) return { records, error: undefined, mid: true };
    const version = buf[p]!;
    const type = buf[p + 1]!;
    const requestId = buf.readUInt16BE(p + 2);
    const cl = buf.readUInt16BE(p + 4);
    const pl = buf[p + 6]!;
    if (version !== 1) return { records, error: ErrorCodes.FCGI_BAD_VERSION, mid: true };
    if (type === 0) return { records, error: ErrorCodes.FCGI_BAD_RECORD, mid: true };
    if (FIXED[type] !== undefined && FIXED[type] !== cl) return { records, error: ErrorCodes.FCGI_BAD_RECORD, mid: true };
    if (p + 8 + cl > buf.length) return { records, error: undefined, mid: true };
    records.push([type, requestId, buf.toString('hex', p + 8, p + 8 + cl)]);
    if (p + 8 + cl + pl > buf.length) return { records, error: undefined, mid: true };
    p += 8 + cl + pl;
  }
  return { records, error: undefined, mid: false };
}

/** Streams the chunks through FcgiDecoder; any exception but ProtocolError fails the test. */
function streamDecode(chunks: Buffer[]): Outcome {
  const records: Rec[] = [];
  const d = new FcgiDecoder((r: FcgiRecord) => records.push([r.type, r.requestId, r.content.toString('hex')]));
  for (const c of chunks) {
    try {
      d.push(c);
    } catch (err) {
      if (!(err instanceof ProtocolError)) throw err;
      // Dead afterwards: every further push throws the same code and decodes nothing.
      const n = records.length;
      assert.throws(() => d.push(Buffer.from([1, 6, 0, 1, 0, 0, 0, 0])), (e: unknown) => e instanceof ProtocolError && e.code === err.code);
      assert.equal(records.length, n);
      return { records, error: err.code, mid: true };
    }
  }
  return { records, error: undefined, mid: d.midRecord };
}

function encodeAll(recs: Array<{ type: number; requestId: number; content: Buffer }>): Buffer {
  return Buffer.concat(recs.map((r) => encodeRecord(r.type, r.requestId, r.content)));
}

// ---- mutations --------------------------------------------------------------------

const mutationArb = fc.oneof(
  fc.record({ kind: fc.constant('set' as const), at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }) }),
  fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), bit: fc.integer({ min: 0, max: 7 }) }),
  fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), bytes: fc.uint8Array({ minLength: 1, maxLength: 9 }) }),
  fc.record({ kind: fc.constant('delete' as const), at: fc.nat(), n: fc.integer({ min: 1, max: 9 }) }),
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('repeat' as const), at: fc.nat(), n: fc.integer({ min: 1, max: 40 }) }),
);
type Mutation = typeof mutationArb extends fc.Arbitrary<infer T> ? T : never;

function mutate(buf: Buffer, ms: Mutation[]): Buffer {
  let b = Buffer.from(buf);
  for (const m of ms) {
    const at = b.length === 0 ? 0 : m.at % b.length;
    switch (m.kind) {
      case 'set':
        if (b.length) b[at] = m.byte;
        break;
      case 'flip':
        if (b.length) b[at] = b[at]! ^ (1 << m.bit);
        break;
      case 'insert':
        b = Buffer.concat([b.subarray(0, at), Buffer.from(m.bytes), b.subarray(at)]);
        break;
      case 'delete':
        b = Buffer.concat([b.subarray(0, at), b.subarray(at + m.n)]);
        break;
      case 'truncate':
        b = b.subarray(0, at);
        break;
      case 'repeat':
        b = Buffer.concat([b.subarray(0, at + m.n), b.subarray(at)]);
        break;
    }
  }
  return b;
}

// ---- properties -------------------------------------------------------------------

test('records: encode then decode gives them back', () => {
  fc.assert(
    fc.property(recordsArb, (recs) => {
      const got = streamDecode([encodeAll(recs)]);
      assert.equal(got.error, undefined);
      assert.equal(got.mid, false);
      assert.deepEqual(
        got.records,
        recs.map((r) => [r.type, r.requestId, r.content.toString('hex')]),
      );
    }),
    { numRuns: 150 },
  );
});

test('records: decoding is unchanged when the input is split at random places', () => {
  fc.assert(
    fc.property(recordsArb, cutsArb, (recs, cuts) => {
      const whole = encodeAll(recs);
      assert.deepEqual(streamDecode(splitAt(whole, cuts)), referenceDecode(whole));
    }),
    { numRuns: 200 },
  );
});

test('records: a mixed stream split at every offset, and fed byte by byte', () => {
  const whole = Buffer.concat([
    encodeRequestHead(1, Role.Responder, 1, new CgiParams(['SCRIPT_FILENAME', '/srv/a.php', 'Q', 'x'.repeat(130)])),
    encodeRecord(RecordType.Stdin, 1, Buffer.from('a=1&b=2')),
    encodeRecord(RecordType.Stdin, 1),
    encodeRecord(RecordType.GetValues, 0, encodeNameValues(new CgiParams(['FCGI_MAX_CONNS', '']))),
    encodeRecord(77, 0, Buffer.from('?')),
    encodeRecord(RecordType.AbortRequest, 1),
    Buffer.from([1, 6, 0, 1, 0, 3, 200, 0]),
    Buffer.from('abc'),
    Buffer.alloc(200),
    encodeRecord(RecordType.EndRequest, 1, Buffer.alloc(8)),
  ]);
  const want = referenceDecode(whole);
  assert.equal(want.records.length, 10);
  assertSplitInvariant(whole, streamDecode, want);
});

test('records: random streams split at every offset', () => {
  fc.assert(
    fc.property(fc.array(recordArb.filter((r) => r.content.length < 300), { maxLength: 5 }), (recs) => {
      const whole = encodeAll(recs);
      const want = referenceDecode(whole);
      for (let i = 0; i <= whole.length; i++) {
        assert.deepEqual(streamDecode([whole.subarray(0, i), whole.subarray(i)]), want);
      }
    }),
    { numRuns: 40 },
  );
});

test('streams: encodeStream cuts at 65535 and round-trips any size', () => {
  fc.assert(
    fc.property(
      fc.oneof(fc.integer({ min: 0, max: 3000 }), fc.integer({ min: 65530, max: 65540 }), fc.integer({ min: 0, max: 300000 })),
      fc.integer({ min: 1, max: 0xffff }),
      fc.integer({ min: 0, max: 255 }),
      (size, requestId, seed) => {
        const data = Buffer.alloc(size);
        for (let i = 0; i < size; i += 997) data[i] = (seed + i) & 0xff;
        const out: Buffer[] = [];
        encodeStream(RecordType.Stdout, requestId, data, out);
        const got: FcgiRecord[] = [];
        const d = new FcgiDecoder((r) => got.push(r));
        for (const b of out) d.push(b);
        assert.equal(d.midRecord, false);
        assert.equal(got.length, Math.ceil(size / FCGI_MAX_CONTENT));
        got.forEach((r, i) => {
          assert.equal(r.type, RecordType.Stdout);
          assert.equal(r.requestId, requestId);
          assert.equal(r.content.length, i < got.length - 1 ? FCGI_MAX_CONTENT : size - i * FCGI_MAX_CONTENT);
        });
        assert.ok(Buffer.concat(got.map((r) => r.content)).equals(data));
        assert.equal(Buffer.concat(out).length % 8, 0, 'every record padded to 8');
      },
    ),
    { numRuns: 60 },
  );
});

test('name-value pairs: encode then decode gives the same latin1 strings', () => {
  fc.assert(
    fc.property(paramsArb, (params) => {
      const body = encodeNameValues(params);
      assert.deepEqual(decodeNameValues(body, BIG_LIMITS).pairs, params.pairs);
    }),
    { numRuns: 150 },
  );
});

test('request head: encode, decode records, collect PARAMS (split anywhere) gives the params back', () => {
  fc.assert(
    fc.property(paramsArb, fc.integer({ min: 1, max: 0xffff }), cutsArb, (params, requestId, cuts) => {
      const head = encodeRequestHead(requestId, Role.Responder, 1, params);
      const c = new ParamsCollector(BIG_LIMITS);
      let begin: { role: number; flags: number } | undefined;
      let got: CgiParams | undefined;
      const d = new FcgiDecoder((r) => {
        assert.equal(r.requestId, requestId);
        if (r.type === RecordType.BeginRequest) begin = parseBeginRequest(r.content);
        else {
          assert.equal(r.type, RecordType.Params);
          assert.ok(r.content.length <= FCGI_MAX_CONTENT);
          got = c.add(r.content);
        }
      });
      for (const part of splitAt(head, cuts)) d.push(part);
      assert.deepEqual(begin, { role: Role.Responder, flags: 1 });
      assert.deepEqual(got?.pairs, params.pairs);
    }),
    { numRuns: 100 },
  );
});

/** Outcome of collecting a PARAMS stream cut into records at the given points. */
function collect(body: Buffer, cuts: number[], limits: ParamsLimits): { pairs?: readonly string[]; error?: string } {
  const c = new ParamsCollector(limits);
  try {
    for (const part of splitAt(body, cuts)) if (part.length > 0) c.add(part);
    return { pairs: c.add(Buffer.alloc(0))!.pairs };
  } catch (err) {
    if (!(err instanceof ProtocolError)) throw err;
    return { error: err.code };
  }
}

test('PARAMS collector: same pairs or same error however the stream is cut into records', () => {
  const limitsArb = fc.record({ maxBytes: fc.integer({ min: 0, max: 3000 }), maxCount: fc.integer({ min: 0, max: 40 }) });
  fc.assert(
    fc.property(paramsArb, fc.array(mutationArb, { maxLength: 3 }), limitsArb, cutsArb, (params, ms, limits, cuts) => {
      const body = mutate(encodeNameValues(params), ms);
      assert.deepEqual(collect(body, cuts, limits), collect(body, [], limits));
    }),
    { numRuns: 1000 },
  );
});

test('PARAMS collector: random bytes raise only ProtocolError', () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 300 }), cutsArb, (bytes, cuts) => {
      const r = collect(Buffer.from(bytes), cuts, { maxBytes: 4096, maxCount: 50 });
      if (r.error !== undefined) {
        assert.ok(
          [ErrorCodes.FCGI_BAD_PARAMS, ErrorCodes.PARAMS_TOO_LARGE, ErrorCodes.PARAMS_TOO_MANY].includes(r.error as never),
        );
      }
    }),
    { numRuns: 2000 },
  );
});

/**
 * What a role layer does with records; every parser it calls may throw only ProtocolError.
 */
function consume(chunks: Buffer[]): void {
  const collectors = new Map<number, ParamsCollector>();
  const d = new FcgiDecoder((r) => {
    switch (r.type) {
      case RecordType.BeginRequest:
        parseBeginRequest(r.content);
        collectors.set(r.requestId, new ParamsCollector({ maxBytes: 2048, maxCount: 30 }));
        break;
      case RecordType.EndRequest:
        parseEndRequest(r.content);
        break;
      case RecordType.UnknownType:
        parseUnknownType(r.content);
        break;
      case RecordType.GetValues:
      case RecordType.GetValuesResult:
        decodeNameValues(r.content, { maxBytes: 2048, maxCount: 30 });
        break;
      case RecordType.Params:
        collectors.get(r.requestId)?.add(r.content);
        break;
    }
  });
  for (const c of chunks) d.push(c);
}

function onlyProtocolErrors(fn: () => void): void {
  try {
    fn();
  } catch (err) {
    if (!(err instanceof ProtocolError)) throw err;
    assert.ok(Object.values(ErrorCodes).includes(err.code));
  }
}

test('hostile input: random bytes raise only ProtocolError', () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 500 }), cutsArb, (bytes, cuts) => {
      onlyProtocolErrors(() => consume(splitAt(Buffer.from(bytes), cuts)));
    }),
    { numRuns: 2000 },
  );
});

test('hostile input: random headers with version 1 raise only ProtocolError and match the oracle', () => {
  const rawRecord = fc
    .tuple(
      fc.integer({ min: 0, max: 255 }),
      fc.integer({ min: 0, max: 0xffff }),
      fc.integer({ min: 0, max: 300 }),
      fc.integer({ min: 0, max: 255 }),
      fc.uint8Array({ maxLength: 600 }),
    )
    .map(([type, id, cl, pl, body]) => {
      const h = Buffer.from([1, type, id >> 8, id & 0xff, cl >> 8, cl & 0xff, pl, 0]);
      return Buffer.concat([h, Buffer.from(body)]);
    });
  fc.assert(
    fc.property(fc.array(rawRecord, { maxLength: 6 }), cutsArb, (parts, cuts) => {
      const whole = Buffer.concat(parts);
      onlyProtocolErrors(() => consume(splitAt(whole, cuts)));
      assert.deepEqual(streamDecode(splitAt(whole, cuts)), referenceDecode(whole));
    }),
    { numRuns: 1500 },
  );
});

test('hostile input: mutated valid streams raise only ProtocolError and match the oracle', () => {
  const validStream = fc
    .tuple(paramsArb, recordsArb)
    .map(([params, recs]) => Buffer.concat([encodeRequestHead(1, Role.Responder, 0, params), encodeAll(recs)]));
  fc.assert(
    fc.property(validStream, fc.array(mutationArb, { minLength: 1, maxLength: 5 }), cutsArb, (stream, ms, cuts) => {
      const bad = mutate(stream, ms);
      onlyProtocolErrors(() => consume(splitAt(bad, cuts)));
      assert.deepEqual(streamDecode(splitAt(bad, cuts)), referenceDecode(bad));
    }),
    { numRuns: 1000 },
  );
});
