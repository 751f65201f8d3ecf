/**
 * FastCGI name-value pairs (spec §3.4): the PARAMS / GET_VALUES body format with 1- or
 * 4-byte lengths. Encoding, one-shot decoding, and ParamsCollector, which decodes a
 * request's PARAMS stream record by record under limits. Pure: bytes in, params out.
 * Record framing is in fastcgi.ts, which re-exports the public names here.
 */
import { ErrorCodes, ProtocolError } from '../errors.js';
import { CgiParams, type ParamsLimits } from './params.js';
import { writeLatin1 } from './latin1.js';

const EMPTY = Buffer.alloc(0);

const MAX_NV_LENGTH = 0x7fffffff;

function lengthSize(n: number): number {
  return n < 128 ? 1 : 4;
}

function writeLength(buf: Buffer, off: number, n: number): number {
  if (n < 128) {
    buf[off] = n;
    return off + 1;
  }
  if (n > MAX_NV_LENGTH) throw new RangeError(`FastCGI name or value of ${n} bytes is too long`);
  buf.writeUInt32BE((n | 0x80000000) >>> 0, off);
  return off + 4;
}

/** Encoded size of the pairs; latin1 strings are one byte per char. For fastcgi.ts's request head encoder too. */
export function nameValuesLength(flat: readonly string[]): number {
  let n = 0;
  for (let i = 0; i < flat.length; i++) {
    const l = flat[i]!.length;
    n += lengthSize(l) + l;
  }
  return n;
}

/** Writes the pairs at `off`; returns the offset after them. */
export function writeNameValues(flat: readonly string[], buf: Buffer, off: number): number {
  for (let i = 0; i < flat.length; i += 2) {
    const name = flat[i]!;
    const value = flat[i + 1]!;
    off = writeLength(buf, off, name.length);
    off = writeLength(buf, off, value.length);
    off = writeLatin1(buf, off, name);
    off = writeLatin1(buf, off, value);
  }
  return off;
}

/** Name-value pair body (1- or 4-byte lengths), without record headers. */
export function encodeNameValues(params: CgiParams): Buffer {
  const flat = params.pairs;
  const buf = Buffer.allocUnsafe(nameValuesLength(flat));
  writeNameValues(flat, buf, 0);
  return buf;
}

/** Throws ProtocolError FCGI_BAD_PARAMS, PARAMS_TOO_LARGE, PARAMS_TOO_MANY. */
export function decodeNameValues(body: Buffer, limits: ParamsLimits): CgiParams {
  const c = new ParamsCollector(limits);
  if (body.length > 0) c.add(body);
  return c.add(EMPTY)!;
}

/**
 * Collects one request's PARAMS stream across records; enforces limits as bytes arrive
 * (not only at the end) so an endless stream is refused early.
 *
 * Limits: `maxCount` pairs, and `maxBytes` of names plus values (length prefixes not
 * counted). Both are checked as soon as a pair's lengths are known, before its bytes
 * arrive, so a pair claiming 2 GB is refused at once and nothing large is allocated.
 * Pairs may straddle records; a pair inside one record is decoded without a copy.
 */
export class ParamsCollector {
  private readonly maxBytes: number;
  private readonly maxCount: number;
  private readonly flat: string[] = [];
  private bytes = 0;
  private done = false;
  private failed: ProtocolError | undefined;
  // A pair whose lengths straddle records: its length bytes so far (allocated on first need: rare).
  private hdr: Buffer | undefined;
  private hdrPos = 0;
  // A pair whose lengths are known but whose bytes straddle records.
  private nameLen = 0;
  private valueLen = 0;
  private pair: Buffer | undefined;
  private pairPos = 0;

  constructor(limits: ParamsLimits) {
    this.maxBytes = limits.maxBytes;
    this.maxCount = limits.maxCount;
  }

  /**
   * Adds a PARAMS record body; returns the decoded params when `content` is empty (end
   * of stream). After a throw every later call throws the same error.
   */
  add(content: Buffer): CgiParams | undefined {
    if (this.failed) throw this.failed;
    if (this.done) throw new ProtocolError(ErrorCodes.FCGI_BAD_PARAMS, 'FastCGI PARAMS record after the end of the stream');
    try {
      return this.addRecord(content);
    } catch (err) {
      if (err instanceof ProtocolError) this.failed = err;
      throw err;
    }
  }

