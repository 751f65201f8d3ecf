/**
 * How big will the next worker of a pool get? The 90th percentile of the peaks of the
 * pool's recent workers (the last PEAK_HISTORY that exited, plus the live ones), counting
 * only workers that served at least one request: a fresh worker is far smaller than one
 * that has run the application. Before any such worker was measured, the pool's
 * expected_worker_memory. Pure apart from the ring it keeps.
 */

export const ESTIMATE_PERCENTILE = 0.9;
export const PEAK_HISTORY = 32;

/** Nearest-rank percentile (p in (0, 1]); 0 for no values. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil(p * sorted.length)));
  return sorted[rank - 1]!;
}

export interface Estimate {
  bytes: number;
  source: 'measured' | 'configured';
}

/**
 * `cap`: max_memory_hard when set (no worker stays above it), else Infinity.
 */
export function estimateWorker(history: readonly number[], live: readonly number[], configured: number, cap = Infinity): Estimate {
  if (history.length === 0 && live.length === 0) return { bytes: configured, source: 'configured' };
  const p = percentile([...history, ...live], ESTIMATE_PERCENTILE);
  return { bytes: Math.min(p, cap), source: 'measured' };
}

/** The peaks of the last `capacity` workers that exited. */
export class PeakHistory {
  private readonly ring: number[];
  private head = 0;
  private size = 0;

  constructor(capacity = PEAK_HISTORY) {
    this.ring = new Array<number>(capacity).fill(0);
  }

  record(peak: number): void {
    this.ring[this.head] = peak;
    this.head = (this.head + 1) % this.ring.length;
    if (this.size < this.ring.length) this.size++;
  }

  values(): number[] {
    return this.ring.slice(0, this.size);
  }
}
