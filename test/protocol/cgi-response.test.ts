/**
 * CGI response head parser, error responses and reason phrases: tables of heads,
 * every-offset splits, limits at the exact boundary, and fast-check properties.
 */
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ErrorCodes, ProtocolError } from '../../src/errors.js';
import {
  CgiResponseHeadParser,
  MAX_RESPONSE_HEAD,
  parseCgiHead,
  parseCgiHeadStrict,
  reasonPhrase,
  renderCgiError,
} from '../../src/protocol/cgi-response.js';
import { announcedLength, type CgiResponseHead } from '../../src/protocol/exchange.js';
import { assertSplitInvariant, cutsArb, splitAt } from './split.js';

function isViewOf(view: Buffer, whole: Buffer): boolean {
  return (
    view.buffer === whole.buffer &&
    view.byteOffset >= whole.byteOffset &&
    view.byteOffset + view.length <= whole.byteOffset + whole.length
  );
}

function throwsCode(fn: () => unknown, code: string): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof ProtocolError, `expected ProtocolError, got ${String(err)}`);
    assert.equal(err.code, code);
    return true;
  });
}

interface Parsed {
  status: number;
  reason: string;
  headers: Array<[string, string]>;
  raw: string;
  body: string;
}

/** Feeds the chunks; returns the head, the raw head and all body bytes that followed it. */
function parseChunks(chunks: Buffer[], max?: number): Parsed | { error: string } | undefined {
  const p = new CgiResponseHeadParser(max);
  let head: CgiResponseHead | undefined;
  const body: Buffer[] = [];
  try {
    for (const c of chunks) {
      if (head) {
        body.push(c);
        continue;
      }
      const r = p.push(c);
      if (r) {
        head = r.head;
        body.push(r.rest);
      }
    }
  } catch (err) {
    if (!(err instanceof ProtocolError)) throw err;
    return { error: err.code };
  }
  if (!head) return undefined;
  return {
    status: head.status,
    reason: head.reason,
    headers: head.headers,
    raw: head.raw.toString('latin1'),
    body: Buffer.concat(body).toString('latin1'),
  };
}

const parseOne = (s: string, max?: number) => parseChunks([Buffer.from(s, 'latin1')], max);