  private addRecord(content: Buffer): CgiParams | undefined {
    const end = content.length;
    if (end === 0) {
      if (this.hdrPos > 0 || this.pair !== undefined) {
        throw new ProtocolError(ErrorCodes.FCGI_BAD_PARAMS, 'FastCGI PARAMS stream ends inside a name-value pair');
      }
      this.done = true;
      return new CgiParams(this.flat);
    }
    let pos = 0;
    // The record as one latin1 string, made on first use: slicing it is several times
    // cheaper than a Buffer.toString() call per name and value.
    let text: string | undefined;
    while (pos < end) {
      if (this.hdrPos === 0 && this.pair === undefined) {
        text ??= content.toString('latin1');
        const next = this.wholePair(content, text, pos);
        if (next >= 0) {
          pos = next;
          continue;
        }
      }
      pos = this.partialPair(content, pos);
    }
    return undefined;
  }

  /** Decodes a pair that lies entirely in `c` (`text` is c as latin1) at `pos`; returns -1 (consuming nothing) if it does not. */
  private wholePair(c: Buffer, text: string, pos: number): number {
    const end = c.length;
    let p = pos;
    let nl = c[p]!;
    if (nl < 128) p += 1;
    else if (p + 4 <= end) {
      nl = c.readUInt32BE(p) & MAX_NV_LENGTH;
      p += 4;
    } else return -1;
    if (p >= end) return -1;
    let vl = c[p]!;
    if (vl < 128) p += 1;
    else if (p + 4 <= end) {
      vl = c.readUInt32BE(p) & MAX_NV_LENGTH;
      p += 4;
    } else return -1;
    if (end - p < nl + vl) return -1;
    this.admit(nl, vl);
    this.flat.push(text.slice(p, p + nl), text.slice(p + nl, p + nl + vl));
    return p + nl + vl;
  }

  /** Byte-wise path for a pair split across records. */
  private partialPair(c: Buffer, pos: number): number {
    const end = c.length;
    if (this.pair === undefined) {
      const h = (this.hdr ??= Buffer.allocUnsafe(8));
      while (pos < end) {
        h[this.hdrPos++] = c[pos++]!;
        const nameSize = h[0]! < 128 ? 1 : 4;
        if (this.hdrPos <= nameSize) continue;
        const valueSize = h[nameSize]! < 128 ? 1 : 4;
        if (this.hdrPos < nameSize + valueSize) continue;
        const nl = nameSize === 1 ? h[0]! : h.readUInt32BE(0) & MAX_NV_LENGTH;
        const vl = valueSize === 1 ? h[nameSize]! : h.readUInt32BE(nameSize) & MAX_NV_LENGTH;
        this.hdrPos = 0;
        this.admit(nl, vl);
        if (nl + vl === 0) {
          this.flat.push('', '');
          return pos;
        }
        this.nameLen = nl;
        this.valueLen = vl;
        this.pair = Buffer.allocUnsafe(nl + vl);
        this.pairPos = 0;
        break;
      }
      if (this.pair === undefined) return pos;
    }
    const pair = this.pair;
    const n = Math.min(pair.length - this.pairPos, end - pos);
    c.copy(pair, this.pairPos, pos, pos + n);
    this.pairPos += n;
    pos += n;
    if (this.pairPos === pair.length) {
      this.flat.push(pair.toString('latin1', 0, this.nameLen), pair.toString('latin1', this.nameLen, this.nameLen + this.valueLen));
      this.pair = undefined;
    }
    return pos;
  }

  /** Counts a pair against the limits once its lengths are known. */
  private admit(nameLen: number, valueLen: number): void {
    if ((this.flat.length >> 1) + 1 > this.maxCount) {
      throw new ProtocolError(ErrorCodes.PARAMS_TOO_MANY, `more than ${this.maxCount} request variables`);
    }
    const bytes = this.bytes + nameLen + valueLen;
    if (bytes > this.maxBytes) {
      throw new ProtocolError(ErrorCodes.PARAMS_TOO_LARGE, `request variables exceed ${this.maxBytes} bytes`);
    }
    this.bytes = bytes;
  }
}
