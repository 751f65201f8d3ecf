/**
 * A log-linear latency histogram in the spirit of HdrHistogram: exact below 256 µs,
 * then each power-of-two range split into 128 linear buckets, so any recorded value is
 * known to within 1/128 (0.8 %) whatever its size. Fixed memory (3,328 counters), O(1)
 * record, no array of samples; histograms of the same shape merge by adding counters.
 *
 * Values are microseconds (fractions are truncated). Min, max and the sum are kept
 * exactly; percentiles answer the midpoint of the bucket holding the rank, clamped to
 * [min, max] so p0/p100 are exact.
 */

/** Linear buckets per power-of-two range, as a bit count: 2^7 = 128. */
const SUB_BITS = 7;
const SUB = 1 << SUB_BITS;
/** Values up to 2^31 µs (about 36 minutes) are kept; larger ones count as that. */
const MAX_VALUE = 0x7fffffff;
const MAX_SHIFT = 31 - SUB_BITS;
const BUCKETS = MAX_SHIFT * SUB + 2 * SUB;

function indexOf(v: number): number {
  if (v < 2 * SUB) return v;
  const shift = 31 - Math.clz32(v) - SUB_BITS;
  return shift * SUB + (v >>> shift);
}

/** Lowest value that lands in bucket i, and the bucket's width. */
function bucketLow(i: number): { low: number; width: number } {
  if (i < 2 * SUB) return { low: i, width: 1 };
  const shift = Math.floor(i / SUB) - 1;
  return { low: (i - shift * SUB) * 2 ** shift, width: 2 ** shift };
}

export interface HistogramSummary {
  count: number;
  min: number;
  avg: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

export class Histogram {
  private readonly counts = new Float64Array(BUCKETS);
  count = 0;
  sum = 0;
  min = Infinity;
  max = 0;

  /** Records one value in microseconds (negative values count as 0). */
  record(us: number): void {
    let v = us > 0 ? Math.trunc(us) : 0;
    if (v > MAX_VALUE) v = MAX_VALUE;
    this.counts[indexOf(v)]!++;
    this.count++;
    this.sum += v;
    if (v < this.min) this.min = v;
    if (v > this.max) this.max = v;
  }

  merge(other: Histogram): void {
    const a = this.counts;
    const b = other.counts;
    for (let i = 0; i < BUCKETS; i++) a[i]! += b[i]!;
    this.count += other.count;
    this.sum += other.sum;
    if (other.min < this.min) this.min = other.min;
    if (other.max > this.max) this.max = other.max;
  }

  reset(): void {
    this.counts.fill(0);
    this.count = 0;
    this.sum = 0;
    this.min = Infinity;
    this.max = 0;
  }

  /** The value at percentile p (0..100), in µs; 0 when empty. */
  percentile(p: number): number {
    if (this.count === 0) return 0;
    if (p <= 0) return this.min;
    if (p >= 100) return this.max;
    // Rank of the sample we want, 1-based: the smallest value with at least p% at or below it.
    const rank = Math.max(1, Math.ceil((p / 100) * this.count));
    let seen = 0;
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.counts[i]!;
      if (seen >= rank) {
        const { low, width } = bucketLow(i);
        const mid = width === 1 ? low : low + (width - 1) / 2;
        return Math.min(this.max, Math.max(this.min, mid));
      }
    }
    return this.max;
  }

  summary(): HistogramSummary {
    return {
      count: this.count,
      min: this.count === 0 ? 0 : this.min,
      avg: this.count === 0 ? 0 : this.sum / this.count,
      p50: this.percentile(50),
      p90: this.percentile(90),
      p99: this.percentile(99),
      max: this.max,
    };
  }

  /** Non-empty buckets as [low µs, count] pairs, for --json consumers who want the shape. */
  buckets(): Array<[number, number]> {
    const out: Array<[number, number]> = [];
    for (let i = 0; i < BUCKETS; i++) if (this.counts[i]! > 0) out.push([bucketLow(i).low, this.counts[i]!]);
    return out;
  }
}
