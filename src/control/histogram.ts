/** Percentiles from the cumulative bucket counts of the status snapshot (types.ts Histogram). Pure. */
import type { Histogram } from './types.js';

/**
 * The bucket bound below which fraction q of the requests finished: of all counted so
 * far, or with `prev` of those counted since it.
 */
export function percentile(prev: Histogram | undefined, cur: Histogram | undefined, q: number): number | undefined {
  if (cur === undefined) return undefined;
  const d = cur.counts.map((c, i) => c - (prev?.counts[i] ?? 0));
  const total = d.reduce((a, b) => a + b, 0);
  if (total <= 0) return undefined;
  let seen = 0;
  for (let i = 0; i < d.length; i++) {
    seen += d[i]!;
    // The last bucket has no upper bound: report the highest bound ("more than").
    if (seen >= q * total) return cur.boundsMs[Math.min(i, cur.boundsMs.length - 1)];
  }
  return cur.boundsMs[cur.boundsMs.length - 1];
}
