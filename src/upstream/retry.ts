/**
 * The one answer to "may this request go to another backend (or connection)?". Pure:
 * the facts of a failed attempt in, a verdict and its reason out. Every failure the
 * upstream reports (failures.ts) carries its facts and the verdict as `retryable`; the
 * endpoint's replay on a fresh connection, the external pool's next backend and the
 * spawned pool's next worker all follow it.
 *
 * A retry is safe only when the application cannot have run the request, or running it
 * twice is harmless (GET, HEAD, OPTIONS on a reused connection, as nginx's
 * proxy_next_upstream without non_idempotent). What counts as proof:
 *   - the connection was never made (refused, no socket, full accept queue, timeout);
 *   - the application refused the request (FastCGI OVERLOADED / CANT_MPX_CONN);
 *   - our request head never reached the kernel;
 *   - a reset on a reused connection before any response byte: the backend had given up
 *     on the connection (php-cgi after PHP_FCGI_MAX_REQUESTS, an idle timeout) and closed
 *     it with our request unread;
 *   - the process behind the socket exited by itself with code 0 (only a spawned pool
 *     knows): php-cgi does that between requests, so one without a response byte was
 *     never read, even if it sat in the listen backlog when the process went.
 *
 * NOT provable: a FRESH connection closed or reset before any response byte. A connect
 * that lands in the backlog of a backend that is exiting is reset unread; an application
 * that read the request, ran it and died with bytes unread is reset the same way. Such a
 * non-idempotent request is answered 502 and must not be replayed.
 */

/** What went wrong with an attempt. */
export type AttemptFailure =
  /** The connection was never established (refused, ENOENT, EAGAIN, connect timeout). */
  | 'connect'
  /** The application declined the request (FastCGI END_REQUEST OVERLOADED / CANT_MPX_CONN). */
  | 'declined'
  /** fcgi-pm closed the connection itself (endpoint destroyed). */
  | 'cancelled'
  /** The backend closed or reset the connection before the response was complete. */
  | 'closed'
  /** No byte from the backend for read_timeout: it may still be running it. */
  | 'read_timeout'
  /** The backend broke the protocol, or its answer could not be acted on. */
  | 'protocol'
  /** The request cannot be written in the backend's protocol: no backend will take it. */
  | 'unencodable';

export interface AttemptFacts {
  failure: AttemptFailure;
  /** Our request head reached the kernel (the write callback succeeded). */
  headSent: boolean;
  /** Any byte of the response arrived. */
  responseBytes: boolean;
  /** The connection had carried an earlier request (kept alive). */
  reused: boolean;
  /** The close was a reset (ECONNRESET), not an orderly EOF. */
  reset: boolean;
  /** The method may run twice without harm (GET, HEAD, OPTIONS). */
  idempotent: boolean;
  /** The backend's process exited by itself with code 0 (known only to a spawned pool). */
  cleanExit?: boolean;
  /**
   * A replay's failure (the endpoint's, on a fresh connection) after the kept-alive one
   * closed with our head sent: that attempt was vouched for by the reused-reset rule, which
   * holds only for a backend that closed an idle connection, not for a process that died
   * under the request. What this attempt proves does not cover that one.
   */
  replayed?: boolean;
}

export interface RetryVerdict {
  retry: boolean;
  /** Why, for the debug log and the table test. */
  why: string;
}

const yes = (why: string): RetryVerdict => ({ retry: true, why });
const no = (why: string): RetryVerdict => ({ retry: false, why });

/** May the request of this failed attempt go to another backend, worker or connection? */
export function mayRetryElsewhere(f: AttemptFacts): RetryVerdict {
  if (f.failure === 'connect') return yes('never connected: nothing reached the backend');
  if (f.failure === 'declined') return yes('the application declined the request');
  if (f.responseBytes) return no('the backend started answering: it ran the request');
  switch (f.failure) {
    case 'cancelled':
      return f.headSent ? no('closed by fcgi-pm after the request went out') : yes('closed by fcgi-pm before the request went out');
    case 'read_timeout':
      return no('the backend may still be running it');
    case 'protocol':
      return no('the backend broke the protocol: it may have run it');
    case 'unencodable':
      return no('no backend can take this request');
    case 'closed':
      if (!f.headSent) return yes('closed before our request left us');
      if (f.cleanExit === true) return yes('its process exited cleanly between requests: the request was never read');
      if (f.reused && f.reset) return yes('a reused connection reset before any response byte: the backend had given up on it, our request unread');
      if (!f.reused) return no("a fresh connection closed before any response byte: an exiting backend's backlog looks the same as an application that read the request and died on it");
      if (f.idempotent) return yes('a reused connection closed before any response byte, and the method may run twice');
      return no('a reused connection closed (EOF) after our request went out: the application may have read and run it');
  }
}

/** Methods a retry may repeat. */
export function isIdempotent(method: string | undefined): boolean {
  return method === 'GET' || method === 'HEAD' || method === 'OPTIONS';
}
