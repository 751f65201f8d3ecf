/**
 * FastCGI name-value pairs (spec §3.4): the PARAMS / GET_VALUES body format with 1- or
 * 4-byte lengths. Encoding, one-shot decoding, and ParamsCollector, which checks a
 * request's PARAMS stream record by record under limits and keeps its bytes as they
 * came: FcgiParams is a CgiParams over them that decodes only what is read, so a
 * FastCGI-to-FastCGI request goes out with the same bytes. Pure: bytes in, params out.
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
 * The one name every request's routing reads (the script check, the slow log): the
 * collector notes where its value lies as it walks the lengths, so reading it walks no
 * pairs again.
 */
const INDEXED = 'SCRIPT_FILENAME';

/** Reads the 1- or 4-byte length at `p` (the caller checked the bytes are there). */
function lengthAt(c: Buffer, p: number): number {
  const b = c[p]!;
  return b < 128 ? b : ((b & 0x7f) << 24) | (c[p + 1]! << 16) | (c[p + 2]! << 8) | c[p + 3]!;
}

/**
 * Collects one request's PARAMS stream across records; enforces limits as bytes arrive
 * (not only at the end) so an endless stream is refused early.
 *
 * Limits: `maxCount` pairs, and `maxBytes` of names plus values (length prefixes not
 * counted). Both are checked as soon as a pair's lengths are known, before its bytes
 * arrive, so a pair claiming 2 GB is refused at once and nothing large is allocated.
 * Only the length prefixes are read; names and values are skipped, and the record
 * bodies are kept as they are (one record, the usual case: a view, no copy). Where
 * SCRIPT_FILENAME's value lies is noted when its pair lies whole in the first record
 * (whose offsets the kept bytes keep), so FcgiParams reads it without a walk.
 */
export class ParamsCollector {
  private readonly maxBytes: number;
  private readonly maxCount: number;
  private count = 0;
  private bytes = 0;
  private done = false;
  private failed: ProtocolError | undefined;
  /** The first record body (the whole stream, as front ends send it), then any more (rare). */
  private first: Buffer | undefined;
  private more: Buffer[] | undefined;
  /** Name and value bytes of the current pair still to come. */
  private skip = 0;
  // Length prefixes that straddle records: gathered here (allocated on first need: rare).
  private hdr: Buffer | undefined;
  private hdrPos = 0;
  /** Offset and length of SCRIPT_FILENAME's value in the first record; -1: not seen there. */
  private indexedAt = -1;
  private indexedLen = 0;

  constructor(limits: ParamsLimits) {
    this.maxBytes = limits.maxBytes;
    this.maxCount = limits.maxCount;
  }

  /**
   * Adds a PARAMS record body; returns the params when `content` is empty (end of
   * stream). After a throw every later call throws the same error.
   */
  add(content: Buffer): FcgiParams | undefined {
    if (this.failed) throw this.failed;
    if (this.done) throw new ProtocolError(ErrorCodes.FCGI_BAD_PARAMS, 'FastCGI PARAMS record after the end of the stream');
    try {
      return this.addRecord(content);
    } catch (err) {
      if (err instanceof ProtocolError) this.failed = err;
      throw err;
    }
  }

  private addRecord(c: Buffer): FcgiParams | undefined {
    const end = c.length;
    if (end === 0) {
      if (this.hdrPos > 0 || this.skip > 0) {
        throw new ProtocolError(ErrorCodes.FCGI_BAD_PARAMS, 'FastCGI PARAMS stream ends inside a name-value pair');
      }
      this.done = true;
      const first = this.first;
      const more = this.more;
      this.first = this.more = undefined;
      const raw = more === undefined ? (first ?? EMPTY) : Buffer.concat([first!, ...more]);
      return new FcgiParams(raw, this.count, this.indexedAt, this.indexedLen);
    }
    if (this.first === undefined) this.first = c;
    else (this.more ??= []).push(c);
    let pos = 0;
    while (pos < end) {
      if (this.skip > 0) {
        const n = Math.min(this.skip, end - pos);
        this.skip -= n;
        pos += n;
        continue;
      }
      if (this.hdrPos === 0) {
        // Both lengths inside this record: read in place.
        const ns = c[pos]! < 128 ? 1 : 4;
        if (pos + ns < end) {
          const vs = c[pos + ns]! < 128 ? 1 : 4;
          if (pos + ns + vs <= end) {
            const nl = lengthAt(c, pos);
            const vl = lengthAt(c, pos + ns);
            this.admit(nl, vl);
            pos += ns + vs;
            // Every pair before it lay whole in the first record too, so this is the first of that name.
            if (nl === INDEXED.length && this.indexedAt < 0 && c === this.first && pos + nl + vl <= end && nameIs(c, pos, nl, INDEXED)) {
              this.indexedAt = pos + nl;
              this.indexedLen = vl;
            }
            continue;
          }
        }
      }
      pos = this.partialLengths(c, pos);
    }
    return undefined;
  }

