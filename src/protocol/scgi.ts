/**
 * SCGI: a netstring of NUL-separated header pairs, CONTENT_LENGTH first and required,
 * then the body. Pure. STUB: signatures fixed; the protocol owner fills in bodies.
 */
import type { CgiParams, ParamsLimits } from './params.js';

export interface ScgiLimits extends ParamsLimits {
  /** Largest netstring length accepted. Default: ParamsLimits.maxBytes + 64. */
  maxHeaderBytes: number;
}

/**
 * Push decoder for the request side: onHead(params, contentLength) once, then
 * onBody(view) for body bytes up to CONTENT_LENGTH, then onEnd(). Bytes past
 * CONTENT_LENGTH are ignored. Throws ProtocolError (SCGI_*, PARAMS_*).
 */
export declare class ScgiRequestDecoder {
  constructor(
    limits: ScgiLimits,
    handlers: {
      onHead(params: CgiParams, contentLength: number): void;
      onBody(chunk: Buffer): void;
      onEnd(): void;
    },
  );
  push(chunk: Buffer): void;
  /** True once the head was decoded. */
  readonly headDone: boolean;
}

/** The netstring header for a request; CONTENT_LENGTH first (taken from params, "0" if absent), "SCGI"="1" added. */
export declare function encodeScgiHead(params: CgiParams): Buffer;
