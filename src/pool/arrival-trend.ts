/**
 * Whether a pool's queue is growing (requests arrive faster than the pool completes them)
 * or merely standing. A closed loop (each client waits for its answer before it asks
 * again) can keep a long queue standing, but its arrivals never outrun its completions:
 * that is load, not overload, and it is served. An open loop beyond capacity (new
 * clients faster than the workers finish) makes the queue grow without bound: that is
 * the overload to refuse early.
 *
 * Arrivals (every request offered to the pool, refused ones too) and completions (every
 * request that left the pool answered: served, failed, timed out in the queue, or whose
 * client went away; not a refusal, so that an overload being refused stays seen) are
 * counted in sub-windows of five mean service times (at least 50 ms), so that a
 * sub-window at capacity holds about five completions per seat. A sub-window shows growth
 * when its arrivals exceed its completions by more than a fifth (and at least one). The
 * queue is growing when at least 3 of the last 4 whole sub-windows show growth:
 * - a burst (many requests at once, then no more than the workers finish) fills at most
 *   2 sub-windows, so it is queued whole;
 * - in a closed loop the requests in the system only move between waiting and the few
 *   clients between an answer and their next request (at most one per seat), so
 *   completions and arrivals cannot part by a fifth in 3 sub-windows of 4;
 * - an open loop at 1.25× capacity or more shows growth in every sub-window.
 * A slighter overload is bounded by queue_timeout alone.
 *
 * Pure: times are passed in; no timers. The counts rotate lazily when asked.
 */

/** Sub-windows of history the verdict reads. */
const HISTORY = 4;
/** Of those, how many must show growth. */
const GROWING_IN = 3;
/** A sub-window spans this many mean service times... */
const SERVICE_TIMES_PER_WINDOW = 5;
/** ...and at least this long, ms. */
const MIN_WINDOW_MS = 50;

export class ArrivalTrend {
  private arrivals = 0;
  private completions = 0;
  private windowStart = -Infinity;
  /** Ring of the last HISTORY whole sub-windows: 1 = showed growth. */
  private readonly grew = new Uint8Array(HISTORY);
  private next = 0;

  /** A request was offered to the pool (whatever became of it). */
  arrival(): void {
    this.arrivals++;
  }

  /** A request left the pool answered, at `now`; `serviceMs` is the pool's mean service time. */
  completion(now: number, serviceMs: number): void {
    this.rotate(now, serviceMs);
    this.completions++;
  }

  /** True when arrivals have outrun completions in GROWING_IN of the last HISTORY sub-windows. */
  growing(now: number, serviceMs: number): boolean {
    this.rotate(now, serviceMs);
    let n = 0;
    for (let i = 0; i < HISTORY; i++) n += this.grew[i]!;
    return n >= GROWING_IN;
  }

  private rotate(now: number, serviceMs: number): void {
    const span = Math.max(MIN_WINDOW_MS, SERVICE_TIMES_PER_WINDOW * serviceMs);
    if (now - this.windowStart < span) return;
    if (this.windowStart !== -Infinity) {
      const c = this.completions;
      this.push(this.arrivals > c + Math.max(1, c / 5) ? 1 : 0);
      // Sub-windows that passed with nothing counted showed no growth.
      const idle = Math.min(HISTORY, Math.floor((now - this.windowStart) / span) - 1);
      for (let i = 0; i < idle; i++) this.push(0);
    }
    this.windowStart = now;
    this.arrivals = 0;
    this.completions = 0;
  }

  private push(v: number): void {
    this.grew[this.next] = v;
    this.next = (this.next + 1) % HISTORY;
  }
}
