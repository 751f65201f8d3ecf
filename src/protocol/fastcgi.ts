/**
 * FastCGI 1.0 wire format: record headers, typed bodies, name-value pairs, stream
 * splitting, and a resumable push decoder. Pure: bytes in, records out.
 * STUB: signatures fixed; the protocol owner fills in bodies.
 */
import type { CgiParams, ParamsLimits } from './params.js';

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

export const ProtocolStatus = {
  RequestComplete: 0,
  CantMpxConn: 1,
  Overloaded: 2,
  UnknownRole: 3,
} as const;

/** One decoded record. `content` is a view into the pushed chunk (copied only if the record straddled chunks). */
export interface FcgiRecord {
  type: number;
  requestId: number;
  content: Buffer;
}

/**
 * Push decoder. `push(chunk)` calls onRecord for each complete record, in order, and
 * keeps a partial record for the next push. Throws ProtocolError (FCGI_BAD_VERSION,
 * FCGI_BAD_RECORD) on bytes that cannot be FastCGI; after a throw the decoder is unusable.
 */
export class FcgiDecoder {
  constructor(onRecord: (rec: FcgiRecord) => void) {
    void onRecord;
    throw new Error('todo');
  }
  push(chunk: Buffer): void {
    void chunk;
  }
  /** True when a record is partly received (EOF now means a truncated record). */
  get midRecord(): boolean {
    return false;
  }
}

/** A whole record (header, content, padding to a multiple of 8) as one buffer. content ≤ 65535 bytes. */
export declare function encodeRecord(type: number, requestId: number, content?: Buffer): Buffer;
/**
 * A stream's data as records of at most 65535 content bytes (no closing empty record),
 * appended to `out` as [header, view, padding?, ...] buffers ready for writev/cork.
 */
export declare function encodeStream(type: number, requestId: number, data: Buffer, out: Buffer[]): void;
export declare function encodeBeginRequest(requestId: number, role: number, flags: number): Buffer;
export declare function parseBeginRequest(content: Buffer): { role: number; flags: number };
export declare function encodeEndRequest(requestId: number, appStatus: number, protocolStatus: number): Buffer;
export declare function parseEndRequest(content: Buffer): { appStatus: number; protocolStatus: number };
export declare function encodeAbortRequest(requestId: number): Buffer;
export declare function encodeUnknownType(type: number): Buffer;
/** Name-value pair body (1- or 4-byte lengths), without record headers. */
export declare function encodeNameValues(params: CgiParams): Buffer;
/** Throws ProtocolError FCGI_BAD_PARAMS, PARAMS_TOO_LARGE, PARAMS_TOO_MANY. */
export declare function decodeNameValues(body: Buffer, limits: ParamsLimits): CgiParams;
/** BEGIN_REQUEST + PARAMS records + empty PARAMS, as one buffer. */
export declare function encodeRequestHead(requestId: number, role: number, flags: number, params: CgiParams): Buffer;

/**
 * Collects one request's PARAMS stream across records; enforces limits as bytes arrive
 * (not only at the end) so an endless stream is refused early.
 */
export declare class ParamsCollector {
  constructor(limits: ParamsLimits);
  /** Adds a PARAMS record body; returns the decoded params when `content` is empty (end of stream). */
  add(content: Buffer): CgiParams | undefined;
}
