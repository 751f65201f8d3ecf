/**
 * A Clock whose time moves only when the test says so; timers fire in deadline order.
 */
import type { Clock } from '../../src/util/clock.js';

interface FakeTimer {
  at: number;
  seq: number;
  fn: () => void;
  cleared: boolean;
}

export class FakeClock implements Clock {
  private t = 1000;
  private seq = 0;
  private timers: FakeTimer[] = [];

  now(): number {
    return this.t;
  }

  setTimer(fn: () => void, ms: number): unknown {
    const timer: FakeTimer = { at: this.t + Math.max(0, ms), seq: this.seq++, fn, cleared: false };
    this.timers.push(timer);
    return timer;
  }

  clearTimer(handle: unknown): void {
    (handle as FakeTimer).cleared = true;
  }

  /** Timers still pending. */
  get pending(): number {
    return this.timers.filter((t) => !t.cleared).length;
  }

  /** Moves time forward by ms, firing every timer due on the way, in order. */
  advance(ms: number): void {
    const end = this.t + ms;
    for (;;) {
      this.timers = this.timers.filter((t) => !t.cleared);
      let next: FakeTimer | undefined;
      for (const t of this.timers) if (t.at <= end && (!next || t.at < next.at || (t.at === next.at && t.seq < next.seq))) next = t;
      if (!next) break;
      this.t = Math.max(this.t, next.at);
      next.cleared = true;
      next.fn();
    }
    this.t = end;
  }
}
