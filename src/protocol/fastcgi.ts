/**
 * FastCGI 1.0 wire format: record headers, typed bodies, stream splitting, and a
 * resumable push decoder. Pure: bytes in, records out. Name-value pairs (PARAMS bodies,
 * ParamsCollector) are in fastcgi-params.ts and re-exported here.
 *
 * Used by both sides (front-end server sessions and upstream clients), so the decoder
 * checks only what no peer may ever send; what a role may send (e.g. STDIN from a
 * backend) is for the role layer to judge.
 */
// Imported: in an ES module the global `Buffer` is an accessor, a call on every use (twice a proxied request).
import { Buffer } from 'node:buffer';
import { ErrorCodes, ProtocolError } from '../errors.js';
import { CgiParams } from './params.js';
import { encodeNameValues, FcgiParams, nameValuesLength, writeNameValues } from './fastcgi-params.js';

export { decodeNameValues, encodeNameValues, FcgiParams, ParamsCollector } from './fastcgi-params.js';

export const FCGI_VERSION_1 = 1;
export const FCGI_HEADER_LEN = 8;
export const FCGI_MAX_CONTENT = 65535;
export const FCGI_NULL_REQUEST_ID = 0;
export const FCGI_KEEP_CONN = 1;

export const RecordType = {
  BeginRequest: 1,
  AbortRequest: 2,
  EndRequest: 3,
  Params: 4,
  Stdin: 5,
  Stdout: 6,
  Stderr: 7,
  Data: 8,
  GetValues: 9,
  GetValuesResult: 10,
  UnknownType: 11,
} as const;

export const Role = { Responder: 1, Authorizer: 2, Filter: 3 } as const;
/**
 * An authorizer request sent to an application that knows only the responder role (or
 * over SCGI): the role as the variable libfcgi and php-cgi set from BEGIN_REQUEST.
 */
export const AUTHORIZER_AS_VARIABLE: readonly string[] = Object.freeze(['FCGI_ROLE', 'AUTHORIZER']);

export const ProtocolStatus = {
  RequestComplete: 0,
  CantMpxConn: 1,
  Overloaded: 2,
  UnknownRole: 3,
} as const;

/** Variable names a FCGI_GET_VALUES record may ask for (spec §4.1). */
export const FcgiValueName = {
  MaxConns: 'FCGI_MAX_CONNS',
  MaxReqs: 'FCGI_MAX_REQS',
  MpxsConns: 'FCGI_MPXS_CONNS',
} as const;

/** One decoded record. `content` is a view into the pushed chunk (copied only if the record straddled chunks). */
export interface FcgiRecord {
  type: number;
  requestId: number;
  content: Buffer;
  /** STDOUT and END_REQUEST from a decoder built with `raw`: the whole record (header, content, padding). */
  raw?: Buffer | undefined;
}

const EMPTY = Buffer.alloc(0);
const EMPTY_FLAT: readonly string[] = [];
/** Padding never needs more than 7 bytes; every padded record shares these zeros. */
const ZERO_PAD = Buffer.alloc(8);
/** Below this a stream record is built in one allocation; above, the data goes out as a view. */
const SMALL_STREAM = 1024;

const TYPE_NAMES = [
  'UNKNOWN(0)',
  'BEGIN_REQUEST',
  'ABORT_REQUEST',
  'END_REQUEST',
  'PARAMS',
  'STDIN',
  'STDOUT',
  'STDERR',
  'DATA',
  'GET_VALUES',
  'GET_VALUES_RESULT',
  'UNKNOWN_TYPE',
];

/** "STDOUT", "BEGIN_REQUEST", ... or "UNKNOWN(n)", for logs and error messages. */
export function recordTypeName(type: number): string {
  return TYPE_NAMES[type] ?? `UNKNOWN(${type})`;
}

function paddingFor(contentLength: number): number {
  return -contentLength & 7;
}

function writeHeader(buf: Buffer, off: number, type: number, requestId: number, contentLength: number, padding: number): void {
  buf[off] = FCGI_VERSION_1;
  buf[off + 1] = type;
  buf[off + 2] = requestId >>> 8;
  buf[off + 3] = requestId & 0xff;
  buf[off + 4] = contentLength >>> 8;
  buf[off + 5] = contentLength & 0xff;
  buf[off + 6] = padding;
  buf[off + 7] = 0;
}

// ---- decoder ----------------------------------------------------------------------

const ST_HEADER = 0;
const ST_CONTENT = 1;
const ST_PADDING = 2;
const ST_DEAD = 3;

