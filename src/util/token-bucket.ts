/**
 * Token bucket for log lines, so a noisy backend cannot flood the log. Exported for
 * reuse (the upstream limits FastCGI STDERR the same way). Pure apart from the clock,
 * which is injectable for tests.
 */

export interface RateLimitOptions {
  /** Tokens added per second. Default 20. */
  ratePerSec?: number;
  /** Bucket size: lines allowed in a burst. Default 100. */
  burst?: number;
  /** Monotonic milliseconds. Default performance.now. */
  now?: () => number;
}

const NOTHING_DROPPED: { suppressedSinceLastLine?: number } = Object.freeze({});

export class TokenBucket {
  readonly ratePerSec: number;
  readonly burst: number;
  private readonly now: () => number;
  private tokens: number;
  private at: number;
  private droppedSinceReport = 0;
  private droppedTotal = 0;

  constructor(opts: RateLimitOptions = {}) {
    this.ratePerSec = opts.ratePerSec ?? 20;
    this.burst = opts.burst ?? 100;
    this.now = opts.now ?? (() => performance.now());
    this.tokens = this.burst;
    this.at = this.now();
  }

  private refill(): void {
    const t = this.now();
    if (t > this.at) {
      this.tokens = Math.min(this.burst, this.tokens + ((t - this.at) * this.ratePerSec) / 1000);
      this.at = t;
    }
  }

  /** True if one more line may be logged now; otherwise counts it as dropped. */
  take(): boolean {
    this.refill();
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return true;
    }
    this.droppedSinceReport++;
    this.droppedTotal++;
    return false;
  }

  /** Lines dropped since the previous call (then zero). */
  takeDropped(): number {
    const n = this.droppedSinceReport;
    this.droppedSinceReport = 0;
    return n;
  }

  /**
   * For a line that itself says how many were left out before it: undefined when this one
   * is dropped too, else the fields to add to it (none when nothing was dropped).
   */
  lineFields(): { suppressedSinceLastLine?: number } | undefined {
    if (!this.take()) return undefined;
    const n = this.takeDropped();
    return n > 0 ? { suppressedSinceLastLine: n } : NOTHING_DROPPED;
  }

  get pendingDropped(): number {
    return this.droppedSinceReport;
  }

  get totalDropped(): number {
    return this.droppedTotal;
  }

  /** Milliseconds until a whole token is available (0 if one is). */
  msUntilToken(): number {
    this.refill();
    return this.tokens >= 1 ? 0 : Math.ceil(((1 - this.tokens) * 1000) / this.ratePerSec);
  }
}
