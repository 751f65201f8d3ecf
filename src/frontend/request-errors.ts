/**
 * How front ends turn failures into answers: which status a bad request gets, and the
 * short text an error page carries (the code, never internal details like backend paths).
 */
import { ErrorCodes, type ProtocolError } from '../errors.js';
import { reasonPhrase } from '../protocol/cgi-response.js';

/** 431 for request variables over the limits, 400 for anything else malformed. */
export function statusOfProtocolError(err: ProtocolError): number {
  switch (err.code) {
    case ErrorCodes.PARAMS_TOO_LARGE:
    case ErrorCodes.PARAMS_TOO_MANY:
    case ErrorCodes.SCGI_HEADER_TOO_LARGE:
      return 431;
    default:
      return 400;
  }
}

/** Error page text for a failed exchange. */
export function errorText(status: number, code: string): string {
  return `${status} ${reasonPhrase(status)} (${code})\n`;
}

/** Codes for HTTP-level rejections in log lines and error pages (stable, in ErrorCodes). */
export const HttpRejectCodes = {
  /** Undecodable path, NUL byte, or ".." climbing out of the document root: 400. */
  BAD_PATH: ErrorCodes.HTTP_BAD_PATH,
  /** Request head not complete within idle_timeout. */
  HEAD_TIMEOUT: ErrorCodes.HTTP_HEAD_TIMEOUT,
  /** Request body stalled for idle_timeout. */
  BODY_TIMEOUT: ErrorCodes.HTTP_BODY_TIMEOUT,
  /** Client stopped reading its response for idle_timeout. */
  SEND_TIMEOUT: ErrorCodes.HTTP_SEND_TIMEOUT,
} as const;
