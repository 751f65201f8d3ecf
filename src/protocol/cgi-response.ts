/**
 * CGI response heads (RFC 3875 §6): the part of a backend's output before the blank
 * line. Used to learn the status for logs and to build HTTP responses. Pure.
 */
import { ErrorCodes, ProtocolError } from '../errors.js';
import { contentLengthOf, type CgiResponseHead } from './exchange.js';

export const MAX_RESPONSE_HEAD = 64 * 1024;

const LF = 10;
const CR = 13;
/**
 * The typed array's own indexOf (a V8 builtin) for a byte: Buffer's validates its
 * arguments and calls into the runtime, more than a short head line costs to scan.
 */
const indexOfByte = Uint8Array.prototype.indexOf as (this: Uint8Array, byte: number, from: number) => number;
/** First buffer for a head that straddles chunks; grows by doubling up to the limit. */
const INITIAL_ACC = 1024;

/**
 * Push parser. push(chunk) returns undefined while the head is incomplete, then
 * { head, rest } where rest is the body bytes that followed the head in that chunk
 * (a view). Accepts \n or \r\n line ends. No Status header → 200, or 302 when a
 * Location header is present. Throws ProtocolError CGI_BAD_RESPONSE_HEAD /
 * CGI_RESPONSE_HEAD_TOO_LARGE.
 *
 * `raw` is a view of the chunk when the head came in one chunk, else a copy. A head of
 * just a blank line is accepted as 200 with no headers (nginx does the same). After the
 * head is done, push() returns the same head with the whole chunk as `rest`.
 */
export class CgiResponseHeadParser {
  private readonly max: number;
  // Bytes of a head that straddles chunks, at most `max` of them.
  private acc: Buffer | undefined;
  private accLen = 0;
  // Where the blank-line search resumes, so each byte is looked at once: at a line start
  // whose first bytes had not all arrived, or (atLineStart false) inside a line.
  private scanPos = 0;
  private atLineStart = true;
  private head: CgiResponseHead | undefined;

  constructor(maxHeadBytes: number = MAX_RESPONSE_HEAD) {
    this.max = maxHeadBytes;
  }

  /** Ready for the next response (one parser per connection, not per request). */
  reset(): void {
    this.acc = undefined;
    this.accLen = 0;
    this.scanPos = 0;
    this.atLineStart = true;
    this.head = undefined;
  }

  /** True once the head was parsed. */
  get done(): boolean {
    return this.head !== undefined;
  }

  /** True when some head bytes arrived but not the blank line (EOF now means a cut head). */
  get midHead(): boolean {
    return this.head === undefined && this.accLen > 0;
  }

  push(chunk: Buffer): { head: CgiResponseHead; rest: Buffer } | undefined {
    if (this.head !== undefined) return { head: this.head, rest: chunk };
    if (this.acc === undefined) {
      const end = this.findEnd(chunk, chunk.length);
      if (end >= 0) {
        if (end > this.max) throw tooLarge(this.max);
        return this.finish(chunk.subarray(0, end), chunk.subarray(end));
      }
      if (chunk.length >= this.max) throw tooLarge(this.max);
      if (chunk.length === 0) return undefined;
      this.acc = Buffer.allocUnsafe(Math.min(this.max, Math.max(INITIAL_ACC, chunk.length * 2)));
      chunk.copy(this.acc, 0);
      this.accLen = chunk.length;
      return undefined;
    }
    // Only the bytes that could still belong to a head of at most `max` bytes are copied.
    const n = Math.min(chunk.length, this.max - this.accLen);
    if (this.accLen + n > this.acc.length) {
      const grown = Buffer.allocUnsafe(Math.min(this.max, Math.max(this.acc.length * 2, this.accLen + n)));
      this.acc.copy(grown, 0, 0, this.accLen);
      this.acc = grown;
    }
    chunk.copy(this.acc, this.accLen, 0, n);
    const before = this.accLen;
    this.accLen += n;
    const end = this.findEnd(this.acc, this.accLen);
    if (end < 0) {
      if (this.accLen >= this.max) throw tooLarge(this.max);
      return undefined;
    }
    const raw = this.acc.subarray(0, end);
    this.acc = undefined;
    return this.finish(raw, chunk.subarray(end - before));
  }

