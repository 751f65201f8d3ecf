/**
 * One worker's memory as its pool sees it: the latest sample, the peak, and whether it is
 * near a cap. Kept on the worker's Slot; the pool's memory part (memory-caps.ts) records and
 * reads it, status reads its figures.
 */
import type { MemorySample, WorkerMemoryFigures } from '../../memory/types.js';

/** Per worker: its samples and whether it is near a cap. */
export class WorkerMemory {
  last: MemorySample | undefined;
  peak = 0;
  /** Epoch ms of the last sample, for status. */
  sampledAt = 0;
  /** At NEAR_SHARE of a cap: re-measured right after each request. */
  near = false;
  /** The kernel's OOM killer killed it. */
  oomKilled = false;
  /** At the last sample: the requests it had been given, and whether it was idle. */
  requestsAtSample = -1;
  idleAtSample = false;
  /** Sampling rounds passed over it since its last sample (quiet: idle, nothing served since). */
  roundsSkipped = 0;

  /** After a sample: what the worker had done by then (a quiet one is read less often). */
  sampledWhen(requests: number, idle: boolean): void {
    this.requestsAtSample = requests;
    this.idleAtSample = idle;
    this.roundsSkipped = 0;
  }

  record(s: MemorySample): void {
    this.last = s;
    if (s.value > this.peak) this.peak = s.value;
    this.sampledAt = Date.now();
  }

  /** A sample of the worker before it served: its charge, not a peak (a fresh process is smaller than one that ran the application). */
  recordFresh(s: MemorySample): void {
    this.last = s;
    this.sampledAt = Date.now();
  }

  figures(): WorkerMemoryFigures | undefined {
    const s = this.last;
    if (s === undefined) return undefined;
    return { pss: s.pss, rss: s.rss, anon: s.anon, cpu: Math.round(s.cpu * 10) / 10, measure: s.measure, peak: this.peak, sampledAt: this.sampledAt };
  }
}
