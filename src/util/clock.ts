/**
 * Time as the pool sees it: a monotonic millisecond clock and one-shot timers.
 * Injected so the scaling and queue logic can run on a fake clock in tests.
 */
import { turnNow } from './turn.js';

export interface Clock {
  /** Monotonic milliseconds (performance.now() in production). */
  now(): number;
  setTimer(fn: () => void, ms: number): unknown;
  clearTimer(handle: unknown): void;
}

/**
 * Real time, read once per socket callback on the request path (turnNow: within one
 * callback every reading is the time of the first). Timers are unref'd: a pool's
 * bookkeeping alone never keeps the process alive.
 */
export const systemClock: Clock = {
  now: turnNow,
  setTimer(fn, ms) {
    const t = setTimeout(fn, Math.max(0, Math.ceil(ms)));
    t.unref();
    return t;
  },
  clearTimer(handle) {
    clearTimeout(handle as NodeJS.Timeout);
  },
};

/**
 * One timer re-armed to the earliest time anyone asked for. Callers ask for a time;
 * the callback recomputes what is due and asks again. Arming for a later time than the
 * one pending keeps the earlier one (the callback then finds nothing due and re-arms),
 * which avoids clearTimeout/setTimeout churn on the hot path.
 */
export class OneTimer {
  private handle: unknown = undefined;
  private at = Infinity;
  private readonly clock: Clock;
  private readonly fire: () => void;

  constructor(clock: Clock, onFire: () => void) {
    this.clock = clock;
    this.fire = () => {
      this.handle = undefined;
      this.at = Infinity;
      onFire();
    };
  }

  /** Makes sure the callback runs at or soon after `at` (monotonic ms). */
  armAt(at: number): void {
    if (at >= this.at) return;
    if (this.handle !== undefined) this.clock.clearTimer(this.handle);
    this.at = at;
    this.handle = this.clock.setTimer(this.fire, at - this.clock.now());
  }

  get armed(): boolean {
    return this.handle !== undefined;
  }

  cancel(): void {
    if (this.handle !== undefined) this.clock.clearTimer(this.handle);
    this.handle = undefined;
    this.at = Infinity;
  }
}

/** A periodic job on a SharedTimer: the time it asked for (Infinity: none) and what it runs then. */
export interface TimedJob {
  /** Monotonic ms it is due at; written by the SharedTimer only. */
  dueAt: number;
  run(): void;
}

/**
 * One timer for many periodic jobs on one clock (every pool's memory round): each job
 * asks for a time, the timer is armed for the earliest, and when it fires every job that
 * is due runs, in the order the jobs first asked. N pools' rounds cost one timer and one
 * walk of the jobs, not N timers (each a Timeout object and a timer list re-armed every
 * round), and the code of a round runs often enough to be optimised.
 */
export class SharedTimer {
  /** Every job that asked once and was not cancelled, in the order they first asked. */
  private readonly jobs = new Set<TimedJob>();
  private readonly timer: OneTimer;
  private readonly clock: Clock;
  private readonly afterFire: (() => void) | undefined;
  /** Jobs running now: the times they ask for are armed once, after the last of them. */
  private firing = false;

  /** `afterFire` runs once after the jobs due at a firing ran (the host's budget check after a beat's rounds). */
  constructor(clock: Clock, afterFire?: () => void) {
    this.clock = clock;
    this.afterFire = afterFire;
    this.timer = new OneTimer(clock, () => this.fire());
  }

  /** `job` runs at or soon after `at` (monotonic ms), replacing any time it asked for before. */
  schedule(job: TimedJob, at: number): void {
    this.jobs.add(job);
    job.dueAt = at;
    if (!this.firing) this.timer.armAt(at);
  }

  /** `job` asked for a time that has not come yet. */
  scheduled(job: TimedJob): boolean {
    return job.dueAt !== Infinity;
  }

  /** `job` runs no more (it may ask again). */
  cancel(job: TimedJob): void {
    job.dueAt = Infinity;
    this.jobs.delete(job);
    if (this.jobs.size === 0) this.timer.cancel();
  }

  private fire(): void {
    const now = this.clock.now();
    // The due ones first: a job that runs may schedule or cancel others (each is checked again before it runs).
    const due: TimedJob[] = [];
    for (const job of this.jobs) if (job.dueAt <= now) due.push(job);
    this.firing = true;
    try {
      for (const job of due) {
        if (job.dueAt > now) continue;
        job.dueAt = Infinity;
        job.run();
      }
    } finally {
      // Armed again even when a job threw: the others keep their times.
      this.firing = false;
      let next = Infinity;
      for (const job of this.jobs) if (job.dueAt < next) next = job.dueAt;
      if (next !== Infinity) this.timer.armAt(next);
    }
    if (due.length > 0) this.afterFire?.();
  }
}

/**
 * Epoch milliseconds for the pool's monotonic times: the one conversion the status's
 * wall-clock times (a worker's start, its last request) go through. Read against the
 * wall clock at the time of asking, so they agree with the `now` the status is rendered
 * against even after the system clock was stepped (NTP, an operator); the pool itself
 * decides by the monotonic clock only.
 */
export class WallClock {
  private readonly clock: Clock;

  constructor(clock: Clock) {
    this.clock = clock;
  }

  /** Epoch ms of monotonic time `t`. */
  at(t: number): number {
    return Math.round(Date.now() - (this.clock.now() - t));
  }
}