  /** Byte-wise path for length prefixes split across records. */
  private partialLengths(c: Buffer, pos: number): number {
    const end = c.length;
    const h = (this.hdr ??= Buffer.allocUnsafe(8));
    while (pos < end) {
      h[this.hdrPos++] = c[pos++]!;
      const ns = h[0]! < 128 ? 1 : 4;
      if (this.hdrPos <= ns) continue;
      const vs = h[ns]! < 128 ? 1 : 4;
      if (this.hdrPos < ns + vs) continue;
      this.hdrPos = 0;
      this.admit(lengthAt(h, 0), lengthAt(h, ns));
      break;
    }
    return pos;
  }

  /** Counts a pair against the limits once its lengths are known. */
  private admit(nameLen: number, valueLen: number): void {
    if (this.count + 1 > this.maxCount) {
      throw new ProtocolError(ErrorCodes.PARAMS_TOO_MANY, `more than ${this.maxCount} request variables`);
    }
    const bytes = this.bytes + nameLen + valueLen;
    if (bytes > this.maxBytes) {
      throw new ProtocolError(ErrorCodes.PARAMS_TOO_LARGE, `request variables exceed ${this.maxBytes} bytes`);
    }
    this.count++;
    this.bytes = bytes;
    this.skip = nameLen + valueLen;
  }
}

const NO_OVERRIDE: readonly string[] = [];

/**
 * Request variables as the FastCGI client sent them: name-value bytes checked by
 * ParamsCollector. get() reads a name straight from the bytes; a listener's override
 * is kept beside them; anything that lists or changes the pairs decodes them all once
 * (into the flat strings of CgiParams) and from then on this is a plain CgiParams.
 */
export class FcgiParams extends CgiParams {
  /** The pairs' bytes while not decoded. */
  private raw: Buffer | undefined;
  private readonly rawCount: number;
  /** Flat [name, value, ...] that replace every pair of those names in `raw`. */
  private extra: readonly string[] = NO_OVERRIDE;
  /** Where SCRIPT_FILENAME's value lies in `raw` (its first pair), as ParamsCollector found it; -1: look it up. */
  private readonly indexedAt: number;
  private readonly indexedLen: number;

  constructor(raw: Buffer, count: number, indexedAt = -1, indexedLen = 0) {
    super([]);
    this.raw = raw;
    this.rawCount = count;
    this.indexedAt = indexedAt;
    this.indexedLen = indexedLen;
  }

  /** The bytes exactly as received, while neither decoded nor overridden (tests, encoders). */
  get wire(): Buffer | undefined {
    return this.extra.length === 0 ? this.raw : undefined;
  }

  /**
   * For a holder that outlives the request (the status board): the bytes are copied out
   * when they are a small view of a much larger chunk (a request body read with them),
   * so that chunk is not kept alive with them.
   */
  detach(): void {
    const raw = this.raw;
    if (raw === undefined || raw.buffer.byteLength <= 2 * raw.length + 4096) return;
    const own = Buffer.allocUnsafeSlow(raw.length); // not from the shared pool, which would pin a slab
    raw.copy(own);
    this.raw = own;
  }

  override get size(): number {
    return this.raw !== undefined && this.extra.length === 0 ? this.rawCount : this.decoded().length >> 1;
  }

  override get(name: string): string | undefined {
    const raw = this.raw;
    if (raw === undefined) return super.get(name);
    const x = this.extra;
    for (let i = 0; i < x.length; i += 2) if (x[i] === name) return x[i + 1];
    if (this.indexedAt >= 0 && name === INDEXED) return raw.toString('latin1', this.indexedAt, this.indexedAt + this.indexedLen);
    const p = findPair(raw, name);
    return p < 0 ? undefined : raw.toString('latin1', p, p + foundValueLen);
  }

  override set(name: string, value: string): void {
    this.decoded();
    super.set(name, value);
  }

  override delete(name: string): void {
    this.decoded();
    super.delete(name);
  }

  override override(o: readonly string[]): void {
    if (this.raw === undefined) super.override(o);
    else if (this.extra.length === 0) this.extra = o;
    else {
      // A second override (an authorizer's grant after the listener's params): the names
      // it sets leave the first, and the bytes stay undecoded.
      const names = new Set<string>();
      for (let i = 0; i < o.length; i += 2) names.add(o[i]!);
      const x = this.extra;
      const merged: string[] = [];
      for (let i = 0; i < x.length; i += 2) if (!names.has(x[i]!)) merged.push(x[i]!, x[i + 1]!);
      this.extra = merged.concat(o);
    }
  }

