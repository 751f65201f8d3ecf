/**
 * After an exit: whether a signal came from outside, and how soon to try again. Pure
 * (clock passed in). What an exit means is judged at burial (src/pool/workers/exit-verdict.ts);
 * only an early crash, something the application did to itself, is a sign of a crash
 * loop: those back off exponentially like runit, never sooner than a second after the
 * last start, and make the pool `failing` when crash_limit of them fall in crash_window.
 */
import type { RetireReason } from './types.js';

/**
 * The signals that end a process from outside: an operator's kill or kill -9, the OOM
 * killer, a supervisor above us. A program does not raise these on itself when it fails;
 * SEGV, ABRT, BUS, ILL, FPE and the rest are its own doing.
 */
const OUTSIDE_SIGNALS: ReadonlySet<string> = new Set(['SIGKILL', 'SIGTERM']);

/** An end by a signal fcgi-pm did not send (no retire reason) that is not the program's own doing. */
export function isOutsideKill(signal: NodeJS.Signals | null, reason: RetireReason | undefined): boolean {
  return reason === undefined && signal !== null && OUTSIDE_SIGNALS.has(signal);
}

export const BACKOFF_MIN_MS = 100;
export const BACKOFF_MAX_MS = 30_000;
/** runit: no restart sooner than this after the last start of a crashing worker. */
export const MIN_RESTART_INTERVAL_MS = 1000;

/** 0 without crashes; then 100 ms doubling per recent crash, capped at 30 s. */
export function backoffDelay(recentCrashes: number): number {
  if (recentCrashes <= 0) return 0;
  if (recentCrashes > 20) return BACKOFF_MAX_MS;
  return Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** (recentCrashes - 1));
}

/** Milliseconds to wait before spawning a replacement. `lastStartAt`: when the crashed worker started. */
export function restartDelay(recentCrashes: number, now: number, lastStartAt: number): number {
  if (recentCrashes <= 0) return 0;
  return Math.max(backoffDelay(recentCrashes), lastStartAt + MIN_RESTART_INTERVAL_MS - now, 0);
}

/**
 * Ring of recent crash times for one pool. `limit` ≤ 0 disables `failing`.
 * Times are whatever clock the caller uses (monotonic ms recommended).
 */
export class CrashWindow {
  readonly limit: number;
  readonly windowMs: number;
  private readonly ring: number[];
  private head = 0; // next slot to write
  private size = 0;

  constructor(limit: number, windowMs: number) {
    this.limit = limit;
    this.windowMs = windowMs;
    // Enough for the failing test and for the back-off exponent to reach its cap.
    this.ring = new Array<number>(Math.max(limit, 16)).fill(0);
  }

  record(now: number): void {
    this.ring[this.head] = now;
    this.head = (this.head + 1) % this.ring.length;
    if (this.size < this.ring.length) this.size++;
  }

  /** Crashes within the window ending at `now`. */
  count(now: number): number {
    const cutoff = now - this.windowMs;
    const cap = this.ring.length;
    let n = 0;
    for (let i = 1; i <= this.size; i++) {
      const t = this.ring[(this.head - i + cap) % cap]!;
      if (t <= cutoff) break; // older ones are older still
      n++;
    }
    return n;
  }

  failing(now: number): boolean {
    return this.limit > 0 && this.count(now) >= this.limit;
  }

  /** When to respawn after a crash of a worker started at `lastStartAt`. */
  delay(now: number, lastStartAt: number): number {
    return restartDelay(this.count(now), now, lastStartAt);
  }

  /** Most recent crash time, if any. */
  get last(): number | undefined {
    return this.size === 0 ? undefined : this.ring[(this.head - 1 + this.ring.length) % this.ring.length];
  }

  clear(): void {
    this.size = 0;
    this.head = 0;
  }
}
