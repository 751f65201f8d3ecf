/**
 * The bounded FIFO of requests waiting for a backend or worker (queue_limit,
 * queue_timeout). One timer for the whole queue: entries share one timeout, so the
 * head always expires first. A client that goes away while queued leaves the queue.
 */
import type { Exchange } from '../protocol/exchange.js';
import type { Clock } from '../util/clock.js';
import { DeadlineList, DeadlineNode } from '../util/deadline-list.js';

class QueueEntry extends DeadlineNode<Exchange> {
  readonly onAbort: () => void;
  constructor(ex: Exchange, queue: RequestQueue) {
    super(ex);
    this.onAbort = () => queue.removeAborted(this);
  }
}

export interface QueueEvents {
  /** The request waited queue_timeout; it is out of the queue, not yet answered. */
  timeout(ex: Exchange, waitedMs: number): void;
  /** The client went away while queued; it is out of the queue. */
  aborted(ex: Exchange): void;
}

export class RequestQueue {
  readonly limit: number;
  private readonly list: DeadlineList<Exchange>;
  private readonly events: QueueEvents;
  private readonly clock: Clock;
  /** High-water mark, for status. */
  maxLength = 0;
  /** Requests that left the queue for a target, and how long they waited (status). */
  private waitCount = 0;
  private waitTotalMs = 0;
  private waitMaxMs = 0;

  constructor(clock: Clock, limit: number, timeoutMs: number, events: QueueEvents) {
    this.clock = clock;
    this.limit = limit;
    this.events = events;
    this.list = new DeadlineList(clock, timeoutMs, (ex, node) => {
      ex.onAbort = undefined;
      events.timeout(ex, clock.now() - (node as QueueEntry).addedAt);
    });
  }

  get length(): number {
    return this.list.length;
  }

  get timeoutMs(): number {
    return this.list.timeoutMs;
  }

  /**
   * Appends; false (and nothing queued) when the queue is at queue_limit. `reserved`:
   * requests at the head that a starting worker will take, not counted against the limit.
   */
  push(ex: Exchange, reserved = 0): boolean {
    if (this.list.length >= this.limit + reserved) return false;
    this.link(ex, false);
    return true;
  }

  /** Puts a request back at the head, past the limit: it was accepted once already. */
  unshift(ex: Exchange): void {
    this.link(ex, true);
  }

  /** Takes the oldest request; its onAbort is cleared (the new holder sets its own). */
  shift(): Exchange | undefined {
    const n = this.list.shift();
    if (!n) return undefined;
    n.item.onAbort = undefined;
    const waited = this.clock.now() - n.addedAt;
    n.item.queuedMs += waited;
    this.waitCount++;
    this.waitTotalMs += waited;
    if (waited > this.waitMaxMs) this.waitMaxMs = waited;
    return n.item;
  }

  /** Waits of requests taken from the queue so far (undefined before the first). */
  waits(): { count: number; totalMs: number; maxMs: number } | undefined {
    return this.waitCount === 0 ? undefined : { count: this.waitCount, totalMs: Math.round(this.waitTotalMs * 1000) / 1000, maxMs: Math.round(this.waitMaxMs * 1000) / 1000 };
  }

  /** Milliseconds the head has waited, 0 when empty. */
  headWait(): number {
    const h = this.list.first;
    return h ? this.clock.now() - h.addedAt : 0;
  }

  /** Empties the queue (oldest first) and stops its timer. */
  drain(): Exchange[] {
    const out = this.list.clear();
    for (const ex of out) ex.onAbort = undefined;
    return out;
  }

  dispose(): void {
    this.list.dispose();
  }

  /** @internal */
  removeAborted(entry: QueueEntry): void {
    if (entry.list === null) return;
    this.list.remove(entry);
    this.events.aborted(entry.item);
  }

  private link(ex: Exchange, front: boolean): void {
    const entry = new QueueEntry(ex, this);
    ex.onAbort = entry.onAbort;
    if (front) this.list.unshift(entry);
    else this.list.push(entry);
    if (this.list.length > this.maxLength) this.maxLength = this.list.length;
  }
}
