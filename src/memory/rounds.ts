/**
 * Every pool's memory sampling round on one timer. A pool keeps its own
 * memory_sample_interval as the due time of its next round; the host holds one timer for
 * the earliest, and when it fires one pass runs every round then due, and after the pass
 * (its asynchronous reads settled) the host's budget check runs once. At 200 pools that
 * is one timer and one budget check per beat instead of 200 of each.
 */
import { OneTimer, type Clock } from '../util/clock.js';

/** A pool's sampling: one round; a promise when its reads are asynchronous. */
export interface RoundTaker {
  round(): Promise<void> | void;
}

/** What a pool asks of the host's rounds. */
export interface RoundSchedule {
  /** `t`'s next round at `at` (monotonic ms); replaces any it had. */
  schedule(t: RoundTaker, at: number): void;
  /** No round for `t` until it schedules again. */
  cancel(t: RoundTaker): void;
  /** Whether `t` has a round to come. */
  has(t: RoundTaker): boolean;
}

/**
 * A timer may fire a little before the time asked for (Node counts from its loop's cached
 * time): a round due this soon runs in this pass rather than in one more wake-up.
 */
const EARLY_MS = 5;

export class MemoryRounds implements RoundSchedule {
  private readonly due = new Map<RoundTaker, number>();
  private readonly timer: OneTimer;
  private readonly afterPass: () => void;
  private disposed = false;
  /** Rounds running now: what they schedule is armed once, at the end of the pass. */
  private passing = false;
  /** Passes that ran at least one round, for the bench and tests. */
  passes = 0;

  constructor(clock: Clock, afterPass: () => void) {
    this.timer = new OneTimer(clock, () => this.pass(clock.now()));
    this.afterPass = afterPass;
  }

  schedule(t: RoundTaker, at: number): void {
    if (this.disposed) return;
    this.due.set(t, at);
    if (!this.passing) this.timer.armAt(at);
  }

  cancel(t: RoundTaker): void {
    // The timer stays: when it fires with nothing due it re-arms for what is left.
    this.due.delete(t);
  }

  has(t: RoundTaker): boolean {
    return this.due.has(t);
  }

  dispose(): void {
    this.disposed = true;
    this.due.clear();
    this.timer.cancel();
  }

  private pass(now: number): void {
    const ready: RoundTaker[] = [];
    for (const [t, at] of this.due) if (at <= now + EARLY_MS) ready.push(t);
    // Out of the list before it runs: a round schedules its next one.
    for (const t of ready) this.due.delete(t);
    const waits: Array<Promise<void>> = [];
    // A round that throws does not cost the other pools theirs: it is thrown after the pass.
    let failed: { err: unknown } | undefined;
    this.passing = true;
    for (const t of ready) {
      try {
        const p = t.round();
        if (p !== undefined) waits.push(p);
      } catch (err) {
        failed ??= { err };
      }
    }
    this.passing = false;
    if (ready.length > 0) {
      this.passes++;
      if (waits.length === 0) this.afterPass();
      else void Promise.allSettled(waits).then(() => !this.disposed && this.afterPass());
    }
    this.arm();
    if (failed !== undefined) throw failed.err;
  }

  /** The timer for the earliest round left. */
  private arm(): void {
    let next = Infinity;
    for (const at of this.due.values()) if (at < next) next = at;
    if (next !== Infinity) this.timer.armAt(next);
  }
}