/**
 * The content length a record type must have, or -1 when any length is allowed.
 * A header that breaks this can only come from a peer that is not speaking FastCGI.
 */
function fixedContentLength(type: number): number {
  switch (type) {
    case RecordType.BeginRequest:
    case RecordType.EndRequest:
    case RecordType.UnknownType:
      return 8;
    case RecordType.AbortRequest:
      return 0;
    default:
      return -1;
  }
}

/**
 * Push decoder. `push(chunk)` calls onRecord for each complete record, in order, and
 * keeps a partial record for the next push. Throws ProtocolError (FCGI_BAD_VERSION,
 * FCGI_BAD_RECORD) on bytes that cannot be FastCGI; after a throw the decoder is unusable.
 *
 * A record is delivered as soon as its content is complete; its padding is skipped
 * afterwards (so `midRecord` stays true until the padding arrived too).
 */
export class FcgiDecoder {
  private readonly onRecord: (rec: FcgiRecord) => void;
  private state = ST_HEADER;
  // A header split across chunks is gathered here; the common case reads it in place.
  private readonly hdr = Buffer.alloc(FCGI_HEADER_LEN);
  private hdrPos = 0;
  private type = 0;
  private requestId = 0;
  private contentLength = 0;
  private paddingLength = 0;
  // Content of a record that straddles chunks, filled up to bodyPos.
  private body: Buffer | undefined;
  /** Where the content starts in body (after the header when the record is kept raw). */
  private bodyStart = 0;
  private bodyPos = 0;
  private padLeft = 0;
  private error: Error | undefined;
  /** With `reuse`, the one record object every onRecord call gets (its fields rewritten). */
  private readonly shared: FcgiRecord | undefined;
  /** STDOUT records get `raw`. */
  private readonly wantRaw: boolean;
  /** Where the current record's header starts in the chunk being decoded; -1 if not in it. */
  private recStart = -1;

  /**
   * `reuse`: onRecord gets the same object each time, valid only during the call (no
   * object per record); for consumers that do not keep records. `raw`: STDOUT records
   * carry their whole bytes, for forwarding them unchanged: a view of the chunk when the
   * record lay in it, else gathered with the content (padding then zeros).
   */
  constructor(onRecord: (rec: FcgiRecord) => void, reuse = false, raw = false) {
    this.onRecord = onRecord;
    this.shared = reuse ? { type: 0, requestId: 0, content: EMPTY, raw: undefined } : undefined;
    this.wantRaw = raw;
  }

  push(chunk: Buffer): void {
    if (this.state === ST_DEAD) throw this.deadError();
    try {
      this.run(chunk);
    } catch (err) {
      this.state = ST_DEAD;
      this.body = undefined;
      this.error = err as Error;
      throw err;
    }
  }

  /** True when a record is partly received (EOF now means a truncated record). */
  get midRecord(): boolean {
    return this.state === ST_CONTENT || this.state === ST_PADDING || (this.state === ST_HEADER && this.hdrPos > 0);
  }

  /** True after push() threw; every later push() throws again. */
  get dead(): boolean {
    return this.state === ST_DEAD;
  }

  private deadError(): ProtocolError {
    const e = this.error;
    if (e instanceof ProtocolError) return e;
    return new ProtocolError(ErrorCodes.FCGI_BAD_RECORD, `FastCGI decoder stopped after an earlier error: ${e?.message ?? 'unknown'}`);
  }

