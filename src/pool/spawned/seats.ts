/**
 * A spawned pool's request places (`Seat`): one per worker, or k for a php-cgi group
 * (group_size k), each running one request on its own connection of the worker's
 * endpoint. A seat's state is a cell of seat-table.ts. The Dispatcher makes them
 * (SupervisorHooks.seats) and is their only writer, through that table; the Supervisor,
 * the memory part and the snapshot read them as `SeatView` (slot.ts).
 */
import type { Logger } from '../../log/log.js';
import type { Exchange } from '../../protocol/exchange.js';
import type { FailedOutcome } from '../../upstream/failures.js';
import type { UpstreamOutcome } from '../../upstream/types.js';
import { RequestNodes } from './request-timer.js';
import type { SeatState } from './seat-table.js';
import type { SeatView, SlotView } from '../workers/slot.js';

/** One request place on a worker. */
export class Seat implements SeatView {
  readonly slot: SlotView;
  readonly timerNodes: RequestNodes<Seat>;
  /** The endpoint's callback, made once per seat rather than per request. */
  readonly done: (o: UpstreamOutcome) => void;
  state: SeatState = 'closed';
  idleSince = 0;
  current: Exchange | undefined;
  busySince = 0;
  /** `held`: the failure waiting for the worker's exit, and since when. */
  held: FailedOutcome | undefined;
  heldAt = 0;
  /** `ending`: the wait for the endpoint's report after the worker exited under the request. */
  exitTimer: unknown;

  constructor(slot: SlotView, onOutcome: (seat: Seat, o: UpstreamOutcome) => void) {
    this.slot = slot;
    this.timerNodes = new RequestNodes<Seat>(this);
    this.done = (o) => onOutcome(this, o);
  }

  get inIdle(): boolean {
    return this.state === 'free';
  }

  get busy(): boolean {
    return this.current !== undefined;
  }

  get log(): Logger {
    return this.slot.log;
  }

  get pid(): number | undefined {
    return this.slot.pid;
  }
}
