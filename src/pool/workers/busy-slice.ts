/**
 * busy_cpu_slice: whether a pool's workers run with a long CPU slice. On when a request
 * has to wait for a worker (the pool is at its capacity: its workers are busy and the
 * CPU they use is work of a backlog, not one user waiting), off once no request waited
 * for HOLD_MS, so a pool that only now and then fills does not flip at every request.
 * The slice itself is set by the placement (memory-placement.ts, cpu-slice.ts).
 */
import type { Clock } from '../../util/clock.js';

/** busy_cpu_slice's default, ms. */
export const DEFAULT_BUSY_CPU_SLICE_MS = 10;
/** How long after the last queued request the long slice stays. */
export const HOLD_MS = 1000;

export class BusySlice {
  private on = false;
  private lastQueued = 0;
  private timer: unknown = undefined;
  private readonly clock: Clock;
  private readonly apply: (on: boolean) => void;

  /** `apply(on)`: set every worker's slice (on: the long one; off: the kernel's default). */
  constructor(clock: Clock, apply: (on: boolean) => void) {
    this.clock = clock;
    this.apply = apply;
  }

  get busy(): boolean {
    return this.on;
  }

  /** A request waits in the queue. */
  queued(): void {
    this.lastQueued = this.clock.now();
    if (this.on) return;
    this.on = true;
    this.apply(true);
    this.arm(HOLD_MS);
  }

  private arm(ms: number): void {
    this.timer = this.clock.setTimer(() => {
      this.timer = undefined;
      const quiet = this.clock.now() - this.lastQueued;
      if (quiet < HOLD_MS) {
        this.arm(HOLD_MS - quiet);
        return;
      }
      this.on = false;
      this.apply(false);
    }, ms);
  }

  /** The pool stops: no timer left behind, and workers handed on to a new daemon (upgrade) get the default slice back. */
  dispose(): void {
    if (this.timer !== undefined) this.clock.clearTimer(this.timer);
    this.timer = undefined;
    if (!this.on) return;
    this.on = false;
    this.apply(false);
  }
}