  /** Index just past the blank line in buf[0..len), or -1 (remembering where to resume). */
  private findEnd(buf: Buffer, len: number): number {
    let p = this.scanPos;
    let lineStart = this.atLineStart;
    for (;;) {
      if (lineStart) {
        if (p >= len) break;
        const c = buf[p];
        if (c === LF) return p + 1;
        if (c === CR) {
          if (p + 1 >= len) break;
          if (buf[p + 1] === LF) return p + 2;
        }
        lineStart = false;
      }
      // `buf` may be the accumulator, whose bytes past len are garbage.
      const nl = indexOfByte.call(buf, LF, p);
      if (nl < 0 || nl >= len) {
        p = len;
        break;
      }
      p = nl + 1;
      lineStart = true;
    }
    this.scanPos = p;
    this.atLineStart = lineStart;
    return -1;
  }

  private finish(raw: Buffer, rest: Buffer): { head: CgiResponseHead; rest: Buffer } {
    this.head = parseCgiHead(raw);
    this.accLen = 0;
    return { head: this.head, rest };
  }
}

function tooLarge(max: number): ProtocolError {
  return new ProtocolError(ErrorCodes.CGI_RESPONSE_HEAD_TOO_LARGE, `CGI response head exceeds ${max} bytes`);
}

function badHead(message: string): ProtocolError {
  return new ProtocolError(ErrorCodes.CGI_BAD_RESPONSE_HEAD, message);
}

// RFC 9110 token characters, for header names.
const TOKEN = new Uint8Array(128);
for (const c of "!#$%&'*+-.^_`|~") TOKEN[c.charCodeAt(0)] = 1;
for (let c = 48; c <= 57; c++) TOKEN[c] = 1;
for (let c = 65; c <= 90; c++) TOKEN[c] = 1;
for (let c = 97; c <= 122; c++) TOKEN[c] = 1;

function isToken(s: string): boolean {
  if (s.length === 0) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 128 || TOKEN[c] === 0) return false;
  }
  return true;
}

/** Control characters other than HTAB would let a backend split or corrupt the client's response. */
function hasControlChar(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if ((c < 32 && c !== 9) || c === 127) return true;
  }
  return false;
}

function trimOws(s: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && (s.charCodeAt(a) === 32 || s.charCodeAt(a) === 9)) a++;
  while (b > a && (s.charCodeAt(b - 1) === 32 || s.charCodeAt(b - 1) === 9)) b--;
  return a === 0 && b === s.length ? s : s.slice(a, b);
}

const COLON = 58;

/**
 * A parsed head whose header list is built on first use: the FastCGI and SCGI front ends
 * pass `raw` through and need only the status, so they never pay for the strings.
 */
class LazyCgiHead implements CgiResponseHead {
  readonly status: number;
  readonly reason: string;
  readonly raw: Buffer;
  private list: Array<[string, string]> | undefined;
  /** Read from the bytes with the status; forgotten when the header list is replaced. */
  private length: number | undefined;

  constructor(status: number, reason: string, raw: Buffer, contentLength: number) {
    this.status = status;
    this.reason = reason;
    this.raw = raw;
    this.length = contentLength;
  }

  get headers(): Array<[string, string]> {
    return (this.list ??= headerList(this.raw));
  }

  set headers(v: Array<[string, string]>) {
    this.list = v;
    this.length = undefined;
  }

  get contentLength(): number | undefined {
    return this.length;
  }
}

/** Case-insensitive match of raw[at..) against a lower-case ASCII word. */
function nameIs(raw: Buffer, at: number, lower: string): boolean {
  for (let i = 0; i < lower.length; i++) if ((raw[at + i]! | 0x20) !== lower.charCodeAt(i)) return false;
  return true;
}

