/**
 * How a failed exchange with a backend is reported to the pool. One function per kind
 * of failure, so the classification (code, status, backendDown) lives in one place and
 * every message names the backend address. Whether the request may go elsewhere is
 * retry.ts's answer to the attempt's facts, which the outcome carries.
 */
import { ErrorCodes, ProtocolError, ProxyError } from '../errors.js';
import { mayRetryElsewhere, type AttemptFacts, type AttemptFailure } from './retry.js';
import type { UpstreamOutcome } from './types.js';

export type FailedOutcome = Extract<UpstreamOutcome, { kind: 'failed' }>;

export const DONE: UpstreamOutcome = Object.freeze({ kind: 'done' });
export const ABORTED: UpstreamOutcome = Object.freeze({ kind: 'aborted' });
/** Aborted, with the request possibly still running on the backend. */
export const ABORTED_BACKEND_BUSY: UpstreamOutcome = Object.freeze({ kind: 'aborted', backendBusy: true });

function failed(error: ProxyError, facts: AttemptFacts, backendDown: boolean): FailedOutcome {
  return { kind: 'failed', error, retryable: mayRetryElsewhere(facts).retry, backendDown, facts };
}

/** Facts of a failure that does not depend on how far the attempt got. */
function plain(failure: AttemptFailure, responseBytes = false): AttemptFacts {
  return { failure, headSent: failure !== 'connect', responseBytes, reused: false, reset: false, idempotent: false };
}

function errno(err: Error | undefined): string {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code ?? err?.message ?? 'unknown error';
}

/**
 * The connection was never established: nothing reached the backend, another one may
 * take the request. A full accept queue on a Unix socket (EAGAIN) means busy, not down.
 */
export function connectFailed(address: string, err: Error): FailedOutcome {
  const code = errno(err);
  const down = code !== 'EAGAIN';
  const what = code === 'ECONNREFUSED' ? 'refused the connection' : code === 'EAGAIN' ? 'has a full accept queue' : 'is unreachable';
  return failed(new ProxyError(ErrorCodes.BACKEND_UNREACHABLE, 502, `backend ${address} ${what} (${code})`), plain('connect'), down);
}

export function connectTimedOut(address: string, ms: number): FailedOutcome {
  return failed(new ProxyError(ErrorCodes.BACKEND_TIMEOUT, 504, `backend ${address}: connect timed out after ${ms} ms`), plain('connect'), true);
}

/** No byte from the backend for `ms` while the request ran. */
export function readTimedOut(address: string, ms: number): FailedOutcome {
  return failed(new ProxyError(ErrorCodes.BACKEND_TIMEOUT, 504, `backend ${address}: no response for ${ms} ms`), plain('read_timeout'), false);
}

/**
 * The backend closed the connection before the response was complete. `facts` say how
 * far the attempt got (a kept-alive connection's stale close is replayed inside the
 * endpoint before it gets here).
 */
export function closedEarly(address: string, err: Error | undefined, afterHead: boolean, facts: AttemptFacts): FailedOutcome {
  const how = err ? errno(err) : 'EOF';
  const when = afterHead ? 'mid-response' : facts.responseBytes ? 'before the response head was complete' : 'before responding';
  return failed(new ProxyError(ErrorCodes.BACKEND_CLOSED, 502, `backend ${address} closed the connection ${when} (${how})`), facts, false);
}

/**
 * Garbage records, an invalid CGI head, an END_REQUEST without a response. `answered`:
 * the bytes that broke it, quoted (their start) so a worker speaking the other protocol
 * shows what it said.
 */
export function protocolFault(address: string, detail: string | ProtocolError, answered?: Buffer): FailedOutcome {
  const text = typeof detail === 'string' ? detail : `${detail.message} (${detail.code})`;
  const said = answered === undefined || answered.length === 0 ? '' : `; it answered ${quoteBytes(answered, 48)}`;
  return failed(new ProxyError(ErrorCodes.BACKEND_PROTOCOL, 502, `backend ${address} broke the protocol: ${text}${said}`), plain('protocol', true), false);
}

/** The first `max` bytes as a JSON string, control and non-ASCII bytes as \xNN. */
function quoteBytes(b: Buffer, max: number): string {
  let out = '';
  for (const c of b.subarray(0, max)) out += c >= 0x20 && c < 0x7f && c !== 0x22 && c !== 0x5c ? String.fromCharCode(c) : c === 0x0a ? '\\n' : c === 0x0d ? '\\r' : `\\x${c.toString(16).padStart(2, '0')}`;
  return `"${out}"${b.length > max ? '…' : ''}`;
}

/** END_REQUEST with CANT_MPX_CONN / OVERLOADED: the application did not take the request. */
export function refusedRequest(address: string, why: string): FailedOutcome {
  return failed(new ProxyError(ErrorCodes.BACKEND_UNREACHABLE, 502, `backend ${address} refused the request (${why})`), plain('declined', true), false);
}

/** The request cannot be written in the backend's protocol (e.g. a NUL byte in a param over SCGI). */
export function unencodable(address: string, err: Error): FailedOutcome {
  const code = err instanceof ProtocolError ? err.code : ErrorCodes.BACKEND_PROTOCOL;
  return failed(new ProxyError(code, 400, `request cannot be sent to backend ${address}: ${err.message}`), plain('unencodable'), false);
}

/** The endpoint was destroyed while the request ran (`headSent`: its head had gone out) or before it started. */
export function endpointClosed(address: string, headSent: boolean): FailedOutcome {
  return failed(
    new ProxyError(ErrorCodes.BACKEND_CLOSED, 502, `backend ${address}: connection closed by fcgi-pm (endpoint destroyed)`),
    { ...plain('cancelled'), headSent },
    false,
  );
}

/** An authorizer's 200 that cannot be acted on (src/protocol/authorizer.ts): denied as a bad gateway. */
export function badAuthorizerAnswer(address: string, reason: string): FailedOutcome {
  return failed(new ProxyError(ErrorCodes.AUTHORIZER_ANSWER, 502, `authorizer ${address} answered badly: ${reason}`), plain('protocol', true), false);
}

/** END_REQUEST with FCGI_UNKNOWN_ROLE for an authorizer request: every worker of the pool will say the same. */
export function authorizerRoleRefused(address: string): FailedOutcome {
  return failed(
    new ProxyError(ErrorCodes.AUTHORIZER_ROLE, 502, `backend ${address} does not play the FastCGI authorizer role (FCGI_UNKNOWN_ROLE); set authorizer_role: responder on its pool`),
    plain('protocol', true),
    false,
  );
}
