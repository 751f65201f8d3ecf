/**
 * How front ends turn failures into answers: which status a bad request gets, and the
 * short text an error page carries (the code, never internal details like backend paths).
 */
import { ErrorCodes, ProtocolError, type ProxyError } from '../errors.js';
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

export function errorTextOf(err: ProxyError): string {
  return errorText(err.status, err.code);
}

/** The code of an error for log lines, whatever was thrown. */
export function codeOf(err: unknown): string {
  if (err instanceof ProtocolError) return err.code;
  const c = (err as { code?: unknown } | null)?.code;
  return typeof c === 'string' ? c : 'ERR_INTERNAL';
}
