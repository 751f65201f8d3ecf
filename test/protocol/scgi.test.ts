/**
 * SCGI codec: the spec's example byte for byte, decoder states and limits, and
 * fast-check round trips, split invariance and hostile input.
 */
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ErrorCodes, ProtocolError } from '../../src/errors.js';
import { CgiParams, DEFAULT_PARAMS_LIMITS } from '../../src/protocol/params.js';
import {
  ScgiRequestDecoder,
  decodeScgiHeaders,
  encodeScgiHead,
  scgiLimits,
  type ScgiLimits,
} from '../../src/protocol/scgi.js';
import { assertSplitInvariant, splitAt } from './split.js';

const LIMITS = scgiLimits(DEFAULT_PARAMS_LIMITS);

/** The example from the SCGI specification (python.ca/scgi/protocol.txt). */
const SPEC_EXAMPLE =
  '70:' +
  'CONTENT_LENGTH\x0027\x00' +
  'SCGI\x001\x00' +
  'REQUEST_METHOD\x00POST\x00' +
  'REQUEST_URI\x00/deepthought\x00' +
  ',' +
  'What is the answer to life?';

function isViewOf(view: Buffer, whole: Buffer): boolean {
  return (
    view.buffer === whole.buffer &&
    view.byteOffset >= whole.byteOffset &&
    view.byteOffset + view.length <= whole.byteOffset + whole.length
  );
}

interface Outcome {
  events: string[];
  pairs?: readonly string[];
  contentLength?: number;
  body: string;
  error?: string;
}

/** Runs chunks through a decoder and records what it reported, in order. */
function run(chunks: Buffer[], limits: ScgiLimits = LIMITS): Outcome {
  const out: Outcome = { events: [], body: '' };
  const body: Buffer[] = [];
  const d = new ScgiRequestDecoder(limits, {
    onHead(params, cl) {
      assert.equal(d.headDone, true);
      out.events.push('head');
      out.pairs = params.pairs;
      out.contentLength = cl;
    },
    onBody(chunk) {
      assert.ok(chunk.length > 0, 'no empty body chunks');
      if (out.events.at(-1) !== 'body') out.events.push('body');
      body.push(chunk);
    },
    onEnd() {
      out.events.push('end');
    },
  });
  try {
    for (const c of chunks) d.push(c);
  } catch (err) {
    if (!(err instanceof ProtocolError)) throw err;
    out.error = err.code;
    // Dead afterwards.
    assert.throws(() => d.push(Buffer.from('1')), (e: unknown) => e instanceof ProtocolError && e.code === out.error);
  }
  out.body = Buffer.concat(body).toString('latin1');
  return out;
}

const runText = (s: string, limits?: ScgiLimits) => run([Buffer.from(s, 'latin1')], limits);


describe('spec example', () => {
  test('encodeScgiHead produces the example byte for byte', () => {
    const head = encodeScgiHead(
      new CgiParams(['REQUEST_METHOD', 'POST', 'CONTENT_LENGTH', '27', 'REQUEST_URI', '/deepthought']),
    );
    assert.equal(head.toString('latin1'), SPEC_EXAMPLE.slice(0, SPEC_EXAMPLE.indexOf(',') + 1));
  });

  test('the decoder reads it: head, body, end', () => {
    assert.deepEqual(runText(SPEC_EXAMPLE), {
      events: ['head', 'body', 'end'],
      pairs: ['CONTENT_LENGTH', '27', 'SCGI', '1', 'REQUEST_METHOD', 'POST', 'REQUEST_URI', '/deepthought'],
      contentLength: 27,
      body: 'What is the answer to life?',
    });
  });

  test('split at every offset, and byte by byte, gives the same', () => {
    const whole = Buffer.from(SPEC_EXAMPLE, 'latin1');
    assertSplitInvariant(whole, (chunks) => run(chunks), run([whole]));
  });
});

