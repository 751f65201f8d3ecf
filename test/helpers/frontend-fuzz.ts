/**
 * Fuzzing a running daemon's front ends (FastCGI, SCGI, HTTP) over loopback: each
 * input is a valid request bent by fast-check (bytes flipped, inserted, cut, the head
 * replaced by garbage), sent on its own connection in random pieces. Per input: at
 * most one response. After every batch: the daemon still runs and a valid request on a
 * fresh connection gets the backend's 200. Used by the CI test (a few thousand inputs)
 * and bench/frontend-fuzz.ts (10^5 and more).
 */
import { connect } from 'node:net';
import fc from 'fast-check';
import { FcgiDecoder, RecordType, type FcgiRecord } from '../../src/protocol/fastcgi.js';
import { requestRecords } from './fcgi-client.js';
import { encodeScgiRequest } from './scgi-client.js';

export type FuzzProtocol = 'fastcgi' | 'scgi' | 'http';

export interface FuzzTarget {
  protocol: FuzzProtocol;
  port: number;
  /** The backend's 200 body, to recognise a served probe. */
  okBody: string;
}

export interface FuzzCounts {
  inputs: number;
  /** Inputs that got a response (error pages included). */
  answered: number;
  /** Inputs the daemon closed (or reset) without a response. */
  closed: number;
  /** Inputs still open after the per-input wait (we closed them). */
  open: number;
  /** Probes (valid requests after each batch) served. */
  probes: number;
}

export interface FuzzOptions {
  inputs: number;
  batch?: number;
  /** Connections in flight at once. */
  concurrency?: number;
  seed?: number;
  /** Stop early (between batches) after this long; the counts say how many ran. */
  maxMs?: number;
  /** Per input: give up waiting for the daemon's close after this long. */
  waitMs?: number;
}

const PARAMS = { REQUEST_METHOD: 'POST', SCRIPT_NAME: '/f.php', SCRIPT_FILENAME: '/srv/f.php', REQUEST_URI: '/f.php?a=1', QUERY_STRING: 'a=1', CONTENT_TYPE: 'text/plain' };
const BODY = Buffer.from('name=value&x=1');

/** One valid request in the protocol's framing (one request per connection). */
export function validRequest(protocol: FuzzProtocol, body = BODY): Buffer {
  switch (protocol) {
    case 'fastcgi':
      return Buffer.concat(requestRecords(1, { ...PARAMS, CONTENT_LENGTH: String(body.length) }, body, { keepConn: false }));
    case 'scgi':
      return encodeScgiRequest(PARAMS, body);
    case 'http':
      return Buffer.concat([Buffer.from(`POST /f.php?a=1 HTTP/1.1\r\nHost: fuzz\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`, 'latin1'), body]);
  }
}

type Mutation =
  | { kind: 'flip'; at: number; xor: number }
  | { kind: 'insert'; at: number; bytes: Uint8Array }
  | { kind: 'delete'; at: number; n: number }
  | { kind: 'truncate'; at: number };

const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), xor: fc.integer({ min: 1, max: 255 }) }),
  fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), bytes: fc.uint8Array({ minLength: 1, maxLength: 16 }) }),
  fc.record({ kind: fc.constant('delete' as const), at: fc.nat(), n: fc.integer({ min: 1, max: 16 }) }),
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
);

interface FuzzInput {
  bytes: Buffer;
  /** Write boundaries (fractions of the length). */
  cuts: number[];
  /** Send FIN after the last byte. */
  halfClose: boolean;
}

function mutate(base: Buffer, ms: Mutation[]): Buffer {
  let b = base;
  for (const m of ms) {
    if (b.length === 0) break;
    const at = m.at % b.length;
    if (m.kind === 'flip') {
      b = Buffer.from(b);
      b[at] = b[at]! ^ m.xor;
    } else if (m.kind === 'insert') b = Buffer.concat([b.subarray(0, at), Buffer.from(m.bytes), b.subarray(at)]);
    else if (m.kind === 'delete') b = Buffer.concat([b.subarray(0, at), b.subarray(at + m.n)]);
    else b = b.subarray(0, at);
  }
  return b;
}

function inputArb(protocol: FuzzProtocol): fc.Arbitrary<FuzzInput> {
  const base = validRequest(protocol);
  const bytes = fc.oneof(
    { weight: 8, arbitrary: fc.array(mutationArb, { minLength: 1, maxLength: 4 }).map((ms) => mutate(base, ms)) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 256 }).map((u) => Buffer.from(u)) },
    { weight: 1, arbitrary: fc.constant(base) },
  );
  return fc.record({
    bytes,
    cuts: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 4 }),
    halfClose: fc.boolean(),
  });
}

/**
 * Responses in what came back for one single-request input: FastCGI END_REQUEST
 * records (and a decoding failure), HTTP status lines, SCGI/CGI Status heads.
 */