  private run(chunk: Buffer): void {
    const len = chunk.length;
    let pos = 0;
    this.recStart = -1; // a header from an earlier chunk is not in this one
    while (pos < len) {
      switch (this.state) {
        case ST_HEADER: {
          if (this.hdrPos === 0 && len - pos >= FCGI_HEADER_LEN) {
            this.parseHeader(chunk, pos);
            this.recStart = pos;
            pos += FCGI_HEADER_LEN;
          } else {
            this.recStart = -1;
            const n = Math.min(FCGI_HEADER_LEN - this.hdrPos, len - pos);
            chunk.copy(this.hdr, this.hdrPos, pos, pos + n);
            this.hdrPos += n;
            pos += n;
            if (this.hdrPos < FCGI_HEADER_LEN) return;
            this.hdrPos = 0;
            this.parseHeader(this.hdr, 0);
          }
          if (this.contentLength === 0) this.emit(EMPTY, this.rawOf(EMPTY, chunk, pos));
          break;
        }
        case ST_CONTENT: {
          const cl = this.contentLength;
          if (this.body === undefined) {
            if (len - pos >= cl) {
              const view = chunk.subarray(pos, pos + cl);
              pos += cl;
              this.emit(view, this.rawOf(view, chunk, pos));
              break;
            }
            // Gathered; a record kept raw is gathered with its header and (zero) padding.
            const raw = this.keepsRaw();
            const at = raw ? FCGI_HEADER_LEN : 0;
            const body = Buffer.allocUnsafe(raw ? FCGI_HEADER_LEN + cl + this.paddingLength : cl);
            if (raw) {
              this.copyHeader(body, chunk);
              body.fill(0, at + cl);
            }
            this.body = body;
            this.bodyStart = this.bodyPos = at;
            this.recStart = -1;
          }
          const stop = this.bodyStart + cl;
          const n = Math.min(stop - this.bodyPos, len - pos);
          chunk.copy(this.body, this.bodyPos, pos, pos + n);
          this.bodyPos += n;
          pos += n;
          if (this.bodyPos === stop) {
            const body = this.body;
            this.body = undefined;
            if (this.bodyStart === 0) this.emit(body, undefined);
            else this.emit(body.subarray(this.bodyStart, stop), body);
          }
          break;
        }
        case ST_PADDING: {
          const n = Math.min(this.padLeft, len - pos);
          this.padLeft -= n;
          pos += n;
          if (this.padLeft === 0) this.state = ST_HEADER;
          break;
        }
        default:
          throw this.deadError();
      }
    }
    // A raw record's header must outlive this chunk when its content does not end in it.
    if (this.recStart >= 0 && this.state === ST_CONTENT && this.body === undefined && this.keepsRaw()) {
      chunk.copy(this.hdr, 0, this.recStart, this.recStart + FCGI_HEADER_LEN);
    }
  }

  private keepsRaw(): boolean {
    return this.wantRaw && (this.type === RecordType.Stdout || this.type === RecordType.EndRequest);
  }

  /** The header of the current record: in `chunk` at recStart, else gathered in hdr. */
  private copyHeader(dst: Buffer, chunk: Buffer): void {
    if (this.recStart >= 0) chunk.copy(dst, 0, this.recStart, this.recStart + FCGI_HEADER_LEN);
    else this.hdr.copy(dst, 0);
  }

  /** The whole record as a view of `chunk` when it lies in it (content ended at `end`), else a copy with zero padding. */
  private rawOf(content: Buffer, chunk: Buffer, end: number): Buffer | undefined {
    if (!this.keepsRaw()) return undefined;
    const pad = this.paddingLength;
    if (this.recStart >= 0 && end + pad <= chunk.length) return chunk.subarray(this.recStart, end + pad);
    const cl = content.length;
    const buf = Buffer.allocUnsafe(FCGI_HEADER_LEN + cl + pad);
    this.copyHeader(buf, chunk);
    content.copy(buf, FCGI_HEADER_LEN);
    buf.fill(0, FCGI_HEADER_LEN + cl);
    return buf;
  }

  private parseHeader(b: Buffer, o: number): void {
    const version = b[o]!;
    const type = b[o + 1]!;
    const contentLength = (b[o + 4]! << 8) | b[o + 5]!;
    if (version !== FCGI_VERSION_1) {
      throw new ProtocolError(ErrorCodes.FCGI_BAD_VERSION, `FastCGI record version ${version}, expected 1`);
    }
    if (type === 0) throw new ProtocolError(ErrorCodes.FCGI_BAD_RECORD, 'FastCGI record type 0');
    const fixed = fixedContentLength(type);
    if (fixed >= 0 && contentLength !== fixed) {
      throw new ProtocolError(
        ErrorCodes.FCGI_BAD_RECORD,
        `FastCGI ${recordTypeName(type)} record with ${contentLength} content bytes, expected ${fixed}`,
      );
    }
    this.type = type;
    this.requestId = (b[o + 2]! << 8) | b[o + 3]!;
    this.contentLength = contentLength;
    this.paddingLength = b[o + 6]!;
    this.state = ST_CONTENT;
  }