describe('encodeScgiHead', () => {
  test('CONTENT_LENGTH absent or empty becomes "0"; SCGI is not duplicated', () => {
    assert.equal(encodeScgiHead(new CgiParams(['A', 'b'])).toString('latin1'), '28:CONTENT_LENGTH\x000\x00SCGI\x001\x00A\x00b\x00,');
    assert.equal(
      encodeScgiHead(new CgiParams(['SCGI', '1', 'CONTENT_LENGTH', '', 'A', 'b'])).toString('latin1'),
      '28:CONTENT_LENGTH\x000\x00SCGI\x001\x00A\x00b\x00,',
    );
    assert.equal(encodeScgiHead(new CgiParams()).toString('latin1'), '24:CONTENT_LENGTH\x000\x00SCGI\x001\x00,');
  });

  test('empty values are kept; latin1 bytes pass unchanged', () => {
    const head = encodeScgiHead(new CgiParams(['CONTENT_LENGTH', '5', 'QUERY_STRING', '', 'X', 'caf\xe9']));
    assert.equal(
      head.toString('latin1'),
      '45:CONTENT_LENGTH\x005\x00SCGI\x001\x00QUERY_STRING\x00\x00X\x00caf\xe9\x00,',
    );
    const got = run([head, Buffer.from('12345')]);
    assert.deepEqual(got.pairs, ['CONTENT_LENGTH', '5', 'SCGI', '1', 'QUERY_STRING', '', 'X', 'caf\xe9']);
    assert.equal(got.body, '12345');
  });

  test('names or values SCGI cannot carry are refused', () => {
    for (const flat of [
      ['A\x00B', 'v'],
      ['A', 'v\x00HTTP_INJECTED\x00yes'],
      ['', 'v'],
      ['CONTENT_LENGTH', '1\x00'],
    ]) {
      assert.throws(
        () => encodeScgiHead(new CgiParams(flat)),
        (e: unknown) => e instanceof ProtocolError && e.code === ErrorCodes.SCGI_BAD_HEADERS,
        JSON.stringify(flat),
      );
    }
  });
});