describe('heads', () => {
  const good: Array<[string, number, string, Array<[string, string]>]> = [
    ['Status: 404 Not Found\r\nContent-Type: text/html\r\n\r\n', 404, 'Not Found', [['Content-Type', 'text/html']]],
    ['Status: 404\r\n\r\n', 404, 'Not Found', []],
    ['Status: 299 Custom Thing\n\n', 299, 'Custom Thing', []],
    ['Status: 503 Service Unavailable \r\nRetry-After: 3\r\n\r\n', 503, 'Service Unavailable', [['Retry-After', '3']]],
    ['Content-Type: text/html\n\n', 200, 'OK', [['Content-Type', 'text/html']]],
    ['X-Powered-By: PHP/8.2\r\nContent-type: text/html; charset=UTF-8\r\n\r\n', 200, 'OK', [
      ['X-Powered-By', 'PHP/8.2'],
      ['Content-type', 'text/html; charset=UTF-8'],
    ]],
    ['Location: /x\r\n\r\n', 302, 'Found', [['Location', '/x']]],
    ['location: /lower\n\n', 302, 'Found', [['location', '/lower']]],
    ['Status: 301 Moved\r\nLocation: http://a/\r\n\r\n', 301, 'Moved', [['Location', 'http://a/']]],
    ['Location: /y\r\nStatus: 307\r\n\r\n', 307, 'Temporary Redirect', [['Location', '/y']]],
    ['STATUS: 500\n\n', 500, 'Internal Server Error', []],
    ['status:418\n\n', 418, "I'm a Teapot", []],
    ['Status: 599\n\n', 599, 'Unknown', []],
    ['X-A:   spaced out \t\r\nX-Empty:\r\nX-Colon: a:b:c\r\n\r\n', 200, 'OK', [
      ['X-A', 'spaced out'],
      ['X-Empty', ''],
      ['X-Colon', 'a:b:c'],
    ]],
    ['Set-Cookie: a=1\nSet-Cookie: b=2\r\n\n', 200, 'OK', [
      ['Set-Cookie', 'a=1'],
      ['Set-Cookie', 'b=2'],
    ]],
    ['X-Latin1: caf\xe9\xa0\r\n\r\n', 200, 'OK', [['X-Latin1', 'caf\xe9\xa0']]],
    ['X-Tab: a\tb\r\n\r\n', 200, 'OK', [['X-Tab', 'a\tb']]],
    ['\r\n', 200, 'OK', []],
    ['\n', 200, 'OK', []],
  ];
  for (const [text, status, reason, headers] of good) {
    test(`parses ${JSON.stringify(text)}`, () => {
      const body = 'BODY\r\n\r\nmore';
      assert.deepEqual(parseOne(text + body), { status, reason, headers, raw: text, body });
    });
  }

  const bad: Array<[string, string]> = [
    ['NoColonHere\r\n\r\n', 'line without a colon'],
    ['HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n', 'HTTP status line (NPH output)'],
    ['Status: abc\r\n\r\n', 'non-numeric status'],
    ['Status: 20\r\n\r\n', 'two-digit status'],
    ['Status: 2000\r\n\r\n', 'four-digit status'],
    ['Status: 099 Low\r\n\r\n', 'status below 100'],
    ['Status:\r\n\r\n', 'empty status'],
    ['Status: 404Not Found\r\n\r\n', 'no space after the code'],
    ['Status: -200\r\n\r\n', 'negative status'],
    ['Bad Name: x\r\n\r\n', 'space in a name'],
    [': novalue\r\n\r\n', 'empty name'],
    ['Content-Type: text/html\r\n Folded: x\r\n\r\n', 'obsolete line folding'],
    ['X-A: a\x00b\r\n\r\n', 'NUL in a value'],
    ['X-A: a\rb\r\n\r\n', 'bare CR in a value'],
    ['X-A: a\r\r\n\r\n', 'CR before CRLF'],
    ['X-\xe9: a\r\n\r\n', 'non-ASCII name'],
  ];
  for (const [text, why] of bad) {
    test(`refuses ${why}`, () => {
      assert.deepEqual(parseOne(text), { error: ErrorCodes.CGI_BAD_RESPONSE_HEAD });
    });
  }

  test('parseCgiHead works on a complete head directly', () => {
    const raw = Buffer.from('Status: 201\r\nX: y\r\n\r\n');
    const h = parseCgiHead(raw);
    assert.equal(h.status, 201);
    assert.equal(h.reason, 'Created');
    assert.deepEqual(h.headers, [['X', 'y']]);
    assert.equal(h.raw, raw);
  });
});

describe('streaming', () => {
  const text = 'Status: 200 OK\r\nContent-Type: text/plain\r\nX-Long: ' + 'L'.repeat(300) + '\r\n\r\nhello\nbody';

  test('split at every offset gives the same head and body', () => {
    const whole = Buffer.from(text, 'latin1');
    const want = parseChunks([whole]);
    assert.ok(want && 'status' in want);
    assert.equal(want.body, 'hello\nbody');
    assertSplitInvariant(whole, (chunks) => parseChunks(chunks), want);
  });

  test('the blank line split between chunks in every way (LF and CRLF)', () => {
    for (const head of ['A: b\r\n\r\n', 'A: b\n\n', 'A: b\n\r\n', 'A: b\r\n\n']) {
      const whole = Buffer.from(head + 'Z');
      for (let i = 0; i <= whole.length; i++) {
        for (let j = i; j <= whole.length; j++) {
          const r = parseChunks([whole.subarray(0, i), whole.subarray(i, j), whole.subarray(j)]);
          assert.deepEqual(r, { status: 200, reason: 'OK', headers: [['A', 'b']], raw: head, body: 'Z' }, `${JSON.stringify(head)} ${i}/${j}`);
        }
      }
    }
  });

  test('raw and rest are views when the head came in one chunk', () => {
    const chunk = Buffer.from('Content-Type: text/plain\r\n\r\nbody');
    const r = new CgiResponseHeadParser().push(chunk)!;
    assert.ok(isViewOf(r.head.raw, chunk));
    assert.ok(isViewOf(r.rest, chunk));
    assert.equal(r.rest.toString(), 'body');
  });

  test('raw is a copy with the exact bytes when the head straddled chunks; rest is a view of the last chunk', () => {
    const a = Buffer.from('Content-Type: te');
    const b = Buffer.from('xt/plain\r\n\r\nbody');
    const p = new CgiResponseHeadParser();
    assert.equal(p.push(a), undefined);
    assert.equal(p.midHead, true);
    const r = p.push(b)!;
    assert.equal(r.head.raw.toString(), 'Content-Type: text/plain\r\n\r\n');
    assert.ok(!isViewOf(r.head.raw, a) && !isViewOf(r.head.raw, b));
    assert.ok(isViewOf(r.rest, b));
    assert.equal(r.rest.toString(), 'body');
    assert.equal(p.done, true);
    assert.equal(p.midHead, false);
  });

  test('after the head, push returns the same head and the whole chunk as rest', () => {
    const p = new CgiResponseHeadParser();
    const first = p.push(Buffer.from('X: 1\n\n'))!;
    const more = Buffer.from('more body');
    const r = p.push(more)!;
    assert.equal(r.head, first.head);
    assert.equal(r.rest, more);
  });

  test('empty chunks are harmless', () => {
    const p = new CgiResponseHeadParser();
    assert.equal(p.push(Buffer.alloc(0)), undefined);
    assert.equal(p.midHead, false);
    assert.equal(p.push(Buffer.from('X: 1\r\n')), undefined);
    assert.equal(p.push(Buffer.alloc(0)), undefined);
    assert.equal(p.push(Buffer.from('\r\n'))?.head.status, 200);
  });
});

