/**
 * The bounded FIFO of requests waiting for a backend or worker (queue_limit,
 * queue_max_wait, queue_timeout). One timer for the whole queue: entries share one timeout, so the
 * head always expires first. A client that goes away while queued leaves the queue. A
 * request is refused at admission, not after waiting, whenever its wait can be told
 * beforehand to pass a bound (docs/overload.md).
 */
import type { Exchange } from '../protocol/exchange.js';
import type { Clock } from '../util/clock.js';
import { DeadlineList, DeadlineNode } from '../util/deadline-list.js';
import { ArrivalTrend } from './arrival-trend.js';

class QueueEntry extends DeadlineNode<Exchange> {
  readonly onAbort: () => void;
  /** Requests waiting ahead of it when it was queued: at the head, they left in the time it waited. */
  ahead = 0;
  constructor(ex: Exchange, queue: RequestQueue) {
    super(ex);
    this.onAbort = () => queue.removeAborted(this);
  }
}

/**
 * Why push() refused: `limit` queue_limit; `growing` the queue grows and more would wait
 * past queue_max_wait; `late` it would wait past queue_timeout whatever the trend.
 */
export type QueueRefusal = 'limit' | 'growing' | 'late';

export interface QueueEvents {
  /** The request waited queue_timeout; it is out of the queue, not yet answered. */
  timeout(ex: Exchange, waitedMs: number): void;
  /** The client went away while queued; it is out of the queue. */
  aborted(ex: Exchange): void;
  /** Refused from the tail: the queue grew past what the pool serves within queue_max_wait. It is out of the queue, not yet answered. */
  shed(ex: Exchange): void;
  /** Seats of the workers being started, and how long (ms) a request one of them will take may wait for it (spawn_timeout); undefined when none starts. */
  spawning?(): { seats: number; waitMs: number } | undefined;
}

/** Weight of a new service time in the pool's running mean (1/16: the mean follows a change within tens of requests). */
const SERVICE_EWMA = 1 / 16;
/**
 * A growing queue holding more than its bound by this fraction sheds its newest requests
 * down to the bound: they would wait past queue_max_wait, and the bound moves with the
 * measured rate, so a little room keeps it from shedding on every wobble.
 */
const SHED_MARGIN = 1 / 4;
/**
 * Only requests that have waited less than this share of queue_max_wait are shed from the
 * tail, so a 503 comes within it of its request or not at all; older ones are served. Half:
 * 150 ms by default, the three shortest sub-windows an overload takes to be seen (the
 * trend's surge), so that what queued meanwhile can be shed. An overload's own work
 * starves the workers as it begins (their rate fell to a sixth, then a twenty-fifth, in a
 * loaded machine's 2×): what queued then and is kept waits its bound at the fallen rate.
 */
const SHED_FRESH_SHARE = 1 / 2;

export class RequestQueue {
  /** queue_limit: the most requests that ever wait. */
  readonly limit: number;
  /**
   * queue_max_wait, ms: while the queue is growing (arrivals outrun completions), a request
   * waits only while the requests ahead of it can be served within it (0 = off). Judged at
   * admission, so a request refused gets its 503 at once. A standing queue is not bounded by it.
   */
  private readonly maxWaitMs: number;
  /** Requests served at once (max_children × requests per worker); 0 = unknown, no wait-based limit. */
  private seats = 0;
  /** Running mean of the pool's service times, ms; 0 before the first. */
  private serviceMs = 0;
  private readonly trend = new ArrivalTrend();
  private readonly list: DeadlineList<Exchange>;
  private readonly events: QueueEvents;
  private readonly clock: Clock;
  /** High-water mark, for status. */
  maxLength = 0;
  /** Requests that left the queue for a target, and how long they waited (status). */
  private waitCount = 0;
  private waitTotalMs = 0;
  private waitMaxMs = 0;

  constructor(clock: Clock, limit: number, timeoutMs: number, events: QueueEvents, maxWaitMs = 0) {
    this.clock = clock;
    this.limit = limit;
    this.maxWaitMs = maxWaitMs;
    this.events = events;
    this.list = new DeadlineList(
      clock,
      timeoutMs,
      (ex, node) => {
        ex.onAbort = undefined;
        events.timeout(ex, clock.now() - node.addedAt);
      },
      (_ex, node, ahead) => this.spawnWait(node.addedAt, ahead),
    );
  }

  get length(): number {
    return this.list.length;
  }

  /**
   * A request queue_timeout would end, that a worker being started will take (one of the
   * first as many as those workers have seats), waits on for it up to spawn_timeout from
   * its arrival: a cold start (Django importing its application on a busy machine) may
   * take longer than queue_timeout, and the worker is killed at spawn_timeout anyway.
   */
  private spawnWait(addedAt: number, ahead: number): number | undefined {
    const s = this.events.spawning?.();
    return s === undefined || ahead >= s.seats ? undefined : addedAt + s.waitMs;
  }

  get timeoutMs(): number {
    return this.list.timeoutMs;
  }

  /** How many requests the pool serves at once; with a service time, this bounds the queue by queue_max_wait. */
  setSeats(n: number): void {
    this.seats = n;
  }

  /** A request was offered to the pool (started at once, queued or refused): the arrival rate; `scaling`: workers are starting. */
  arrival(scaling: boolean): void {
    this.trend.arrival(scaling, this.clock.now());
  }

  /** A request ran to its end in `ms` (from its start on a worker): the mean the wait is judged by. */
  served(ms: number): void {
    this.serviceMs = this.serviceMs === 0 ? ms : this.serviceMs + (ms - this.serviceMs) * SERVICE_EWMA;
  }

