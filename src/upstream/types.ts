/**
 * The contract between a pool and the connections to its backends.
 */
import type { ProxyError } from '../errors.js';
import type { SocketAddress } from '../protocol/address.js';
import type { Exchange } from '../protocol/exchange.js';
import type { ParamsLimits } from '../protocol/params.js';
import type { BackendProtocol } from '../config/types.js';
import type { AttemptFacts } from './retry.js';

export interface UpstreamOptions {
  protocol: BackendProtocol;
  connectTimeout: number;
  /** No byte from the backend for this long while a request runs → 504. */
  readTimeout: number;
  /** FastCGI only: FCGI_KEEP_CONN and reuse connections between requests. */
  keepAlive: boolean;
  /** Idle kept-alive connections an endpoint holds at most. */
  maxIdle: number;
  /**
   * The backend runs one request at a time (a spawned worker). After a client abort a
   * FastCGI request is cancelled with FCGI_ABORT_REQUEST and read to its END_REQUEST (or
   * close) before the outcome is reported, so the worker is not handed another request
   * while its script still runs; the exchange itself is finished for the client at once.
   * Off (external backends): the connection is closed at once, as nginx does.
   */
  drainOnAbort?: boolean;
  /**
   * How an authorizer exchange reaches a FastCGI backend: `native` sends role
   * FCGI_AUTHORIZER; `responder` sends a responder request with FCGI_ROLE=AUTHORIZER,
   * for applications that know only that role. SCGI always gets the latter.
   */
  authorizerRole?: 'native' | 'responder';
}

export type UpstreamOutcome =
  /** The response was delivered (respondEnd was called). */
  | { kind: 'done' }
  /**
   * The client aborted. `backendBusy`: the connection was closed while the backend may
   * still be running the request (SCGI has no abort message; php-cgi ignores
   * FCGI_ABORT_REQUEST), so a backend that serves one request at a time is still busy.
   * Without it the backend request is over (it never started, or it ended while drained).
   */
  | { kind: 'aborted'; backendBusy?: boolean }
  /**
   * The exchange was NOT answered; the caller decides. `retryable`: retry.ts's verdict on
   * `facts` (how far the attempt got): exchange.rewind() may let another backend take it.
   * A caller that knows more (a spawned pool: how the worker exited) asks retry.ts again
   * with `facts`. `backendDown`: the backend itself looks unreachable (mark it down for a while).
   */
  | { kind: 'failed'; error: ProxyError; retryable: boolean; backendDown: boolean; facts: AttemptFacts };

/**
 * All connections to one backend address. run() uses an idle kept-alive connection
 * or opens one; when a reused connection turns out closed by the backend before any
 * response byte, it retries once on a fresh connection before reporting.
 */
export interface Endpoint {
  readonly address: SocketAddress;
  /** Requests running now. */
  readonly active: number;
  run(ex: Exchange, done: (outcome: UpstreamOutcome) => void): void;
  /** Closes idle connections (e.g. before stopping a worker). */
  closeIdle(): void;
  /** Closes everything; running requests fail with BACKEND_CLOSED. */
  destroy(): void;
}

export type { ParamsLimits };
