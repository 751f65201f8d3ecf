/**
 * What a spawned pool expects its next worker to weigh: expected_worker_memory, a guess,
 * until a worker that served is measured; then the peaks of its workers, live and exited
 * (src/memory/estimate.ts). Estimates are not kept between runs. An estimate that rests on
 * fewer than LEARN_WORKERS workers and is below the guess is still being learnt: spawn
 * admission (memory-admission.ts) trusts it one worker at a time.
 */
import type { PoolConfig } from '../../config/types.js';
import { estimateWorker, PeakHistory, type Estimate } from '../../memory/estimate.js';
import type { SlotView } from './slot.js';

/**
 * While its estimate rests on fewer workers than this and is below expected_worker_memory,
 * the pool starts one worker at a time, each after the previous one served a request:
 * one small first request (a health check) must not teach it that every worker is small
 * and let it start eight at once.
 */
export const LEARN_WORKERS = 3;

export class PoolEstimate {
  private readonly configured: number | undefined;
  /** max_memory_hard when set (no worker stays above it), else Infinity. */
  private readonly cap: number;
  private readonly history = new PeakHistory();
  private est: Estimate;
  /** How many workers the estimate rests on (exited ones in the history, live ones that served). */
  learnedFrom = 0;

  constructor(cfg: PoolConfig) {
    this.configured = cfg.expectedWorkerMemory;
    this.cap = (cfg.maxMemoryHard ?? 0) > 0 ? cfg.maxMemoryHard! : Infinity;
    this.est = { bytes: cfg.expectedWorkerMemory ?? 32 * 1024 * 1024, source: 'configured' };
  }

  get bytes(): number {
    return this.est.bytes;
  }

  get source(): Estimate['source'] {
    return this.est.source;
  }

  /** Measured from too few workers, and smaller than the configured guess: trust it one worker at a time. */
  learning(): boolean {
    return this.est.source === 'measured' && this.learnedFrom < LEARN_WORKERS && this.est.bytes < (this.configured ?? Infinity);
  }

  /** A worker that served exited: its peak joins the history. */
  exited(slot: SlotView): void {
    const peak = peakOf(slot);
    if (peak > 0 && slot.requests > 0) this.history.record(peak);
  }

  /** Recomputed from the history and the live workers that served. */
  update(slots: Iterable<SlotView>): void {
    const live: number[] = [];
    for (const slot of slots) {
      const peak = peakOf(slot);
      if (peak > 0 && slot.requests > 0) live.push(peak);
    }
    this.learnedFrom = this.history.values().length + live.length;
    this.est = estimateWorker(this.history.values(), live, this.configured ?? this.est.bytes, this.cap);
  }
}

/** A worker's peak; a php-cgi group's is its parent's and its children's together (what the group can hold at once, at most). */
function peakOf(slot: SlotView): number {
  const own = slot.mem?.peak ?? 0;
  if (own === 0 || slot.children === undefined) return own;
  let sum = own;
  for (const m of slot.children.values()) sum += m.peak;
  return sum;
}