  /** Moves past the content before calling out, so the state is right even if onRecord throws. */
  private emit(content: Buffer, raw: Buffer | undefined): void {
    if (this.paddingLength > 0) {
      this.padLeft = this.paddingLength;
      this.state = ST_PADDING;
    } else {
      this.state = ST_HEADER;
    }
    const rec = this.shared;
    if (rec === undefined) {
      this.onRecord({ type: this.type, requestId: this.requestId, content, raw });
      return;
    }
    rec.type = this.type;
    rec.requestId = this.requestId;
    rec.content = content;
    rec.raw = raw;
    this.onRecord(rec);
    rec.content = EMPTY; // the chunk is not kept alive by the decoder
    rec.raw = undefined;
  }
}

// ---- encoders ---------------------------------------------------------------------

/** A whole record (header, content, padding to a multiple of 8) as one buffer. content ≤ 65535 bytes. */
export function encodeRecord(type: number, requestId: number, content: Buffer = EMPTY): Buffer {
  const cl = content.length;
  if (cl > FCGI_MAX_CONTENT) throw new RangeError(`FastCGI record content of ${cl} bytes exceeds ${FCGI_MAX_CONTENT}`);
  const pad = paddingFor(cl);
  const buf = Buffer.allocUnsafe(FCGI_HEADER_LEN + cl + pad);
  writeHeader(buf, 0, type, requestId, cl, pad);
  content.copy(buf, FCGI_HEADER_LEN);
  if (pad > 0) buf.fill(0, FCGI_HEADER_LEN + cl);
  return buf;
}

/**
 * A stream's data as records of at most 65535 content bytes (no closing empty record),
 * appended to `out` as [header, view, padding?, ...] buffers ready for writev/cork.
 * Small data is copied into one buffer instead: one allocation beats three writev entries.
 */
export function encodeStream(type: number, requestId: number, data: Buffer, out: Buffer[]): void {
  const total = data.length;
  if (total === 0) return;
  if (total <= SMALL_STREAM) {
    out.push(encodeRecord(type, requestId, data));
    return;
  }
  const records = Math.ceil(total / FCGI_MAX_CONTENT);
  // One allocation for all headers of this call.
  const headers = Buffer.allocUnsafe(records * FCGI_HEADER_LEN);
  let off = 0;
  for (let i = 0; i < records; i++) {
    const cl = Math.min(FCGI_MAX_CONTENT, total - off);
    const pad = paddingFor(cl);
    const h = i * FCGI_HEADER_LEN;
    writeHeader(headers, h, type, requestId, cl, pad);
    out.push(headers.subarray(h, h + FCGI_HEADER_LEN), data.subarray(off, off + cl));
    if (pad > 0) out.push(ZERO_PAD.subarray(0, pad));
    off += cl;
  }
}

export function encodeBeginRequest(requestId: number, role: number, flags: number): Buffer {
  const buf = Buffer.allocUnsafe(16);
  writeHeader(buf, 0, RecordType.BeginRequest, requestId, 8, 0);
  buf.writeUInt16BE(role, 8);
  buf[10] = flags;
  buf.fill(0, 11, 16);
  return buf;
}

export function parseBeginRequest(content: Buffer): { role: number; flags: number } {
  if (content.length < 8) throw new ProtocolError(ErrorCodes.FCGI_BAD_RECORD, 'short FastCGI BEGIN_REQUEST body');
  return { role: content.readUInt16BE(0), flags: content[2]! };
}

/** `a` and `b` as one view when b starts where a ends in the same memory (two records read in one chunk), else undefined. */
export function joinAdjacent(a: Buffer, b: Buffer): Buffer | undefined {
  if (a.length === 0) return b;
  if (b.length === 0) return a;
  if (a.buffer !== b.buffer || a.byteOffset + a.length !== b.byteOffset) return undefined;
  return Buffer.from(a.buffer, a.byteOffset, a.length + b.length);
}

/** Sets the request id of every whole record in `raw` (in place; records whose id is already `id` are not written). */
export function setRequestIds(raw: Buffer, id: number): void {
  const hi = id >> 8;
  const lo = id & 0xff;
  for (let p = 0; p + FCGI_HEADER_LEN <= raw.length; p += FCGI_HEADER_LEN + ((raw[p + 4]! << 8) | raw[p + 5]!) + raw[p + 6]!) {
    if (raw[p + 2] !== hi || raw[p + 3] !== lo) {
      raw[p + 2] = hi;
      raw[p + 3] = lo;
    }
  }
}