describe('decoder', () => {
  test('CONTENT_LENGTH 0: end right after the head, later bytes ignored', () => {
    const d: string[] = [];
    const dec = new ScgiRequestDecoder(LIMITS, {
      onHead: () => d.push('head'),
      onBody: () => d.push('body'),
      onEnd: () => d.push('end'),
    });
    dec.push(Buffer.from('28:CONTENT_LENGTH\x000\x00SCGI\x001\x00A\x00b\x00,GARBAGE'));
    assert.deepEqual(d, ['head', 'end']);
    assert.equal(dec.ended, true);
    dec.push(Buffer.from('more garbage'));
    assert.deepEqual(d, ['head', 'end']);
  });

  test('body chunks are views, bytes past CONTENT_LENGTH are ignored, state getters follow', () => {
    const chunks: Buffer[] = [];
    let ends = 0;
    const dec = new ScgiRequestDecoder(LIMITS, {
      onHead: () => {},
      onBody: (c) => chunks.push(c),
      onEnd: () => ends++,
    });
    const head = encodeScgiHead(new CgiParams(['CONTENT_LENGTH', '10']));
    assert.equal(dec.midHead, false);
    dec.push(head.subarray(0, 5));
    assert.equal(dec.midHead, true);
    assert.equal(dec.headDone, false);
    const first = Buffer.concat([head.subarray(5), Buffer.from('0123')]);
    dec.push(first);
    assert.equal(dec.headDone, true);
    assert.equal(dec.midHead, false);
    assert.equal(dec.bodyRemaining, 6);
    const second = Buffer.from('456789EXTRA');
    dec.push(second);
    assert.equal(dec.bodyRemaining, 0);
    assert.equal(dec.ended, true);
    assert.equal(ends, 1);
    assert.deepEqual(chunks.map(String), ['0123', '456789']);
    assert.ok(isViewOf(chunks[0]!, first) && isViewOf(chunks[1]!, second));
  });

  test('a big body in many chunks', () => {
    const body = Buffer.alloc(200000, 0x61);
    const whole = Buffer.concat([encodeScgiHead(new CgiParams(['CONTENT_LENGTH', String(body.length)])), body]);
    const got = run(splitAt(whole, [7, 100, 5000, 65536, 131072, 199999]));
    assert.equal(got.body.length, 200000);
    assert.deepEqual(got.events, ['head', 'body', 'end']);
  });

  /** A well-formed netstring around `body`, so each case below breaks only what it names. */
  const ns = (body: string) => `${body.length}:${body},`;
  const bad: Array<[string, string, string]> = [
    ['GET / HTTP/1.1\r\n\r\n', ErrorCodes.SCGI_BAD_NETSTRING, 'an HTTP request'],
    [':CONTENT_LENGTH\x000\x00,', ErrorCodes.SCGI_BAD_NETSTRING, 'no length digits'],
    ['017:CONTENT_LENGTH\x000\x00,', ErrorCodes.SCGI_BAD_NETSTRING, 'a leading zero'],
    ['17 :CONTENT_LENGTH\x000\x00,', ErrorCodes.SCGI_BAD_NETSTRING, 'a space in the length'],
    ['17:CONTENT_LENGTH\x000\x00;', ErrorCodes.SCGI_BAD_NETSTRING, 'no closing comma'],
    ['16:CONTENT_LENGTH\x000\x00,', ErrorCodes.SCGI_BAD_NETSTRING, 'a length one short'],
    [ns(''), ErrorCodes.SCGI_BAD_HEADERS, 'no headers at all'],
    [ns('CONTENT_LENGTH\x000'), ErrorCodes.SCGI_BAD_HEADERS, 'a value without its NUL'],
    [ns('CONTENT_LENGTH\x00'), ErrorCodes.SCGI_BAD_HEADERS, 'a name without a value'],
    [ns('CONTENT_LENGTH'), ErrorCodes.SCGI_BAD_HEADERS, 'a name without its NUL'],
    [ns('CONTENT_LENGTH\x000\x00A\x00'), ErrorCodes.SCGI_BAD_HEADERS, 'a name without a value after a pair'],
    [ns('SCGI\x001\x00'), ErrorCodes.SCGI_BAD_HEADERS, 'no CONTENT_LENGTH'],
    [ns('SCGI\x001\x00CONTENT_LENGTH\x000\x00'), ErrorCodes.SCGI_BAD_HEADERS, 'CONTENT_LENGTH not first'],
    [ns('CONTENT_LENGTH\x00\x00'), ErrorCodes.SCGI_BAD_HEADERS, 'an empty CONTENT_LENGTH'],
    [ns('CONTENT_LENGTH\x00abc\x00'), ErrorCodes.SCGI_BAD_HEADERS, 'a non-numeric CONTENT_LENGTH'],
    [ns('CONTENT_LENGTH\x00-1\x00'), ErrorCodes.SCGI_BAD_HEADERS, 'a negative CONTENT_LENGTH'],
    [ns('CONTENT_LENGTH\x001e3\x00'), ErrorCodes.SCGI_BAD_HEADERS, 'an exponent CONTENT_LENGTH'],
    [ns('CONTENT_LENGTH\x00 12\x00'), ErrorCodes.SCGI_BAD_HEADERS, 'a padded CONTENT_LENGTH'],
    [ns('CONTENT_LENGTH\x0099999999999999999\x00'), ErrorCodes.SCGI_BAD_HEADERS, 'a CONTENT_LENGTH past 2^53'],
    [ns('CONTENT_LENGTH\x000\x00\x00v\x00'), ErrorCodes.SCGI_BAD_HEADERS, 'an empty name'],
  ];
  for (const [text, code, why] of bad) {
    test(`refuses ${why}`, () => {
      const got = runText(text);
      assert.equal(got.error, code);
      assert.deepEqual(got.events, []);
    });
  }

  test('the length prefix is refused on the digit that passes maxHeaderBytes', () => {
    const limits: ScgiLimits = { maxBytes: 1000, maxCount: 100, maxHeaderBytes: 250 };
    const ok = run([Buffer.from('250')], limits);
    assert.equal(ok.error, undefined);
    const dec = new ScgiRequestDecoder(limits, { onHead() {}, onBody() {}, onEnd() {} });
    dec.push(Buffer.from('25'));
    assert.throws(
      () => dec.push(Buffer.from('1')),
      (e: unknown) => e instanceof ProtocolError && e.code === ErrorCodes.SCGI_HEADER_TOO_LARGE,
    );
  });

  test('a header of exactly maxHeaderBytes is accepted', () => {
    const head = encodeScgiHead(new CgiParams(['CONTENT_LENGTH', '0', 'X', 'y'.repeat(100)]));
    const len = Number(head.toString('latin1', 0, head.indexOf(':')));
    assert.equal(run([head], { maxBytes: 1000, maxCount: 10, maxHeaderBytes: len }).error, undefined);
    assert.equal(
      run([head], { maxBytes: 1000, maxCount: 10, maxHeaderBytes: len - 1 }).error,
      ErrorCodes.SCGI_HEADER_TOO_LARGE,
    );
  });

  test('a length prefix with too many digits is refused whatever the limit', () => {
    const limits: ScgiLimits = { maxBytes: 1e18, maxCount: 100, maxHeaderBytes: 1e18 };
    assert.equal(run([Buffer.from('1234567890123456')], limits).error, ErrorCodes.SCGI_HEADER_TOO_LARGE);
    assert.equal(run([Buffer.from('123456789012345')], limits).error, undefined);
  });

  test('params count and bytes limits, at the boundary', () => {
    // 3 pairs: CONTENT_LENGTH=0 (15 bytes), SCGI=1 (5), A=bc (3) → 23 bytes of names and values.
    const head = encodeScgiHead(new CgiParams(['A', 'bc']));
    assert.equal(run([head], { maxBytes: 23, maxCount: 3, maxHeaderBytes: 100 }).error, undefined);
    assert.equal(run([head], { maxBytes: 22, maxCount: 3, maxHeaderBytes: 100 }).error, ErrorCodes.PARAMS_TOO_LARGE);
    assert.equal(run([head], { maxBytes: 23, maxCount: 2, maxHeaderBytes: 100 }).error, ErrorCodes.PARAMS_TOO_MANY);
  });

  test('default limits: maxHeaderBytes is maxBytes + 64', () => {
    assert.deepEqual(scgiLimits({ maxBytes: 1000, maxCount: 5 }), { maxBytes: 1000, maxCount: 5, maxHeaderBytes: 1064 });
    assert.equal(scgiLimits({ maxBytes: 1000, maxCount: 5 }, 99).maxHeaderBytes, 99);
  });

  test('decodeScgiHeaders keeps duplicate names in order', () => {
    const p = decodeScgiHeaders(Buffer.from('CONTENT_LENGTH\x000\x00HTTP_X\x00a\x00HTTP_X\x00b\x00', 'latin1'), DEFAULT_PARAMS_LIMITS);
    assert.deepEqual(p.pairs, ['CONTENT_LENGTH', '0', 'HTTP_X', 'a', 'HTTP_X', 'b']);
  });

  test('an exception from a handler propagates and kills the decoder', () => {
    const dec = new ScgiRequestDecoder(LIMITS, {
      onHead() {
        throw new TypeError('handler bug');
      },
      onBody() {},
      onEnd() {},
    });
    assert.throws(() => dec.push(Buffer.from(SPEC_EXAMPLE, 'latin1')), TypeError);
    assert.throws(() => dec.push(Buffer.from('x')), ProtocolError);
  });
});

