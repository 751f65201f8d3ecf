/**
 * A spawned pool's handling of a worker that dies under its request. The failure report
 * and the exit event race: whichever comes first waits up to EXIT_GRACE_MS for the
 * other, so the request is answered knowing how the worker went.
 *
 * - hold: a failure that may mean the worker is dying waits for the exit event (the
 *   wait is the supervisor's: its table's `suspect` → hold, `grace` → unhold, one timer
 *   per worker). No exit in time (graceOver): a plain failure is answered; a worker
 *   alive but unreachable is replaced and its request goes to another worker.
 * - exited: a worker that exits under a request ends it with the held failure, or
 *   waits for the endpoint's own report (exit grace), then closes the endpoint.
 * - lost: once the worker has exited, whether its request goes to another worker or
 *   is answered 502 WORKER_CRASHED.
 *
 * The pool calls hold / graceOver / exited / clear / lost; it carries out what this
 * decides through WorkerFailureHooks. The exit grace timer lives on the Seat (exitTimer).
 */
import { ErrorCodes, ProxyError } from '../../errors.js';
import type { Exchange } from '../../protocol/exchange.js';
import { mayRetryElsewhere } from '../../upstream/retry.js';
import type { FailedOutcome } from '../../upstream/failures.js';
import type { UpstreamOutcome } from '../../upstream/types.js';
import type { WorkerExit } from '../../worker/types.js';
import type { Clock } from '../../util/clock.js';
import { exitText, scriptOf } from './slot.js';
import type { Seat } from './seats.js';

/**
 * A failure that may mean the worker is dying (connection closed, connect refused) waits
 * this long for the exit event, so the client learns WORKER_CRASHED (with the exit code
 * in the log) or the request goes to another worker. The exit usually comes within ms.
 */
export const EXIT_GRACE_MS = 250;

/** What failure handling asks of its pool. */
export interface WorkerFailureHooks {
  /** Ends the worker's request with `o` the usual way (which asks lost() if the worker exited). */
  endRequest(seat: Seat, ex: Exchange, o: UpstreamOutcome): void;
  /** The worker is alive but unreachable: `ex` goes to another worker (or is answered `err`) and the worker is replaced. */
  replace(seat: Seat, ex: Exchange, err: ProxyError): void;
  /** A failure was held: the supervisor waits EXIT_GRACE_MS for the worker's exit, then calls graceOver. */
  suspect(seat: Seat): void;
}

export class WorkerFailures {
  private readonly pool: string;
  private readonly clock: Clock;
  private readonly hooks: WorkerFailureHooks;

  constructor(pool: string, clock: Clock, hooks: WorkerFailureHooks) {
    this.pool = pool;
    this.clock = clock;
    this.hooks = hooks;
  }

  /** Holds a failure of the worker's request if it may mean the worker is dying; true if held. */
  hold(seat: Seat, o: FailedOutcome): boolean {
    if (seat.slot.exit !== undefined || !(o.retryable || o.error.code === ErrorCodes.BACKEND_CLOSED)) return false;
    // The worker may be dying: learn how before answering.
    seat.held = o;
    seat.heldAt = this.clock.now();
    this.hooks.suspect(seat);
    return true;
  }

  /**
   * The supervisor's wait for the exit is over and the worker lives: each failure held
   * that long is answered or its request replaced. False when one held later still waits.
   */
  graceOver(seats: readonly Seat[]): boolean {
    let waiting = false;
    const now = this.clock.now();
    for (const seat of seats) {
      if (seat.held === undefined) continue;
      if (now - seat.heldAt >= EXIT_GRACE_MS) this.onHeldTimeout(seat);
      else waiting = true;
    }
    return !waiting;
  }

  /** The worker exited while running a request. */
  exited(seat: Seat, ex: Exchange): void {
    if (seat.held !== undefined) this.hooks.endRequest(seat, ex, seat.held);
    // The endpoint has not noticed yet. Its own report says best whether the request
    // reached the application (a dead process's sockets close at once); closing it
    // ourselves after the grace would have to guess.
    else seat.exitTimer = this.clock.setTimer(() => this.onExitGrace(seat), EXIT_GRACE_MS);
  }

  /** The worker's request is over: drops its held failure and exit grace. */
  clear(seat: Seat): void {
    seat.held = undefined;
    if (seat.exitTimer !== undefined) {
      this.clock.clearTimer(seat.exitTimer);
      seat.exitTimer = undefined;
    }
  }

  /**
   * The worker died while running `ex`. Undefined: `ex` never reached the application
   * and was rewound, the pool puts it first in the queue. Otherwise the error to answer.
   */
  lost(seat: Seat, ex: Exchange, o: FailedOutcome, exit: WorkerExit): ProxyError | undefined {
    // A worker that exits cleanly by itself (php-cgi after PHP_FCGI_MAX_REQUESTS) does so
    // between requests: retry.ts takes that as proof (cleanExit). A crash is different:
    // the endpoint's "retryable" may follow its replay of a request that the application
    // did run (and crashed on) on the kept-alive connection, so the request is not given
    // to another worker: a crashing page must not run twice.
    const cleanSelfExit = exit.code === 0 && exit.signal === null && exit.reason === undefined;
    if (cleanSelfExit && o.facts !== undefined && mayRetryElsewhere({ ...o.facts, cleanExit: true }).retry && ex.rewind()) {
      // It never reached the application: another worker takes it, first in line.
      seat.log.info({ exchange: ex.id, code: exit.code, signal: exit.signal }, 'worker went away before taking the request; giving it to another worker');
      return undefined;
    }
    if (seat.slot.mem?.oomKilled === true) {
      return new ProxyError(ErrorCodes.WORKER_OOM_KILLED, 503, `worker ${seat.pid ?? '?'} of pool ${this.pool} was killed by the kernel's OOM killer while serving ${scriptOf(ex)}`);
    }
    return new ProxyError(
      ErrorCodes.WORKER_CRASHED,
      502,
      `worker ${seat.pid ?? '?'} of pool ${this.pool} ${exitText(exit)} while serving ${scriptOf(ex)}`,
    );
  }

  private onHeldTimeout(seat: Seat): void {
    const o = seat.held;
    const ex = seat.current;
    seat.held = undefined;
    if (o === undefined || ex === undefined) return;
    if (!o.retryable) {
      this.hooks.endRequest(seat, ex, o);
      return;
    }
    // Alive but unreachable: it cannot serve. The request goes to another worker.
    seat.log.warn({ code: o.error.code }, `worker is alive but unreachable (${o.error.message}); replacing it`);
    this.hooks.replace(seat, ex, o.error);
  }

  private onExitGrace(seat: Seat): void {
    seat.exitTimer = undefined;
    const ex = seat.current;
    if (ex === undefined) return;
    seat.slot.endpoint?.destroy(); // reports synchronously
    if (seat.current === ex) {
      this.hooks.endRequest(seat, ex, {
        kind: 'failed',
        error: new ProxyError(ErrorCodes.BACKEND_CLOSED, 502, 'worker exited'),
        retryable: false,
        backendDown: true,
        // The endpoint saw no response byte by now: only a clean exit makes it safe elsewhere.
        facts: { failure: 'closed', headSent: true, responseBytes: false, reused: false, reset: false, idempotent: false },
      });
    }
  }
}