describe('size limit', () => {
  // A head of exactly n bytes: "X: " + filler + "\r\n\r\n".
  const headOf = (n: number) => 'X: ' + 'a'.repeat(n - 7) + '\r\n\r\n';

  test('a head of exactly the limit passes, one byte more is refused', () => {
    for (const max of [64, 1000, MAX_RESPONSE_HEAD]) {
      assert.equal(headOf(max).length, max);
      const ok = parseOne(headOf(max) + 'body', max);
      assert.ok(ok && 'status' in ok && ok.raw.length === max);
      assert.deepEqual(parseOne(headOf(max + 1) + 'body', max), { error: ErrorCodes.CGI_RESPONSE_HEAD_TOO_LARGE });
    }
  });

  test('the same boundary holds when the head comes byte by byte, and the refusal comes without waiting for the end', () => {
    const max = 100;
    const ok = Buffer.from(headOf(max) + 'rest');
    const chunks: Buffer[] = [];
    for (let i = 0; i < ok.length; i++) chunks.push(ok.subarray(i, i + 1));
    assert.equal((parseChunks(chunks, max) as Parsed).raw.length, max);

    const p = new CgiResponseHeadParser(max);
    const endless = Buffer.from('X: ' + 'a'.repeat(1000));
    let fed = 0;
    throwsCode(() => {
      for (; fed < endless.length; fed++) p.push(endless.subarray(fed, fed + 1));
    }, ErrorCodes.CGI_RESPONSE_HEAD_TOO_LARGE);
    assert.equal(fed, max - 1, 'refused on the byte that reaches the limit without a blank line');
  });

  test('a big first chunk without a blank line is refused at once', () => {
    const p = new CgiResponseHeadParser();
    throwsCode(() => p.push(Buffer.alloc(MAX_RESPONSE_HEAD, 0x41)), ErrorCodes.CGI_RESPONSE_HEAD_TOO_LARGE);
  });

  test('a body chunk far larger than the limit after a small partial head is fine', () => {
    const p = new CgiResponseHeadParser(1024);
    assert.equal(p.push(Buffer.from('Content-Type: a\r\n')), undefined);
    const big = Buffer.concat([Buffer.from('\r\n'), Buffer.alloc(1 << 20, 0x42)]);
    const r = p.push(big)!;
    assert.equal(r.head.raw.toString(), 'Content-Type: a\r\n\r\n');
    assert.equal(r.rest.length, 1 << 20);
    assert.ok(isViewOf(r.rest, big));
  });

  test('a head that grows the buffer several times', () => {
    const p = new CgiResponseHeadParser();
    const lines = Array.from({ length: 400 }, (_, i) => `X-H${i}: ${'v'.repeat(50)}\r\n`);
    for (const l of lines) assert.equal(p.push(Buffer.from(l)), undefined);
    const r = p.push(Buffer.from('\r\nB'))!;
    assert.equal(r.head.headers.length, 400);
    assert.equal(r.head.raw.toString(), lines.join('') + '\r\n');
    assert.equal(r.rest.toString(), 'B');
  });
});