  /** The kept pairs' bytes are copied, not decoded; neither copy is decoded by it. */
  override without(names: ReadonlySet<string>): CgiParams {
    const raw = this.raw;
    if (raw === undefined) return super.without(names);
    const kept: Buffer[] = [];
    let count = 0;
    forEachPair(raw, (start, end, nameStart, nameLen) => {
      for (const name of names) if (nameIs(raw, nameStart, nameLen, name)) return;
      kept.push(raw.subarray(start, end));
      count++;
    });
    const copy = new FcgiParams(Buffer.concat(kept), count);
    const x = this.extra;
    const extra: string[] = [];
    for (let i = 0; i < x.length; i += 2) if (!names.has(x[i]!)) extra.push(x[i]!, x[i + 1]!);
    if (extra.length > 0) copy.extra = extra;
    return copy;
  }

  override forEach(fn: (name: string, value: string) => void): void {
    this.decoded();
    super.forEach(fn);
  }

  override toObject(): Record<string, string> {
    this.decoded();
    return super.toObject();
  }

  override get pairs(): readonly string[] {
    return this.decoded();
  }

  /** FastCGI wire size of the pairs (with the override applied). */
  wireLength(): number {
    const raw = this.raw;
    if (raw === undefined) return nameValuesLength(this.flat);
    if (this.extra.length === 0) return raw.length;
    let n = nameValuesLength(this.extra);
    forEachPair(raw, (start, end, nameStart, nameLen) => {
      if (!this.overridden(raw, nameStart, nameLen)) n += end - start;
    });
    return n;
  }

  /** Writes the pairs in FastCGI form at `off` (received bytes copied, not re-encoded); returns the offset after them. */
  writeWire(buf: Buffer, off: number): number {
    const raw = this.raw;
    if (raw === undefined) return writeNameValues(this.flat, buf, off);
    if (this.extra.length === 0) {
      buf.set(raw, off); // Buffer.copy validates its arguments before this same set
      return off + raw.length;
    }
    forEachPair(raw, (start, end, nameStart, nameLen) => {
      if (!this.overridden(raw, nameStart, nameLen)) off += raw.copy(buf, off, start, end);
    });
    return writeNameValues(this.extra, buf, off);
  }

  private overridden(raw: Buffer, nameStart: number, nameLen: number): boolean {
    const x = this.extra;
    for (let i = 0; i < x.length; i += 2) if (nameIs(raw, nameStart, nameLen, x[i]!)) return true;
    return false;
  }

  /** Decodes every pair (once) and applies the override; the flat strings rule from then on. */
  private decoded(): string[] {
    const raw = this.raw;
    if (raw === undefined) return this.flat;
    const flat = this.flat;
    const text = raw.toString('latin1');
    forEachPair(raw, (_start, end, nameStart, nameLen) => {
      flat.push(text.slice(nameStart, nameStart + nameLen), text.slice(nameStart + nameLen, end));
    });
    this.raw = undefined;
    const x = this.extra;
    this.extra = NO_OVERRIDE;
    if (x.length > 0) super.override(x);
    return flat;
  }
}

/** Calls fn(pairStart, pairEnd, nameStart, nameLength) for each pair of checked bytes. */
function forEachPair(raw: Buffer, fn: (start: number, end: number, nameStart: number, nameLen: number) => void): void {
  for (let p = 0; p < raw.length; ) {
    const nl = lengthAt(raw, p);
    const ns = raw[p]! < 128 ? 1 : 4;
    const vl = lengthAt(raw, p + ns);
    const n = p + ns + (raw[p + ns]! < 128 ? 1 : 4);
    fn(p, n + nl + vl, n, nl);
    p = n + nl + vl;
  }
}

function nameIs(raw: Buffer, at: number, len: number, name: string): boolean {
  if (len !== name.length) return false;
  for (let i = 0; i < len; i++) if (raw[at + i] !== name.charCodeAt(i)) return false;
  return true;
}

/** Length of the value findPair found last (a second result without an object per call). */
let foundValueLen = 0;

/** Offset of the value of the first pair named `name` (its length in foundValueLen), or -1. */
function findPair(raw: Buffer, name: string): number {
  const want = name.length;
  for (let p = 0; p < raw.length; ) {
    const ns = raw[p]! < 128 ? 1 : 4;
    const nl = lengthAt(raw, p);
    const vs = raw[p + ns]! < 128 ? 1 : 4;
    const vl = lengthAt(raw, p + ns);
    const n = p + ns + vs;
    if (nl === want && nameIs(raw, n, nl, name)) {
      foundValueLen = vl;
      return n + nl;
    }
    p = n + nl + vl;
  }
  return -1;
}