export function countResponses(protocol: FuzzProtocol, got: Buffer): { responses: number; bad?: string } {
  if (got.length === 0) return { responses: 0 };
  if (protocol === 'fastcgi') {
    const ends = new Map<number, number>();
    try {
      new FcgiDecoder((r: FcgiRecord) => {
        if (r.type === RecordType.EndRequest) ends.set(r.requestId, (ends.get(r.requestId) ?? 0) + 1);
      }).push(got);
    } catch (err) {
      return { responses: 0, bad: `undecodable answer: ${(err as Error).message}` };
    }
    let n = 0;
    for (const [id, c] of ends) {
      if (c > 1) return { responses: c, bad: `request ${id} ended ${c} times` };
      n += c;
    }
    return { responses: n };
  }
  const text = got.toString('latin1');
  const re = protocol === 'http' ? /(^|\n)HTTP\/1\.[01] \d{3} /g : /(^|\n)Status: \d{3} /g;
  return { responses: text.match(re)?.length ?? 0 };
}

/** HTTP inputs whose bytes hold a second request head would rightly get two answers. */
function singleRequest(protocol: FuzzProtocol, b: Buffer): boolean {
  if (protocol !== 'http') return true;
  const end = b.indexOf('\r\n\r\n');
  const bare = b.indexOf('\n\n');
  return (end < 0 || end + 4 + BODY.length >= b.length) && (bare < 0 || bare + 2 + BODY.length >= b.length);
}

interface Sent {
  got: Buffer;
  ended: 'closed' | 'open';
}

function send(port: number, input: FuzzInput, waitMs: number): Promise<Sent> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const s = connect(port, '127.0.0.1');
    let done = false;
    const finish = (ended: Sent['ended']): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      s.destroy();
      resolve({ got: Buffer.concat(chunks), ended });
    };
    const timer = setTimeout(() => finish('open'), waitMs);
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('error', () => finish('closed'));
    s.on('close', () => finish('closed'));
    s.on('connect', () => {
      const b = input.bytes;
      const points = [...new Set(input.cuts.map((f) => Math.floor(f * b.length)))].sort((x, y) => x - y);
      let off = 0;
      for (const p of [...points, b.length]) {
        if (p > off) s.write(b.subarray(off, p));
        off = Math.max(off, p);
      }
      if (input.halfClose) s.end();
    });
  });
}

/** A valid request on a fresh connection must get the backend's 200. */
async function probe(t: FuzzTarget): Promise<void> {
  const r = await send(t.port, { bytes: validRequest(t.protocol), cuts: [], halfClose: false }, 5000);
  let body = '';
  if (t.protocol === 'fastcgi') {
    const out: Buffer[] = [];
    new FcgiDecoder((rec) => rec.type === RecordType.Stdout && out.push(Buffer.from(rec.content))).push(r.got);
    body = Buffer.concat(out).toString('latin1');
  } else {
    body = r.got.toString('latin1');
  }
  if (!/^(HTTP\/1\.1 200|Status: 200)/.test(body) || !body.endsWith(t.okBody)) {
    throw new Error(`${t.protocol} probe after a fuzz batch was not served: ${JSON.stringify(body.slice(0, 300))}`);
  }
}

/** Runs the inputs in batches; throws on the first input with more than one response or a failed probe. */
export async function fuzzFrontend(t: FuzzTarget, o: FuzzOptions, alive: () => boolean): Promise<FuzzCounts> {
  const batch = o.batch ?? 500;
  const concurrency = o.concurrency ?? 64;
  const waitMs = o.waitMs ?? 3000;
  const started = Date.now();
  const counts: FuzzCounts = { inputs: 0, answered: 0, closed: 0, open: 0, probes: 0 };
  const arb = inputArb(t.protocol).filter((i) => singleRequest(t.protocol, i.bytes));
  let seed = o.seed ?? 1;
  while (counts.inputs < o.inputs) {
    if (o.maxMs !== undefined && Date.now() - started > o.maxMs) break;
    const inputs = fc.sample(arb, { numRuns: Math.min(batch, o.inputs - counts.inputs), seed: seed++ });
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < inputs.length) {
        const input = inputs[next++]!;
        const r = await send(t.port, input, waitMs);
        const { responses, bad } = countResponses(t.protocol, r.got);
        if (bad !== undefined || responses > 1) {
          throw new Error(`${t.protocol} input got ${responses} responses${bad ? ` (${bad})` : ''}: input ${input.bytes.toString('base64')}, answer ${r.got.toString('base64')}`);
        }
        counts.inputs++;
        if (responses === 1) counts.answered++;
        else if (r.ended === 'closed') counts.closed++;
        else counts.open++;
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    if (!alive()) throw new Error(`the daemon died during ${t.protocol} fuzzing after ${counts.inputs} inputs`);
    await probe(t);
    counts.probes++;
  }
  return counts;
}