/** `records` (whole records, copied) then the empty STDOUT and END_REQUEST (complete) of `requestId`, as one buffer. */
export function encodeRecordsAndEnd(requestId: number, records: Buffer): Buffer {
  const n = records.length;
  const buf = Buffer.allocUnsafe(n + 2 * FCGI_HEADER_LEN + 8);
  records.copy(buf, 0);
  writeHeader(buf, n, RecordType.Stdout, requestId, 0, 0);
  writeEndRequest(buf, n + FCGI_HEADER_LEN, requestId, 0, ProtocolStatus.RequestComplete);
  return buf;
}

export function encodeEndRequest(requestId: number, appStatus: number, protocolStatus: number): Buffer {
  const buf = Buffer.allocUnsafe(16);
  writeEndRequest(buf, 0, requestId, appStatus, protocolStatus);
  return buf;
}

function writeEndRequest(buf: Buffer, off: number, requestId: number, appStatus: number, protocolStatus: number): void {
  writeHeader(buf, off, RecordType.EndRequest, requestId, 8, 0);
  buf.writeUInt32BE(appStatus >>> 0, off + 8);
  buf[off + 12] = protocolStatus;
  buf[off + 13] = 0;
  buf[off + 14] = 0;
  buf[off + 15] = 0;
}

/**
 * A responder's STDOUT output as one buffer: `a` then `b` as one STDOUT record (their
 * lengths together at most 65535; either may be empty, both empty means no record), and
 * with `end` the closing empty STDOUT and END_REQUEST(0, REQUEST_COMPLETE). One allocation
 * for a response head with its first body bytes, or for a whole small response.
 */
export function encodeStdout(requestId: number, a: Buffer, b: Buffer, end: boolean): Buffer {
  const cl = a.length + b.length;
  if (cl > FCGI_MAX_CONTENT) throw new RangeError(`FastCGI record content of ${cl} bytes exceeds ${FCGI_MAX_CONTENT}`);
  const pad = paddingFor(cl);
  const rec = cl > 0 ? FCGI_HEADER_LEN + cl + pad : 0;
  const buf = Buffer.allocUnsafe(rec + (end ? 2 * FCGI_HEADER_LEN + 8 : 0));
  if (cl > 0) {
    writeHeader(buf, 0, RecordType.Stdout, requestId, cl, pad);
    a.copy(buf, FCGI_HEADER_LEN);
    b.copy(buf, FCGI_HEADER_LEN + a.length);
    if (pad > 0) buf.fill(0, FCGI_HEADER_LEN + cl, rec);
  }
  if (end) {
    writeHeader(buf, rec, RecordType.Stdout, requestId, 0, 0);
    writeEndRequest(buf, rec + FCGI_HEADER_LEN, requestId, 0, ProtocolStatus.RequestComplete);
  }
  return buf;
}

export function parseEndRequest(content: Buffer): { appStatus: number; protocolStatus: number } {
  if (content.length < 8) throw new ProtocolError(ErrorCodes.FCGI_BAD_RECORD, 'short FastCGI END_REQUEST body');
  return { appStatus: content.readUInt32BE(0), protocolStatus: content[4]! };
}

export function encodeAbortRequest(requestId: number): Buffer {
  const buf = Buffer.allocUnsafe(FCGI_HEADER_LEN);
  writeHeader(buf, 0, RecordType.AbortRequest, requestId, 0, 0);
  return buf;
}

export function encodeUnknownType(type: number): Buffer {
  const buf = Buffer.allocUnsafe(16);
  writeHeader(buf, 0, RecordType.UnknownType, FCGI_NULL_REQUEST_ID, 8, 0);
  buf[8] = type;
  buf.fill(0, 9, 16);
  return buf;
}

/** The record type an UNKNOWN_TYPE record refers to. */
export function parseUnknownType(content: Buffer): number {
  if (content.length < 8) throw new ProtocolError(ErrorCodes.FCGI_BAD_RECORD, 'short FastCGI UNKNOWN_TYPE body');
  return content[0]!;
}

/** A FCGI_GET_VALUES record asking for these variables (names with empty values). */
export function encodeGetValues(names: readonly string[]): Buffer {
  const flat: string[] = [];
  for (const n of names) flat.push(n, '');
  return encodeRecord(RecordType.GetValues, FCGI_NULL_REQUEST_ID, encodeNameValues(new CgiParams(flat)));
}

/** The FCGI_GET_VALUES_RESULT answer; values are decimal strings per the spec. */
export function encodeGetValuesResult(values: CgiParams): Buffer {
  return encodeRecord(RecordType.GetValuesResult, FCGI_NULL_REQUEST_ID, encodeNameValues(values));
}