  /**
   * A request left the pool answered (served, failed, its client gone, or timed out
   * waiting), not refused: the completion rate arrivals are judged against. A client
   * answered 502 by a dying worker comes back like one that was served.
   */
  departed(): void {
    this.trend.completion(this.clock.now(), this.serviceMs, this.list.length > 0);
  }

  /**
   * As many requests as the pool serves within queue_max_wait (at least 2 per seat, so slow
   * pages still queue a few), at most queue_limit; queue_limit when there is no such bound
   * (off, or no service time yet). The rate is the slowest measured in the last sub-windows
   * (read while the queue grows, the pool is saturated, so it is what the pool really
   * drains, the time between two requests on a worker and a machine short of CPU
   * included; the slowest, because a request queued now is served at the rates to come,
   * and on a busy machine they swing); the seats over the mean service time before
   * enough completions are counted.
   */
  get waitLimit(): number {
    if (this.maxWaitMs <= 0 || this.seats <= 0 || this.serviceMs <= 0) return this.limit;
    return Math.min(this.limit, Math.max(2 * this.seats, Math.floor(this.maxWaitMs * this.drainPerMs())));
  }

  /**
   * Requests a ms the queue drains: the slowest rate of the last sub-windows (the
   * seats over the mean service time before enough completions are counted), and no
   * faster than the head saw: while it waits, fewer seats freed than the requests that
   * were ahead of it when it came and one more (it would have been taken). The head's wait
   * follows a fall of the rate (workers stuck, a machine short of CPU) as it happens, the
   * sub-windows only once they are counted; and before they count enough completions it
   * is the only measure: an overload's own work can starve the workers as it begins (on a
   * loaded machine at 2×, not one finished in its first 150 ms), where the mean service
   * time promised the warm pool's rate and let 166 requests queue for 3 s.
   */
  private drainPerMs(): number {
    const now = this.clock.now();
    const measured = this.trend.slowestRate(now, this.serviceMs, this.seats);
    const perMs = measured > 0 ? measured : this.seats / this.serviceMs;
    const head = this.list.first as QueueEntry | null;
    if (head === null) return perMs;
    const waited = now - head.addedAt;
    return waited > 0 ? Math.min(perMs, (head.ahead + 1) / waited) : perMs;
  }

  /**
   * A request queued behind `waiting` others starts once they and one more have ended
   * (a seat frees for each). When that would take longer than queue_timeout even at the
   * fastest the pool has drained (or could: every seat at the mean service time), it
   * would get its 503 after waiting; it gets it now. Needs a service time.
   */
  private wouldTimeOut(waiting: number): boolean {
    if (this.list.timeoutMs <= 0 || this.serviceMs <= 0 || this.seats <= 0 || waiting < this.seats) return false;
    const fastest = Math.max(this.trend.drainRate(this.clock.now(), this.serviceMs, this.seats), this.seats / this.serviceMs);
    return (waiting + 1) / fastest > this.list.timeoutMs;
  }

  /**
   * The most requests that may wait now: queue_limit, or waitLimit while the queue grows
   * (ArrivalTrend: arrivals outrun completions, not a burst or a closed loop's standing
   * queue). An overload then gets fast 503s while the requests that do wait are served in
   * about queue_max_wait; a standing queue waits up to queue_timeout.
   */
  get effectiveLimit(): number {
    const byWait = this.waitLimit;
    if (byWait >= this.limit || !this.growing(byWait)) return this.limit;
    return byWait;
  }

  /** The trend's verdict; a growth once seen also holds while the queue is still half its bound (`bound`), so it ends only once the queue has drained. */
  private growing(bound: number): boolean {
    return this.trend.growing(this.clock.now(), this.serviceMs, 2 * this.list.length >= bound);
  }

  /** Mean service time the limit is judged by, ms (0 before the first request ended). */
  get meanServiceMs(): number {
    return this.serviceMs;
  }

  /**
   * Appends and returns undefined, or returns why not (nothing queued): queue_limit, the
   * bound of a growing queue (effectiveLimit), or a wait past queue_timeout.
   * `reserved`: requests at the head that a starting worker will take, not counted
   * against the limit.
   */
  push(ex: Exchange, reserved = 0): QueueRefusal | undefined {
    const waiting = this.list.length - reserved;
    if (waiting >= this.limit) return 'limit';
    // Past the smallest bound there can be, the growth verdict and then the bound are read.
    if (waiting >= 2 * this.seats && this.maxWaitMs > 0) {
      const bound = this.waitLimit;
      if (this.growing(bound) && waiting >= bound) {
        // What queued while the growth was being seen, or before the bound fell, would
        // be served late: the newest of it, come within half of queue_max_wait, refused now.
        if (waiting > bound * (1 + SHED_MARGIN)) this.shed(waiting - bound);
        return 'growing';
      }
    }
    if (this.wouldTimeOut(waiting)) return 'late';
    this.link(ex, false);
    return undefined;
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

  private shed(n: number): void {
    const since = this.clock.now() - this.maxWaitMs * SHED_FRESH_SHARE;
    for (let i = 0; i < n; i++) {
      const last = this.list.last;
      if (last === null || last.addedAt < since) return;
      this.list.remove(last);
      last.item.onAbort = undefined;
      this.events.shed(last.item);
    }
  }

  /** @internal */
  removeAborted(entry: QueueEntry): void {
    if (entry.list === null) return;
    this.list.remove(entry);
    this.events.aborted(entry.item);
  }

  private link(ex: Exchange, front: boolean): void {
    const entry = new QueueEntry(ex, this);
    if (!front) entry.ahead = this.list.length;
    ex.onAbort = entry.onAbort;
    if (front) this.list.unshift(entry);
    else this.list.push(entry);
    if (this.list.length > this.maxLength) this.maxLength = this.list.length;
  }
}
