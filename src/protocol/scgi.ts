/**
 * SCGI: a netstring of NUL-separated header pairs, CONTENT_LENGTH first and required,
 * then the body. Pure.
 *
 *   "70:" "CONTENT_LENGTH\0" "27\0" "SCGI\0" "1\0" ... ","  then 27 body bytes
 */
import { ErrorCodes, ProtocolError } from '../errors.js';
import { CgiParams, type ParamsLimits } from './params.js';
import { writeLatin1 } from './latin1.js';

export interface ScgiLimits extends ParamsLimits {
  /** Largest netstring length accepted. Default: ParamsLimits.maxBytes + 64. */
  maxHeaderBytes: number;
}

/** ScgiLimits from ParamsLimits with the documented default header size. */
export function scgiLimits(limits: ParamsLimits, maxHeaderBytes?: number): ScgiLimits {
  return { maxBytes: limits.maxBytes, maxCount: limits.maxCount, maxHeaderBytes: maxHeaderBytes ?? limits.maxBytes + 64 };
}

const COLON = 58;
const COMMA = 44;
const ZERO = 48;
const NINE = 57;
/** CONTENT_LENGTH beyond this cannot be counted exactly in a double. */
const MAX_CONTENT_LENGTH = Number.MAX_SAFE_INTEGER;
/** Keeps the length prefix exact whatever maxHeaderBytes says. */
const MAX_LENGTH_DIGITS = 15;

const ST_LENGTH = 0;
const ST_HEADER = 1;
const ST_COMMA = 2;
const ST_BODY = 3;
const ST_DONE = 4;
const ST_DEAD = 5;

export interface ScgiHandlers {
  onHead(params: CgiParams, contentLength: number): void;
  onBody(chunk: Buffer): void;
  onEnd(): void;
}

/**
 * Push decoder for the request side: onHead(params, contentLength) once, then
 * onBody(view) for body bytes up to CONTENT_LENGTH, then onEnd(). Bytes past
 * CONTENT_LENGTH are ignored. Throws ProtocolError (SCGI_*, PARAMS_*).
 *
 * The netstring header is a view of the chunk when it came in one piece, else copied
 * once into a buffer of its announced size (at most maxHeaderBytes). After a throw the
 * decoder is dead and every push throws again.
 */
export class ScgiRequestDecoder {
  private readonly limits: ScgiLimits;
  private readonly handlers: ScgiHandlers;
  private state = ST_LENGTH;
  private digits = 0;
  private headerLen = 0;
  private header: Buffer | undefined;
  private headerPos = 0;
  private remaining = 0;
  private error: ProtocolError | undefined;

  constructor(limits: ScgiLimits, handlers: ScgiHandlers) {
    this.limits = limits;
    this.handlers = handlers;
  }

  /** True once the head was decoded. */
  get headDone(): boolean {
    return this.state === ST_BODY || this.state === ST_DONE;
  }

  /** Body bytes still expected (EOF while this is > 0 means a truncated request). */
  get bodyRemaining(): number {
    return this.state === ST_BODY ? this.remaining : 0;
  }

  /** True once onEnd was called. */
  get ended(): boolean {
    return this.state === ST_DONE;
  }

  /** True when some bytes of the head arrived but not all of them. */
  get midHead(): boolean {
    return (this.state === ST_LENGTH && this.digits > 0) || this.state === ST_HEADER || this.state === ST_COMMA;
  }

  push(chunk: Buffer): void {
    if (this.state === ST_DEAD) {
      throw this.error ?? new ProtocolError(ErrorCodes.SCGI_BAD_NETSTRING, 'SCGI decoder stopped after an earlier error');
    }
    try {
      this.run(chunk);
    } catch (err) {
      this.state = ST_DEAD;
      this.header = undefined;
      if (err instanceof ProtocolError) this.error = err;
      throw err;
    }
  }

