/**
 * One worker's memory as its pool sees it: the latest sample, the peak, and whether it is
 * near a cap. Kept on the worker's Slot; the pool's memory part (memory-caps.ts) records and
 * reads it, status reads its figures.
 */
import type { MemorySample, WorkerMemoryFigures } from '../../memory/types.js';

/**
 * Counts the samples that changed what status shows of a pool's workers (memory, peak,
 * CPU): an idle pool's kept status is made again after one (SpawnedPool.idleRevision),
 * and only then. One per pool, shared by its workers' WorkerMemory.
 */
export class FiguresRevision {
  n = 0;
}

/** Per worker: its samples and whether it is near a cap. */
export class WorkerMemory {
  last: MemorySample | undefined;
  private peakBytes = 0;
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

  constructor(private readonly revision?: FiguresRevision) {}

  /** The largest it was seen (samples, and the kernel's high-water mark less its shared part). */
  get peak(): number {
    return this.peakBytes;
  }

  raisePeak(bytes: number): void {
    if (bytes <= this.peakBytes) return;
    this.peakBytes = bytes;
    if (this.revision !== undefined) this.revision.n++;
  }

  /** After a sample: what the worker had done by then (a quiet one is read less often). */
  sampledWhen(requests: number, idle: boolean): void {
    this.requestsAtSample = requests;
    this.idleAtSample = idle;
    this.roundsSkipped = 0;
  }

  record(s: MemorySample): void {
    this.recordFresh(s);
    this.raisePeak(s.value);
  }

  /** A sample of the worker before it served: its charge, not a peak (a fresh process is smaller than one that ran the application). */
  recordFresh(s: MemorySample): void {
    const l = this.last;
    if (this.revision !== undefined && (l === undefined || l.value !== s.value || l.rss !== s.rss || shownCpu(l.cpu) !== shownCpu(s.cpu) || l.measure !== s.measure)) this.revision.n++;
    this.last = s;
    this.sampledAt = Date.now();
  }

  figures(): WorkerMemoryFigures | undefined {
    const s = this.last;
    if (s === undefined) return undefined;
    return { pss: s.pss, rss: s.rss, anon: s.anon, cpu: shownCpu(s.cpu), measure: s.measure, peak: this.peak, sampledAt: this.sampledAt };
  }
}

/** CPU % as status shows it: one decimal. */
const shownCpu = (cpu: number): number => Math.round(cpu * 10) / 10;
