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
 * Once seen, the growth holds while arrivals exceed completions in at least 2 of the last 4
 * sub-windows, or the queue still holds much of its bound (the caller says), and ends when
 * neither is so: an overload just past the pool's rate (1.1×) does not part by a fifth
 * every time, a loaded machine's front end that stalls for a sub-window lets the queue
 * drain, and at the bound arrivals meet completions; a verdict that came and went would
 * let the queue fill unseen past its bound for 3 sub-windows (its requests then waited past
 * queue_max_wait, or were refused after waiting). An overload that never parts by a fifth
 * in 3 sub-windows of 4 is bounded by queue_timeout alone.
 *
 * A sub-window without a single arrival while requests waited at every completion counts
 * neither way (its completions count for the rate): the front end stalled, as a loaded
 * machine's does, and an overload that reaches the pool in lumps with such gaps between
 * them is still seen. A burst's drain is such a sub-window until the queue empties, and the
 * sub-window that empties it counts. Its completions are not lost: the next sub-window that
 * counts judges its arrivals against all completions since the last one that counted, so a
 * closed loop whose clients come back together (rounds: all requests, then all again once
 * answered, the last answers and the next round in one sub-window) does not read as growth,
 * where a lump of an overload still brings more than was completed since the one before.
 *
 * An overload that outruns the pool by far is growing one sub-window sooner: when the last
 * whole sub-window surged (its arrivals more than twice its completions, and more than one,
 * in its first half and again in its second) and the one before grew. The work that comes
 * with such an overload (the front end accepting and the daemon queueing every request)
 * takes the CPU the workers need, so the pool's rate falls as it begins (to a third on a
 * quiet 2-core box at 2×), and each sub-window of waiting queued more than the pool then
 * serves within queue_max_wait. A closed loop whose clients come straight back does not
 * surge (over consecutive sub-windows its arrivals exceed its completions by at most the
 * clients that were between an answer and their next request), nor does a burst that comes
 * at once: one that reaches the pool across the border of two sub-windows comes in the
 * first moments of the second, not in its second half.
 *
 * The sub-windows' span follows the mean service time, except that it lengthens only from
 * a sub-window in which the pool was not saturated (no completion found requests waiting):
 * workers starved of CPU by an overload report longer service times, which would stretch
 * the sub-windows (from 50 to 400 ms on a loaded machine) and hold the verdict back for a
 * second while hundreds queued.
 *
 * A sub-window in which a request arrived while the pool was starting workers does not
 * begin a verdict: its completions lag because seats are not up yet, not because arrivals
 * outrun what the pool serves (a burst that reaches an ondemand pool over several
 * sub-windows on a busy machine, while the pool scales up, is queued whole). It still
 * holds a verdict already seen (a worker replaced under an overload does not end it).
 *
 * The same sub-windows give the rate at which the pool really drains its queue while it
 * is saturated (completions over the history's span, and the slowest of them): what a
 * wait is predicted from.
 *
 * Pure: times are passed in; no timers. The counts rotate lazily when asked.
 */

/** Sub-windows of history the verdict reads. */
const HISTORY = 4;
/** Of those, how many must show growth. */
const GROWING_IN = 3;
/** A growth seen holds while this many of them outran. */
const HELD_IN = 2;
/** A sub-window spans this many mean service times... */
const SERVICE_TIMES_PER_WINDOW = 5;
/** ...and at least this long, ms. */
const MIN_WINDOW_MS = 50;
/** A sub-window's arrivals exceeded its completions by more than a fifth... */
const GREW = 2;
/** ...or by anything at all. */
const OUTRAN = 1;
/** Flag on a sub-window's value: the pool was starting workers during it. */
const SCALING = 4;
/** Flag on a sub-window's value: its arrivals were more than twice its completions, and more than one, in both its halves (it also GREW). */
const SURGED = 8;

export class ArrivalTrend {
  private arrivals = 0;
  private completions = 0;
  /** Of the open sub-window's arrivals and completions, those of its second half. */
  private lateArrivals = 0;
  private lateCompletions = 0;
  /** Completions of the silent sub-windows since the last one that counted for the verdict. */
  private carried = 0;
  private windowStart = -Infinity;
  /** The sub-windows' span, ms: 0 until the first is opened (see rotate). */
  private spanMs = 0;
  /** The open sub-window saw an arrival while the pool was starting workers. */
  private scaling = false;
  /** Every completion of the open sub-window found requests waiting. */
  private waitedThroughout = true;
  /** A completion of the open sub-window found requests waiting. */
  private waitedOnce = false;
  /** Ring of the last HISTORY whole sub-windows that had an arrival or emptied the queue: GREW (maybe SURGED), OUTRAN or 0, flagged SCALING. */
  private readonly grew = new Uint8Array(HISTORY);
  private nextGrew = 0;
  /** Ring of the last HISTORY whole sub-windows: their completions... */
  private readonly done = new Float64Array(HISTORY);
  /** ...and how long each lasted, ms. */
  private readonly spans = new Float64Array(HISTORY);
  private next = 0;
  /** The verdict: GROWING_IN of the last HISTORY sub-windows grew, or a surge (surging); held while HELD_IN still outran, or the queue is long. */
  private seen = false;

  /** A request was offered to the pool (whatever became of it), at `now` when known; `scaling`: the pool is starting workers. */
  arrival(scaling = false, now = -Infinity): void {
    this.arrivals++;
    if (this.late(now)) this.lateArrivals++;
    if (scaling) this.scaling = true;
  }

  /** `now` lies in the second half of the open sub-window. */
  private late(now: number): boolean {
    return now - this.windowStart >= this.spanMs / 2;
  }

  /** A request left the pool answered, at `now`; `serviceMs` is the pool's mean service time; `waiting`: requests were queued. */
  completion(now: number, serviceMs: number, waiting = false): void {
    this.rotate(now, serviceMs);
    this.completions++;
    if (this.late(now)) this.lateCompletions++;
    if (!waiting) this.waitedThroughout = false;
    else this.waitedOnce = true;
  }

  /**
   * True when the queue is growing (see the class comment). `long`: the queue still holds
   * much of what it may while growing; a growth already seen then holds too, so it ends
   * once the queue has drained, not when arrivals and completions meet at the bound.
   */
  growing(now: number, serviceMs: number, long = false): boolean {
    this.rotate(now, serviceMs);
    let grew = 0;
    let outran = 0;
    for (let i = 0; i < HISTORY; i++) {
      const g = this.grew[i]!;
      if ((g & ~SURGED) === GREW) grew++;
      if ((g & ~SCALING) !== 0) outran++;
    }
    this.seen = this.seen ? outran >= HELD_IN || long : grew >= GROWING_IN || this.surging();
    return this.seen;
  }

  /** The last sub-window that counts for the verdict surged and the one before grew, neither while workers started. */
  private surging(): boolean {
    const last = this.grew[(this.nextGrew - 1 + HISTORY) % HISTORY]!;
    const before = this.grew[(this.nextGrew - 2 + HISTORY) % HISTORY]!;
    return last === (GREW | SURGED) && (before & ~SURGED) === GREW;
  }

  /**
   * Completions per ms over the last HISTORY whole sub-windows, or 0 when they hold fewer
   * than `atLeast` (too few to judge a rate by).
   */
  drainRate(now: number, serviceMs: number, atLeast: number): number {
    this.rotate(now, serviceMs);
    let done = 0;
    let span = 0;
    for (let i = 0; i < HISTORY; i++) {
      done += this.done[i]!;
      span += this.spans[i]!;
    }
    return done < atLeast || span <= 0 ? 0 : done / span;
  }

  /**
   * The slowest rate of the last HISTORY whole sub-windows that saw a completion,
   * completions per ms (0 as for drainRate): what a request queued now can count on while
   * the rate swings between sub-windows (a machine short of CPU), where their mean would
   * promise more. One without a completion (idle, or a stall of the daemon's loop) says
   * nothing of the rate; workers that stop finishing show in the head's wait (RequestQueue).
   */
  slowestRate(now: number, serviceMs: number, atLeast: number): number {
    if (this.drainRate(now, serviceMs, atLeast) === 0) return 0;
    let slowest = Infinity;
    for (let i = 0; i < HISTORY; i++) {
      const done = this.done[i]!;
      if (done > 0) slowest = Math.min(slowest, done / this.spans[i]!);
    }
    return slowest;
  }

  private rotate(now: number, serviceMs: number): void {
    const wanted = Math.max(MIN_WINDOW_MS, SERVICE_TIMES_PER_WINDOW * serviceMs);
    // Shorter at once; longer only after a sub-window in which the pool was not saturated (below).
    if (this.spanMs === 0 || wanted < this.spanMs) this.spanMs = wanted;
    const span = this.spanMs;
    if (now - this.windowStart < span) return;
    if (this.windowStart !== -Infinity) {
      const c = this.completions;
      const a = this.arrivals;
      const elapsed = now - this.windowStart;
      // Whole sub-windows that passed with nothing counted. Fewer than the history's are
      // more likely a stall of the daemon's own loop (a busy machine, a GC) than idleness:
      // the requests of that time wait in the kernel and are counted after it, so the
      // time joins the sub-window that was open. As many as the history holds: the pool
      // was idle, and the history starts afresh.
      const gaps = Math.floor(elapsed / span) - 1;
      const idle = gaps >= HISTORY ? HISTORY : 0;
      // Not one arrival while requests waited throughout: the front end stalled (a loaded
      // machine), which says nothing of whether arrivals outrun completions; it counts for
      // the rate only. A burst's drain is such a sub-window too, until the queue empties.
      const silent = a === 0 && c > 0 && this.waitedThroughout;
      // Arrivals are judged against every completion since the last sub-window that
      // counted, the silent ones' too: a closed loop whose clients come back together (a
      // round of requests, then the next once all are answered) brings back in one
      // sub-window what the pool completed over several.
      const since = c + this.carried;
      this.carried = silent && idle === 0 ? since : 0;
      const la = this.lateArrivals;
      const lc = this.lateCompletions;
      const surged = a - la > 2 * (c - lc) + 1 && la > 2 * lc + 1;
      const verdict = a > since + Math.max(1, since / 5) ? GREW | (surged ? SURGED : 0) : a > since ? OUTRAN : 0;
      this.push(silent ? -1 : verdict | (this.scaling ? SCALING : 0), c, idle > 0 ? span : elapsed);
      for (let i = 0; i < idle; i++) this.push(0, 0, span);
      // Saturated (a completion found requests waiting): the service times measured may be
      // the starved ones of an overload, and the span keeps its length.
      if (!this.waitedOnce || idle > 0) this.spanMs = wanted;
    }
    this.windowStart = now;
    this.arrivals = 0;
    this.completions = 0;
    this.lateArrivals = 0;
    this.lateCompletions = 0;
    this.scaling = false;
    this.waitedThroughout = true;
    this.waitedOnce = false;
  }

  /** `grew` -1: the sub-window counts for the rate, not for the verdict. */
  private push(grew: number, done: number, spanMs: number): void {
    if (grew >= 0) {
      this.grew[this.nextGrew] = grew;
      this.nextGrew = (this.nextGrew + 1) % HISTORY;
    }
    this.done[this.next] = done;
    this.spans[this.next] = spanMs;
    this.next = (this.next + 1) % HISTORY;
  }
}