  private run(chunk: Buffer): void {
    const len = chunk.length;
    let pos = 0;
    while (pos < len) {
      switch (this.state) {
        case ST_LENGTH: {
          const c = chunk[pos++]!;
          if (c === COLON) {
            if (this.digits === 0) throw badNetstring('SCGI netstring without a length');
            this.state = ST_HEADER;
            this.headerPos = 0;
            if (this.headerLen === 0) this.state = ST_COMMA;
            else if (len - pos >= this.headerLen) {
              // The common case: the whole header is in this chunk, decode it in place.
              const view = chunk.subarray(pos, pos + this.headerLen);
              pos += this.headerLen;
              this.header = view;
              this.state = ST_COMMA;
            } else this.header = Buffer.allocUnsafe(this.headerLen);
            break;
          }
          if (c < ZERO || c > NINE) throw badNetstring(`bad byte 0x${c.toString(16)} in SCGI netstring length`);
          if (this.digits === 1 && this.headerLen === 0) throw badNetstring('SCGI netstring length with a leading zero');
          if (++this.digits > MAX_LENGTH_DIGITS) {
            throw new ProtocolError(ErrorCodes.SCGI_HEADER_TOO_LARGE, 'SCGI netstring length has too many digits');
          }
          this.headerLen = this.headerLen * 10 + (c - ZERO);
          if (this.headerLen > this.limits.maxHeaderBytes) {
            throw new ProtocolError(
              ErrorCodes.SCGI_HEADER_TOO_LARGE,
              `SCGI header longer than ${this.limits.maxHeaderBytes} bytes`,
            );
          }
          break;
        }
        case ST_HEADER: {
          const h = this.header!;
          const n = Math.min(this.headerLen - this.headerPos, len - pos);
          chunk.copy(h, this.headerPos, pos, pos + n);
          this.headerPos += n;
          pos += n;
          if (this.headerPos === this.headerLen) this.state = ST_COMMA;
          break;
        }
        case ST_COMMA: {
          const c = chunk[pos++]!;
          if (c !== COMMA) throw badNetstring('SCGI netstring not closed by ","');
          const header = this.header ?? Buffer.alloc(0);
          this.header = undefined;
          const params = decodeScgiHeaders(header, this.limits);
          const cl = contentLengthOf(params);
          this.remaining = cl;
          this.state = cl > 0 ? ST_BODY : ST_DONE;
          this.handlers.onHead(params, cl);
          if (cl === 0) this.handlers.onEnd();
          break;
        }
        case ST_BODY: {
          const n = Math.min(this.remaining, len - pos);
          const view = n === len && pos === 0 ? chunk : chunk.subarray(pos, pos + n);
          pos += n;
          this.remaining -= n;
          if (this.remaining === 0) this.state = ST_DONE;
          this.handlers.onBody(view);
          if (this.remaining === 0) this.handlers.onEnd();
          break;
        }
        case ST_DONE:
          return; // bytes past CONTENT_LENGTH are ignored
        default:
          throw this.error ?? badNetstring('SCGI decoder stopped after an earlier error');
      }
    }
  }
}

function badNetstring(message: string): ProtocolError {
  return new ProtocolError(ErrorCodes.SCGI_BAD_NETSTRING, message);
}

function badHeaders(message: string): ProtocolError {
  return new ProtocolError(ErrorCodes.SCGI_BAD_HEADERS, message);
}

/**
 * "NAME\0VALUE\0" pairs of a netstring body into CgiParams (latin1 strings). The first
 * must be CONTENT_LENGTH; empty names are refused. Duplicate names are kept in order
 * (the spec forbids them but front ends send them for repeated HTTP headers).
 */