describe('properties', () => {
  const latin1NoNul = fc.integer({ min: 1, max: 255 }).map((c) => String.fromCharCode(c));
  const name = fc
    .string({ unit: latin1NoNul, minLength: 1, maxLength: 30 })
    .filter((n) => n !== 'CONTENT_LENGTH' && n !== 'SCGI');
  const value = fc.oneof(
    fc.string({ unit: latin1NoNul, maxLength: 50 }),
    fc.integer({ min: 0, max: 5000 }).map((n) => 'v'.repeat(n)),
  );
  const request = fc.record({
    pairs: fc.array(fc.tuple(name, value), { maxLength: 25 }),
    body: fc.uint8Array({ maxLength: 400 }).map((a) => Buffer.from(a)),
    trailing: fc.uint8Array({ maxLength: 10 }).map((a) => Buffer.from(a)),
  });
  const cuts = fc.array(fc.nat(), { maxLength: 10 });
  const BIG: ScgiLimits = { maxBytes: 1 << 24, maxCount: 1 << 16, maxHeaderBytes: 1 << 24 };

  const wire = (r: { pairs: Array<[string, string]>; body: Buffer; trailing: Buffer }): Buffer => {
    const params = new CgiParams(['CONTENT_LENGTH', String(r.body.length), ...r.pairs.flat()]);
    return Buffer.concat([encodeScgiHead(params), r.body, r.trailing]);
  };

  test('encode then decode (split anywhere) gives params and body back', () => {
    fc.assert(
      fc.property(request, cuts, (r, cs) => {
        const got = run(splitAt(wire(r), cs), BIG);
        assert.equal(got.error, undefined);
        assert.deepEqual(got.pairs, ['CONTENT_LENGTH', String(r.body.length), 'SCGI', '1', ...r.pairs.flat()]);
        assert.equal(got.contentLength, r.body.length);
        assert.equal(got.body, r.body.toString('latin1'));
        assert.deepEqual(got.events, r.body.length > 0 ? ['head', 'body', 'end'] : ['head', 'end']);
      }),
      { numRuns: 300 },
    );
  });

  test('random and mutated input: only ProtocolError, same outcome however split', () => {
    const mutated = fc
      .tuple(request, fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 4 }))
      .map(([r, muts]) => {
        const b = wire(r);
        for (const [at, byte] of muts) b[at % b.length] = byte;
        return b;
      });
    const input = fc.oneof(
      mutated,
      fc.uint8Array({ maxLength: 200 }).map((a) => Buffer.from(a)),
      fc.tuple(fc.integer({ min: 0, max: 300 }), fc.uint8Array({ maxLength: 300 })).map(([n, a]) => Buffer.concat([Buffer.from(`${n}:`), Buffer.from(a)])),
    );
    const limitsArb = fc.record({
      maxBytes: fc.integer({ min: 0, max: 2000 }),
      maxCount: fc.integer({ min: 0, max: 30 }),
      maxHeaderBytes: fc.integer({ min: 0, max: 3000 }),
    });
    fc.assert(
      fc.property(input, cuts, limitsArb, (buf, cs, limits) => {
        assert.deepEqual(run(splitAt(buf, cs), limits), run([buf], limits));
      }),
      { numRuns: 2000 },
    );
  });
});
