/**
 * The pure half of pool-size tuning: what one measurement step and one pool size
 * yield, the sizes to try, and the recommendation rule. No I/O, so the CLI can load it
 * cheaply and tests can feed it made-up measurements.
 */

export interface TuneStep {
  size: number;
  concurrency: number;
  /** Median of the repeats (req/s, ms). */
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** Totals over the repeats. */
  replies: number;
  errors: number;
  /** Replies whose status was not 2xx/3xx. */
  failedStatus: number;
  /** How many times the step ran, and the req/s of each run. */
  repeats: number;
  rpsRuns: number[];
  /** (max − min) / median of rpsRuns: how far one run's figure can be trusted. */
  spread: number;
}

export interface RepeatRule {
  /** Runs at least this many times (3)... */
  min: number;
  /** ...and more while the spread exceeds `spread`, up to this many (8). */
  max: number;
  /** Relative spread that is good enough (0.1). */
  spread: number;
}

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** (max − min) / median; 0 for fewer than two runs or a zero median. */
export function relativeSpread(xs: readonly number[]): number {
  if (xs.length < 2) return 0;
  const med = median(xs);
  return med > 0 ? (Math.max(...xs) - Math.min(...xs)) / med : 0;
}

/** Whether a step measured `runs` so far should run once more. */
export function needsAnotherRun(runs: readonly number[], rule: RepeatRule): boolean {
  if (runs.length < rule.min) return true;
  return runs.length < rule.max && relativeSpread(runs) > rule.spread;
}

export interface TuneSize {
  size: number;
  steps: TuneStep[];
  /** The step with the highest throughput. */
  best: TuneStep;
  /** Workers found running under the daemon. */
  workers: number;
  /** Mean memory of one worker (with its descendants), the highest seen under load. */
  memPerWorker: number;
  memKind: 'pss' | 'rss';
  /** The daemon's own resident memory. */
  daemonRss: number;
}

export interface Recommendation {
  size: number;
  /** Why, in one or two sentences. */
  reason: string;
  /** False when nothing fits the memory budget (the smallest size is named anyway). */
  fits: boolean;
  bestRps: number;
  bestSize: number;
}


/** 1, 2, 4, ... up to max, with max itself when it is not a power of two. */
export function doublingSizes(max: number): number[] {
  const out: number[] = [];
  for (let n = 1; n < max; n *= 2) out.push(n);
  out.push(max);
  return out;
}

/** A size whose steps mostly failed does not count as reaching any throughput. */
function usable(s: TuneSize): boolean {
  const b = s.best;
  const total = b.replies + b.errors;
  return total > 0 && (b.errors + b.failedStatus) / total < 0.01;
}

export function recommend(sizes: TuneSize[], memoryBudget: number, tolerance: number): Recommendation | undefined {
  const good = sizes.filter(usable);
  if (good.length === 0) return undefined;
  const top = good.reduce((a, b) => (b.best.rps > a.best.rps ? b : a));
  const bestRps = top.best.rps;
  const mib = (b: number): string => `${(b / 1048576).toFixed(1)} MiB`;
  const pct = (s: TuneSize): string => `${((s.best.rps / bestRps) * 100).toFixed(1)}%`;
  const fits = (s: TuneSize): boolean => s.size * s.memPerWorker <= memoryBudget;
  const sorted = [...good].sort((a, b) => a.size - b.size);
  const knee = sorted.find((s) => s.best.rps >= (1 - tolerance) * bestRps && fits(s));
  if (knee !== undefined) {
    return {
      size: knee.size,
      fits: true,
      bestRps,
      bestSize: top.size,
      reason:
        `${knee.size} worker${knee.size === 1 ? ' reaches' : 's reach'} ${pct(knee)} of the best throughput (${bestRps.toFixed(0)} req/s with ${top.size}), ` +
        `p99 ${knee.best.p99Ms.toFixed(1)} ms at c=${knee.best.concurrency}; about ${knee.size} × ${mib(knee.memPerWorker)} = ${mib(knee.size * knee.memPerWorker)} of a ${mib(memoryBudget)} budget.`,
    };
  }
  const fitting = sorted.filter(fits);
  if (fitting.length > 0) {
    const s = fitting.reduce((a, b) => (b.best.rps > a.best.rps ? b : a));
    return {
      size: s.size,
      fits: true,
      bestRps,
      bestSize: top.size,
      reason: `the memory budget (${mib(memoryBudget)}) holds at most ${s.size} of these workers (${mib(s.memPerWorker)} each); they reach ${pct(s)} of the best throughput (${bestRps.toFixed(0)} req/s with ${top.size}).`,
    };
  }
  const smallest = sorted[0]!;
  return {
    size: smallest.size,
    fits: false,
    bestRps,
    bestSize: top.size,
    reason: `even ${smallest.size} worker${smallest.size === 1 ? '' : 's'} (${mib(smallest.size * smallest.memPerWorker)}) exceed the memory budget of ${mib(memoryBudget)}; raise the budget or make the workers smaller.`,
  };
}
