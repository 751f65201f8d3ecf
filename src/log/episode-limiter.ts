/**
 * One log line per episode of a repeated warning (a flood of refused requests or
 * connections), as PHP-FPM says "reached pm.max_children" once rather than per request.
 * The first occurrence of a key is logged at once; repeats are counted, and at the end
 * of each interval that saw repeats one summary line gives their number. An interval
 * without repeats ends the episode: the next occurrence is logged at once again.
 */

/** Timers as src/pool/clock.ts's Clock has them (a fake clock drives tests). */
export interface EpisodeTimers {
  setTimer(fn: () => void, ms: number): unknown;
  clearTimer(handle: unknown): void;
}

const unrefTimers: EpisodeTimers = {
  setTimer(fn, ms) {
    const t = setTimeout(fn, ms);
    t.unref();
    return t;
  },
  clearTimer: (h) => clearTimeout(h as NodeJS.Timeout),
};

export interface EpisodeLimiterOptions<K> {
  intervalMs: number;
  /** Logs `repeats` occurrences of `key` since its last line. */
  summary: (key: K, repeats: number) => void;
  timers?: EpisodeTimers;
}

export class EpisodeLimiter<K> {
  private readonly open = new Map<K, { repeats: number; timer: unknown }>();
  private readonly timers: EpisodeTimers;

  constructor(private readonly opts: EpisodeLimiterOptions<K>) {
    this.timers = opts.timers ?? unrefTimers;
  }

  /** Keys with an open episode (callers bound memory by it). */
  get size(): number {
    return this.open.size;
  }

  /** True: log this occurrence now. False: it is counted into the episode's next summary. */
  hit(key: K): boolean {
    const e = this.open.get(key);
    if (e !== undefined) {
      e.repeats++;
      return false;
    }
    this.open.set(key, { repeats: 0, timer: this.arm(key) });
    return true;
  }

  /** Ends every episode now, summarising what is counted (on stop). */
  flush(): void {
    for (const [key, e] of this.open) {
      this.timers.clearTimer(e.timer);
      if (e.repeats > 0) this.opts.summary(key, e.repeats);
    }
    this.open.clear();
  }

  private arm(key: K): unknown {
    return this.timers.setTimer(() => this.tick(key), this.opts.intervalMs);
  }

  private tick(key: K): void {
    const e = this.open.get(key);
    if (e === undefined) return;
    if (e.repeats === 0) {
      this.open.delete(key);
      return;
    }
    const n = e.repeats;
    e.repeats = 0;
    e.timer = this.arm(key);
    this.opts.summary(key, n);
  }
}
