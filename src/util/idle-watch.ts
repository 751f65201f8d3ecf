/**
 * Inactivity timeouts without a timer re-armed on every read and write. Node's
 * socket.setTimeout refreshes its timer on each (`_unrefTimer`: a timer list's remove
 * and insert, some 7 calls, four times a proxied request); here an item only stamps
 * `activeAt` on its I/O (turnNow: the time read once a turn), and one DeadlineList of
 * the items that share a timeout, its timer armed for the earliest, reads the stamp
 * when an entry falls due: active since, the entry goes back in at activeAt + timeout;
 * else the item is idle. Exact, as Node's timer: idle timeoutMs after its last stamp.
 */
import type { Clock } from './clock.js';
import { DeadlineList, DeadlineNode } from './deadline-list.js';

/** What a watched item keeps: the monotonic ms of its last I/O. */
export interface Stamped {
  activeAt: number;
}

export class IdleWatch<T extends Stamped> {
  private readonly list: DeadlineList<T>;
  private readonly clock: Clock;
  readonly timeoutMs: number;

  /** `onIdle`: the item had no I/O for timeoutMs; it is no longer watched (watch it again to go on). */
  constructor(clock: Clock, timeoutMs: number, onIdle: (item: T) => void) {
    this.clock = clock;
    this.timeoutMs = timeoutMs;
    this.list = new DeadlineList<T>(clock, timeoutMs, (item, node) => {
      const due = item.activeAt + timeoutMs;
      if (due > clock.now()) this.list.insertAt(node, due);
      else onIdle(item);
    });
  }

  /** Watches `node`'s item from now (its stamp too), on this watch only. */
  watch(node: DeadlineNode<T>): void {
    node.item.activeAt = this.clock.now();
    this.list.push(node);
  }

  /** Stops watching (nothing if it was not watched here). */
  stop(node: DeadlineNode<T>): void {
    this.list.remove(node);
  }

  watching(node: DeadlineNode<T>): boolean {
    return node.list === this.list;
  }

  get length(): number {
    return this.list.length;
  }
}

export { DeadlineNode };