describe('error responses and reason phrases', () => {
  test('renderCgiError: exact bytes with Retry-After', () => {
    assert.equal(
      renderCgiError(503, 'Service busy', 5).toString('latin1'),
      'Status: 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nRetry-After: 5\r\n' +
        'Content-Length: 13\r\n\r\nService busy\n',
    );
  });

  test('renderCgiError: no Retry-After unless given; fractions round up; UTF-8 body length in bytes', () => {
    assert.equal(
      renderCgiError(502, 'Bad gateway').toString(),
      'Status: 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 12\r\n\r\nBad gateway\n',
    );
    assert.match(renderCgiError(503, 'x', 1.2).toString(), /\r\nRetry-After: 2\r\n/);
    assert.match(renderCgiError(503, 'x', 0).toString(), /\r\nRetry-After: 0\r\n/);
    const r = renderCgiError(500, 'caf\u00e9 \u{1f600}');
    const text = r.toString('utf8');
    assert.match(text, /Content-Length: 11\r\n/); // 3 + 2 + 1 + 4 + 1 bytes
    assert.ok(text.endsWith('\r\n\r\ncaf\u00e9 \u{1f600}\n'));
  });

  test('renderCgiError output parses back', () => {
    const out = parseChunks([renderCgiError(504, 'Backend timed out', 7)]) as Parsed;
    assert.equal(out.status, 504);
    assert.equal(out.reason, 'Gateway Timeout');
    assert.deepEqual(out.headers, [
      ['Content-Type', 'text/plain; charset=utf-8'],
      ['Retry-After', '7'],
      ['Content-Length', '18'],
    ]);
    assert.equal(out.body, 'Backend timed out\n');
  });

  test('reasonPhrase', () => {
    const table: Array<[number, string]> = [
      [200, 'OK'],
      [204, 'No Content'],
      [301, 'Moved Permanently'],
      [302, 'Found'],
      [304, 'Not Modified'],
      [400, 'Bad Request'],
      [403, 'Forbidden'],
      [404, 'Not Found'],
      [413, 'Content Too Large'],
      [500, 'Internal Server Error'],
      [502, 'Bad Gateway'],
      [503, 'Service Unavailable'],
      [504, 'Gateway Timeout'],
      [299, 'Unknown'],
      [999, 'Unknown'],
      [0, 'Unknown'],
    ];
    for (const [s, r] of table) assert.equal(reasonPhrase(s), r, String(s));
  });
});

