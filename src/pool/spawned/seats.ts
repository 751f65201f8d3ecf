/**
 * A spawned pool's request places (`Seat`): one per worker, or k for a php-cgi group
 * (group_size k), each running one request on its own connection of the worker's
 * endpoint. The Dispatcher makes them (SupervisorHooks.seats) and is the only writer;
 * the Supervisor, the memory part and the snapshot read them as `SeatView` (slot.ts).
 */
import type { Logger } from '../../log/log.js';
import type { Exchange } from '../../protocol/exchange.js';
import type { FailedOutcome } from '../../upstream/failures.js';
import type { UpstreamOutcome } from '../../upstream/types.js';
import { RequestNodes } from './request-timer.js';
import type { SeatView, SlotView } from './slot.js';

/** One request place on a worker. */
export class Seat implements SeatView {
  readonly slot: SlotView;
  readonly timerNodes: RequestNodes<Seat>;
  /** The endpoint's callback, made once per seat rather than per request. */
  readonly done: (o: UpstreamOutcome) => void;
  inIdle = false;
  idleSince = 0;
  current: Exchange | undefined;
  busySince = 0;
  /** A failure waiting for the exit event (the supervisor's hold: EXIT_GRACE_MS). */
  held: FailedOutcome | undefined;
  heldAt = 0;
  /** Waits for the endpoint's report after the worker exited under a request. */
  exitTimer: unknown;

  constructor(slot: SlotView, onOutcome: (seat: Seat, o: UpstreamOutcome) => void) {
    this.slot = slot;
    this.timerNodes = new RequestNodes<Seat>(this);
    this.done = (o) => onOutcome(this, o);
  }

  get log(): Logger {
    return this.slot.log;
  }

  get pid(): number | undefined {
    return this.slot.pid;
  }
}