/**
 * Content lengths of the PARAMS records for these pairs. php-cgi (main/fastcgi.c,
 * fcgi_read_request) decodes each PARAMS record on its own, so pairs are packed whole,
 * up to 65535 bytes a record; only a pair longer than that straddles records (the spec
 * allows it; php-cgi cannot take such a pair at all).
 */
export function paramsRecordLengths(flat: readonly string[]): number[] {
  const lengths: number[] = [];
  let cur = 0;
  for (let i = 0; i < flat.length; i += 2) {
    let pair = nameValuesLength([flat[i]!, flat[i + 1]!]);
    if (cur + pair <= FCGI_MAX_CONTENT) {
      cur += pair;
      continue;
    }
    if (cur > 0) lengths.push(cur);
    while (pair > FCGI_MAX_CONTENT) {
      lengths.push(FCGI_MAX_CONTENT);
      pair -= FCGI_MAX_CONTENT;
    }
    cur = pair;
  }
  if (cur > 0) lengths.push(cur);
  return lengths;
}

/**
 * Padding for a PARAMS record: php-cgi refuses one whose content plus padding passes
 * 65535, so a record that long goes unpadded (padding is optional in the spec).
 */
function paramsPadding(cl: number): number {
  const pad = paddingFor(cl);
  return cl + pad <= FCGI_MAX_CONTENT ? pad : 0;
}

/**
 * BEGIN_REQUEST + PARAMS records + empty PARAMS (+ the empty STDIN of a request without
 * body when `noBody`), as one buffer. Params a FastCGI client sent (up to one record of
 * them, the usual case) are copied as received; more are re-packed pair by pair.
 */
export function encodeRequestHead(requestId: number, role: number, flags: number, params: CgiParams, noBody = false): Buffer {
  const wireLen = params instanceof FcgiParams ? params.wireLength() : -1;
  const fp = wireLen >= 0 && wireLen <= FCGI_MAX_CONTENT ? (params as FcgiParams) : undefined;
  const flat = fp === undefined ? params.pairs : EMPTY_FLAT;
  const nvLen = fp === undefined ? nameValuesLength(flat) : wireLen;
  // One PARAMS record (the common case) or several (undefined: one, or none when empty).
  const lengths = nvLen <= FCGI_MAX_CONTENT ? undefined : paramsRecordLengths(flat);
  const pad1 = lengths === undefined && nvLen > 0 ? paramsPadding(nvLen) : 0;
  // BEGIN_REQUEST (16) + PARAMS headers and padding + closing PARAMS (8) [+ empty STDIN (8)].
  let total = 16 + nvLen + FCGI_HEADER_LEN + (noBody ? FCGI_HEADER_LEN : 0);
  if (lengths === undefined) total += nvLen > 0 ? FCGI_HEADER_LEN + pad1 : 0;
  else for (const cl of lengths) total += FCGI_HEADER_LEN + paramsPadding(cl);
  const buf = Buffer.allocUnsafe(total);
  writeHeader(buf, 0, RecordType.BeginRequest, requestId, 8, 0);
  // Byte stores, not writeUInt16BE and fill: those validate their arguments and fill calls into the runtime.
  buf[8] = role >>> 8;
  buf[9] = role & 0xff;
  buf[10] = flags;
  buf[11] = buf[12] = buf[13] = buf[14] = buf[15] = 0;
  let off = 16;
  if (lengths === undefined) {
    if (nvLen > 0) {
      // The common case: pairs written straight into place, no intermediate copy.
      writeHeader(buf, off, RecordType.Params, requestId, nvLen, pad1);
      off = fp === undefined ? writeNameValues(flat, buf, off + FCGI_HEADER_LEN) : fp.writeWire(buf, off + FCGI_HEADER_LEN);
      for (let end = off + pad1; off < end; off++) buf[off] = 0;
    }
  } else {
    const nv = Buffer.allocUnsafe(nvLen);
    writeNameValues(flat, nv, 0);
    let src = 0;
    for (const cl of lengths) {
      const pad = paramsPadding(cl);
      writeHeader(buf, off, RecordType.Params, requestId, cl, pad);
      off += FCGI_HEADER_LEN;
      nv.copy(buf, off, src, src + cl);
      off += cl;
      src += cl;
      buf.fill(0, off, off + pad);
      off += pad;
    }
  }
  writeHeader(buf, off, RecordType.Params, requestId, 0, 0);
  if (noBody) writeHeader(buf, off + FCGI_HEADER_LEN, RecordType.Stdin, requestId, 0, 0);
  return buf;
}