/**
 * Parses a complete head (ending with its blank line). Header names and values are latin1
 * strings. Validates every line on the bytes (token names, no control characters in
 * values) and reads Status / Location; the header list itself is made lazily.
 */
export function parseCgiHead(raw: Buffer): CgiResponseHead {
  let status = 0;
  let reason = '';
  let location = false;
  let contentLength = -1;
  let sawLength = false;
  const len = raw.length;
  let start = 0;
  for (;;) {
    let nl = indexOfByte.call(raw, LF, start);
    if (nl < 0) nl = len;
    const end = nl > start && raw[nl - 1] === CR ? nl - 1 : nl;
    if (end === start) break; // the blank line
    let p = start;
    while (p < end) {
      const c = raw[p]!;
      if (c === COLON) break;
      if (c >= 128 || TOKEN[c] === 0) return parseCgiHeadStrict(raw); // throws the precise error
      p++;
    }
    if (p >= end || p === start) return parseCgiHeadStrict(raw);
    for (let q = p + 1; q < end; q++) {
      const c = raw[q]!;
      if ((c < 32 && c !== 9) || c === 127) return parseCgiHeadStrict(raw);
    }
    const nameLen = p - start;
    if (nameLen === 6 && nameIs(raw, start, 'status')) {
      const value = trimOws(raw.toString('latin1', p + 1, end));
      const m = /^([1-9]\d\d)(?:[ \t]+(.*))?$/.exec(value);
      if (!m) throw badHead(`bad CGI Status header: ${JSON.stringify(value.slice(0, 80))}`);
      status = Number(m[1]);
      reason = m[2] ?? '';
    } else if (nameLen === 8 && nameIs(raw, start, 'location')) {
      location = true;
    } else if (nameLen === 14 && !sawLength && nameIs(raw, start, 'content-length')) {
      // The first one counts, as announcedLength reads the list (src/protocol/exchange.ts).
      sawLength = true;
      contentLength = contentLengthOf(trimOws(raw.toString('latin1', p + 1, end)));
    }
    start = nl + 1;
  }
  if (status === 0) status = location ? 302 : 200;
  if (reason === '') reason = reasonPhrase(status);
  return new LazyCgiHead(status, reason, raw, contentLength);
}

/** The header lines of a head that parseCgiHead validated, Status left out. */
function headerList(raw: Buffer): Array<[string, string]> {
  const text = raw.toString('latin1');
  const headers: Array<[string, string]> = [];
  let start = 0;
  for (;;) {
    let nl = text.indexOf('\n', start);
    if (nl < 0) nl = text.length;
    const end = nl > start && text.charCodeAt(nl - 1) === CR ? nl - 1 : nl;
    if (end <= start) break;
    const colon = text.indexOf(':', start);
    const name = text.slice(start, colon);
    start = nl + 1;
    if (name.length === 6 && name.toLowerCase() === 'status') continue;
    headers.push([name, trimOws(text.slice(colon + 1, end))]);
  }
  return headers;
}

/** The string-based parser: the reference for error messages (and for the tests' property checks). */
export function parseCgiHeadStrict(raw: Buffer): CgiResponseHead {
  const text = raw.toString('latin1');
  const headers: Array<[string, string]> = [];
  let status = 0;
  let reason = '';
  let location = false;
  let start = 0;
  for (;;) {
    let nl = text.indexOf('\n', start);
    if (nl < 0) nl = text.length;
    const end = nl > start && text.charCodeAt(nl - 1) === CR ? nl - 1 : nl;
    if (end === start) break; // the blank line
    const line = text.slice(start, end);
    start = nl + 1;
    const colon = line.indexOf(':');
    if (colon < 0) throw badHead(`CGI response header line without a colon: ${JSON.stringify(line.slice(0, 80))}`);
    const name = line.slice(0, colon);
    if (!isToken(name)) throw badHead(`bad CGI response header name: ${JSON.stringify(name.slice(0, 80))}`);
    const value = trimOws(line.slice(colon + 1));
    if (hasControlChar(value)) throw badHead(`control character in CGI response header ${name}`);
    if (name.length === 6 && name.toLowerCase() === 'status') {
      const m = /^([1-9]\d\d)(?:[ \t]+(.*))?$/.exec(value);
      if (!m) throw badHead(`bad CGI Status header: ${JSON.stringify(value.slice(0, 80))}`);
      status = Number(m[1]);
      reason = m[2] ?? '';
      continue;
    }
    if (name.length === 8 && name.toLowerCase() === 'location') location = true;
    headers.push([name, value]);
  }
  if (status === 0) status = location ? 302 : 200;
  if (reason === '') reason = reasonPhrase(status);
  return { status, reason, headers, raw };
}

