/**
 * What node:http (llhttp) lets through or words vaguely, and nginx does not: the checks
 * and statuses the HTTP listener adds so it refuses the same requests nginx refuses.
 * llhttp itself already refuses an HTTP/1.1 request without Host (400), both
 * Content-Length and Transfer-Encoding, and bad chunk framing; it accepts doubled
 * spaces in the request line, as nginx does.
 */
import type { IncomingMessage } from 'node:http';
import { ErrorCodes, type ErrorCode } from '../errors.js';

export interface HeadProblem {
  status: number;
  code: ErrorCode;
  why: string;
}

/** A parsed request head node:http accepted but we must refuse; undefined when fine. */
export function headProblem(req: IncomingMessage): HeadProblem | undefined {
  // llhttp accepts any digit.digit; only 1.x has the framing we parse (RFC 9110 §15.6.6).
  if (req.httpVersionMajor !== 1) return { status: 505, code: ErrorCodes.HTTP_VERSION, why: `HTTP/${req.httpVersion} request; answered 505` };
  // Two Hosts make the target ambiguous (RFC 9112 §3.2); llhttp keeps both.
  const raw = req.rawHeaders;
  let hosts = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const n = raw[i]!;
    if (n.length === 4 && n.toLowerCase() === 'host' && ++hosts > 1) {
      return { status: 400, code: ErrorCodes.HTTP_BAD_HEAD, why: 'HTTP request with two Host headers; answered 400' };
    }
  }
  return undefined;
}

const VERSIONED_LINE = /^[!-~]+ [^ \r\n]+ HTTP\/\d\.\d\r?\n/;

/**
 * Status for a request node:http could not parse: 431 for an oversized head, 408 for a
 * head timeout, 505 when a well-formed request line names a version llhttp refuses
 * (HTTP/1.2), else 400.
 */
export function clientErrorStatus(err: NodeJS.ErrnoException & { rawPacket?: Buffer }): number {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW':
      return 431;
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return 408;
    case 'HPE_INVALID_VERSION':
      return err.rawPacket !== undefined && VERSIONED_LINE.test(err.rawPacket.subarray(0, 8192).toString('latin1')) ? 505 : 400;
    default:
      return 400;
  }
}
