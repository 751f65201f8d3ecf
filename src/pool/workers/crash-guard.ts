/**
 * A spawned pool's answer to crashing workers: the restart back-off (exponential, never
 * sooner than a second after the crashed worker's start: exit-policy.ts), and the
 * `failing` state once crash_limit crashes fall within crash_window. While failing the
 * pool answers 503 at once; after a pause (growing with the crashes) one worker is tried
 * again, and its readiness ends the state.
 */
import { ErrorCodes, ProxyError } from '../../errors.js';
import type { Logger } from '../../log/log.js';
import { backoffDelay, BACKOFF_MAX_MS, CrashWindow } from '../../worker/exit-policy.js';
import { OneTimer, type Clock } from '../../util/clock.js';

/** Shortest pause before a failing pool tries a worker again. */
export const MIN_FAILING_PAUSE_MS = 1000;

export class CrashGuard {
  private readonly window: CrashWindow;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly pool: string;
  private readonly timer: OneTimer;
  private readonly onProbe: () => void;
  failing = false;
  /** A probe worker is starting. */
  probing = false;
  /** Monotonic ms before which no worker may be spawned. */
  respawnAt = 0;
  private since = 0;
  private probeAt = 0;

  constructor(pool: string, limit: number, windowMs: number, clock: Clock, log: Logger, onProbe: () => void) {
    this.pool = pool;
    this.window = new CrashWindow(limit, windowMs);
    this.clock = clock;
    this.log = log;
    this.onProbe = onProbe;
    this.timer = new OneTimer(clock, () => this.probeAgain());
  }

  /** Starts the next probe worker now (the pause is over, or the last probe was killed from outside). */
  probeAgain(): void {
    if (!this.failing || this.probing) return;
    this.timer.cancel();
    this.probing = true;
    this.log.info({ failingMs: Math.round(this.clock.now() - this.since) }, `pool ${this.pool}: trying one worker again`);
    this.onProbe();
  }

  /** Crashes within the window now. */
  get recent(): number {
    return this.window.count(this.clock.now());
  }

  /**
   * Records a crash of a worker started at `spawnedAt`. True when it made the pool
   * failing (the caller then answers the queue with `error()`).
   */
  crashed(spawnedAt: number, wasProbe: boolean, why: string, queued: number): boolean {
    const now = this.clock.now();
    this.window.record(now);
    if (this.failing) {
      if (wasProbe) {
        this.probing = false;
        const pause = this.schedule(now);
        this.log.warn({ code: ErrorCodes.POOL_FAILING, pauseMs: pause, crashes: this.window.count(now) }, `pool ${this.pool} still failing (${why}); next try in ${pause} ms`);
      }
      return false;
    }
    if (this.window.failing(now)) {
      this.failing = true;
      this.since = now;
      const n = this.window.count(now);
      const pause = this.schedule(now);
      this.log.error(
        { code: ErrorCodes.POOL_FAILING, crashes: n, crashWindow: this.window.windowMs, crashLimit: this.window.limit, pauseMs: pause, queued, last: why },
        `pool ${this.pool} is failing: ${n} crashes within ${this.window.windowMs} ms (crash_limit ${this.window.limit}); answering 503 until a worker starts again, next try in ${pause} ms`,
      );
      return true;
    }
    this.respawnAt = Math.max(this.respawnAt, now + this.window.delay(now, spawnedAt));
    return false;
  }

  /** A probe went away without crashing (stopped for shutdown). */
  probeGone(): void {
    this.probing = false;
  }

  /** A worker became ready: a failing pool recovers. */
  ready(pid: number | undefined): void {
    if (!this.failing) return;
    this.failing = false;
    this.probing = false;
    this.timer.cancel();
    this.window.clear();
    this.respawnAt = 0;
    this.log.info({ pid, failingMs: Math.round(this.clock.now() - this.since) }, `pool ${this.pool} recovered: worker ${pid} started`);
  }

  /** The 503 a failing pool answers with; Retry-After is the time to the next try. */
  error(detail: string | undefined): ProxyError {
    const wait = Math.max(1, Math.ceil((this.probeAt - this.clock.now()) / 1000));
    const why = detail !== undefined ? `: ${detail}` : '';
    return new ProxyError(ErrorCodes.POOL_FAILING, 503, `pool ${this.pool} is failing (workers keep crashing${why})`, wait);
  }

  dispose(): void {
    this.timer.cancel();
  }

  private schedule(now: number): number {
    const pause = Math.min(BACKOFF_MAX_MS, Math.max(MIN_FAILING_PAUSE_MS, backoffDelay(this.window.count(now))));
    this.probeAt = now + pause;
    this.timer.armAt(this.probeAt);
    return pause;
  }
}