/** A complete CGI response for an error: Status, Content-Type text/plain, Retry-After when given, short body. */
/** The body bytes of a page renderCgiError made (what the access log counts). */
export function cgiErrorBodyLength(page: Buffer): number {
  return page.length - page.indexOf('\r\n\r\n') - 4;
}

export function renderCgiError(status: number, message: string, retryAfter?: number): Buffer {
  const body = `${message}\n`;
  const bodyLen = Buffer.byteLength(body, 'utf8');
  let head = `Status: ${status} ${reasonPhrase(status)}\r\nContent-Type: text/plain; charset=utf-8\r\n`;
  if (retryAfter !== undefined) head += `Retry-After: ${Math.max(0, Math.ceil(retryAfter))}\r\n`;
  head += `Content-Length: ${bodyLen}\r\n\r\n`;
  const headLen = head.length;
  const buf = Buffer.allocUnsafe(headLen + bodyLen);
  buf.write(head, 0, 'latin1');
  buf.write(body, headLen, 'utf8');
  return buf;
}

const REASONS: Record<number, string> = {
  100: 'Continue',
  101: 'Switching Protocols',
  102: 'Processing',
  103: 'Early Hints',
  200: 'OK',
  201: 'Created',
  202: 'Accepted',
  203: 'Non-Authoritative Information',
  204: 'No Content',
  205: 'Reset Content',
  206: 'Partial Content',
  207: 'Multi-Status',
  208: 'Already Reported',
  226: 'IM Used',
  300: 'Multiple Choices',
  301: 'Moved Permanently',
  302: 'Found',
  303: 'See Other',
  304: 'Not Modified',
  305: 'Use Proxy',
  307: 'Temporary Redirect',
  308: 'Permanent Redirect',
  400: 'Bad Request',
  401: 'Unauthorized',
  402: 'Payment Required',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  406: 'Not Acceptable',
  407: 'Proxy Authentication Required',
  408: 'Request Timeout',
  409: 'Conflict',
  410: 'Gone',
  411: 'Length Required',
  412: 'Precondition Failed',
  413: 'Content Too Large',
  414: 'URI Too Long',
  415: 'Unsupported Media Type',
  416: 'Range Not Satisfiable',
  417: 'Expectation Failed',
  418: "I'm a Teapot",
  421: 'Misdirected Request',
  422: 'Unprocessable Entity',
  423: 'Locked',
  424: 'Failed Dependency',
  425: 'Too Early',
  426: 'Upgrade Required',
  428: 'Precondition Required',
  429: 'Too Many Requests',
  431: 'Request Header Fields Too Large',
  451: 'Unavailable For Legal Reasons',
  500: 'Internal Server Error',
  501: 'Not Implemented',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
  505: 'HTTP Version Not Supported',
  506: 'Variant Also Negotiates',
  507: 'Insufficient Storage',
  508: 'Loop Detected',
  510: 'Not Extended',
  511: 'Network Authentication Required',
};

/** Standard reason phrase for a status code ("Unknown" when not known). */
export function reasonPhrase(status: number): string {
  return REASONS[status] ?? 'Unknown';
}