describe('properties', () => {
  const tokenChar = fc.constantFrom(...'!#$%&\'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'.split(''));
  const valueChar = fc
    .oneof(fc.integer({ min: 0x20, max: 0x7e }), fc.integer({ min: 0x80, max: 0xff }), fc.constant(9))
    .map((c) => String.fromCharCode(c));
  const name = fc.string({ unit: tokenChar, minLength: 1, maxLength: 20 }).filter((n) => !/^(status|location)$/i.test(n));
  // Values as a parser returns them: no leading or trailing blanks.
  const value = fc.string({ unit: valueChar, maxLength: 60 }).map((v) => v.replace(/^[ \t]+|[ \t]+$/g, ''));
  const headArb = fc.record({
    status: fc.option(fc.integer({ min: 100, max: 999 })),
    headers: fc.array(fc.tuple(name, value), { maxLength: 12 }),
    crlf: fc.array(fc.boolean(), { minLength: 14, maxLength: 14 }),
    body: fc.string({ maxLength: 30 }),
  });
  const render = (h: { status: number | null; headers: Array<[string, string]>; crlf: boolean[]; body: string }): string => {
    const lines = h.headers.map(([n, v]) => `${n}: ${v}`);
    if (h.status !== null) lines.unshift(`Status: ${h.status}`);
    lines.push('');
    return lines.map((l, i) => l + (h.crlf[i % 14] ? '\r\n' : '\n')).join('') + h.body;
  };
  const cuts = cutsArb(6);

  test('rendered heads parse back (LF or CRLF), however split', () => {
    fc.assert(
      fc.property(headArb, cuts, (h, cs) => {
        const text = render(h);
        const got = parseChunks(splitAt(Buffer.from(text, 'latin1'), cs)) as Parsed;
        const status = h.status ?? 200;
        assert.equal(got.status, status);
        assert.equal(got.reason, reasonPhrase(status));
        assert.deepEqual(got.headers, h.headers);
        assert.equal(got.body, Buffer.from(h.body, 'latin1').toString('latin1'));
        assert.equal(got.raw + got.body, Buffer.from(text, 'latin1').toString('latin1'));
      }),
      { numRuns: 500 },
    );
  });

  test('the byte-level head check accepts and refuses exactly what the string parser does, with the same headers', () => {
    const outcome = (f: () => CgiResponseHead): unknown => {
      try {
        const h = f();
        return { status: h.status, reason: h.reason, headers: h.headers };
      } catch (err) {
        assert.ok(err instanceof ProtocolError);
        return { error: err.code, message: err.message };
      }
    };
    const mutated = fc
      .tuple(headArb, fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 3 }))
      .map(([h, muts]) => {
        const b = Buffer.from(render({ ...h, body: '' }), 'latin1');
        for (const [at, byte] of muts) if (b.length > 2) b[at % (b.length - 2)] = byte;
        return b;
      });
    fc.assert(
      fc.property(mutated, (raw) => {
        assert.deepEqual(outcome(() => parseCgiHead(raw)), outcome(() => parseCgiHeadStrict(raw)));
      }),
      { numRuns: 3000 },
    );
  });

  test('the Content-Length read with the status is the one the header list announces', () => {
    const lengthName = fc.constantFrom('Content-Length', 'content-length', 'CONTENT-LENGTH', 'Content-Lengthy', 'X-Content-Length');
    const lengthValue = fc.oneof(fc.nat({ max: 1e9 }).map(String), fc.constantFrom('', '12, 12', '-1', '1e3', '0x10', ' 7', '1234567890123456'), value);
    const withLengths = fc.record({
      head: headArb,
      lengths: fc.array(fc.tuple(lengthName, lengthValue, fc.nat()), { maxLength: 3 }),
    });
    fc.assert(
      fc.property(withLengths, ({ head, lengths }) => {
        const headers = [...head.headers];
        for (const [n, v, at] of lengths) headers.splice(at % (headers.length + 1), 0, [n, v.replace(/^[ \t]+|[ \t]+$/g, '')]);
        const parsed = parseCgiHead(Buffer.from(render({ ...head, headers, body: '' }), 'latin1'));
        // The list-based reading, as for a head whose maker did not read the length.
        const listed = announcedLength({ status: parsed.status, reason: parsed.reason, raw: parsed.raw, headers: parsed.headers });
        assert.equal(parsed.contentLength, listed);
        assert.equal(announcedLength(parsed), listed);
      }),
      { numRuns: 1000 },
    );
  });

  test('random and mutated input: only ProtocolError, and the same outcome however split', () => {
    const mutated = fc
      .tuple(headArb, fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 4 }))
      .map(([h, muts]) => {
        const b = Buffer.from(render(h), 'latin1');
        for (const [at, byte] of muts) if (b.length) b[at % b.length] = byte;
        return b;
      });
    const input = fc.oneof(mutated, fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a)));
    fc.assert(
      fc.property(input, cuts, fc.integer({ min: 1, max: 400 }), (buf, cs, max) => {
        assert.deepEqual(parseChunks(splitAt(buf, cs), max), parseChunks([buf], max));
      }),
      { numRuns: 2000 },
    );
  });
});

test('one parser serves many responses: reset() starts a new head, earlier heads stay intact', () => {
  const p = new CgiResponseHeadParser();
  const first = p.push(Buffer.from('Status: 404 Nope\r\nX-A: 1\r\n'));
  assert.equal(first, undefined);
  const a = p.push(Buffer.from('\r\nbody-a'))!;
  assert.equal(a.head.status, 404);
  assert.equal(a.rest.toString(), 'body-a');
  p.reset();
  assert.equal(p.done, false);
  assert.equal(p.push(Buffer.from('X-B: 2\n')), undefined);
  const b = p.push(Buffer.from('\nbody-b'))!;
  assert.equal(b.head.status, 200);
  assert.deepEqual(b.head.headers, [['X-B', '2']]);
  assert.equal(b.rest.toString(), 'body-b');
  assert.deepEqual(a.head.headers, [['X-A', '1']]);
  assert.equal(a.head.raw.toString(), 'Status: 404 Nope\r\nX-A: 1\r\n\r\n');
});