export function decodeScgiHeaders(header: Buffer, limits: ParamsLimits): CgiParams {
  // One latin1 string for the whole header: slicing it is far cheaper than a
  // Buffer.toString() per name and value.
  const text = header.toString('latin1');
  const flat: string[] = [];
  const end = text.length;
  let bytes = 0;
  let pos = 0;
  while (pos < end) {
    const nameEnd = text.indexOf('\0', pos);
    if (nameEnd < 0) throw badHeaders('SCGI header name not terminated by NUL');
    if (nameEnd === pos) throw badHeaders('empty SCGI header name');
    const valueEnd = text.indexOf('\0', nameEnd + 1);
    if (valueEnd < 0) throw badHeaders('SCGI header value not terminated by NUL');
    if ((flat.length >> 1) + 1 > limits.maxCount) {
      throw new ProtocolError(ErrorCodes.PARAMS_TOO_MANY, `more than ${limits.maxCount} request variables`);
    }
    bytes += valueEnd - pos - 1;
    if (bytes > limits.maxBytes) {
      throw new ProtocolError(ErrorCodes.PARAMS_TOO_LARGE, `request variables exceed ${limits.maxBytes} bytes`);
    }
    flat.push(text.slice(pos, nameEnd), text.slice(nameEnd + 1, valueEnd));
    pos = valueEnd + 1;
  }
  if (flat.length === 0 || flat[0] !== 'CONTENT_LENGTH') throw badHeaders('first SCGI header is not CONTENT_LENGTH');
  return new CgiParams(flat);
}

function contentLengthOf(params: CgiParams): number {
  const v = params.pairs[1]!;
  if (!/^\d+$/.test(v)) throw badHeaders(`SCGI CONTENT_LENGTH is not a number: ${JSON.stringify(v.slice(0, 40))}`);
  const n = Number(v);
  if (n > MAX_CONTENT_LENGTH) throw badHeaders(`SCGI CONTENT_LENGTH too large: ${v.slice(0, 40)}`);
  return n;
}

/**
 * The netstring header for a request; CONTENT_LENGTH first (taken from params, "0" if
 * absent or empty, as nginx sends it for bodiless requests), "SCGI"="1" second, then
 * the other params in order (any other CONTENT_LENGTH or SCGI pairs are dropped).
 * Throws ProtocolError SCGI_BAD_HEADERS for an empty name or a NUL in a name or value:
 * SCGI cannot carry them, and passing a NUL on would let it forge extra headers.
 */
export function encodeScgiHead(params: CgiParams): Buffer {
  const flat = params.pairs;
  const contentLength = params.get('CONTENT_LENGTH') || '0';
  if (contentLength.includes('\0')) throw badHeaders('NUL byte in CONTENT_LENGTH');
  // Pairs are NAME\0VALUE\0; latin1 strings are one byte per char.
  let len = 'CONTENT_LENGTH'.length + contentLength.length + 2 + 'SCGI'.length + 1 + 2;
  for (let i = 0; i < flat.length; i += 2) {
    const name = flat[i]!;
    if (name === 'CONTENT_LENGTH' || name === 'SCGI') continue;
    const value = flat[i + 1]!;
    if (name.length === 0 || name.includes('\0') || value.includes('\0')) {
      throw badHeaders(`request variable ${JSON.stringify(name.slice(0, 40))} cannot be sent over SCGI (empty name or NUL byte)`);
    }
    len += name.length + value.length + 2;
  }
  const prefix = `${len}:`;
  const buf = Buffer.allocUnsafe(prefix.length + len + 1);
  let off = writeLatin1(buf, 0, prefix);
  off = writeLatin1(buf, off, 'CONTENT_LENGTH\0');
  off = writeLatin1(buf, off, contentLength);
  buf[off++] = 0;
  off = writeLatin1(buf, off, 'SCGI\x001\0');
  for (let i = 0; i < flat.length; i += 2) {
    const name = flat[i]!;
    if (name === 'CONTENT_LENGTH' || name === 'SCGI') continue;
    off = writeLatin1(buf, off, name);
    buf[off++] = 0;
    off = writeLatin1(buf, off, flat[i + 1]!);
    buf[off++] = 0;
  }
  buf[off] = COMMA;
  return buf;
}

