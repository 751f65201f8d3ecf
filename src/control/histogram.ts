/** Percentiles from the cumulative bucket counts of the status snapshot (types.ts Histogram). Pure. */
import type { Histogram } from './types.js';

/**
 * The bucket bound below which fraction q of the requests finished: of all counted so
 * far, or with `prev` of those counted since it.
 */
export function percentile(prev: Histogram | undefined, cur: Histogram | undefined, q: number): number | undefined {
  // The same view (an idle pool's outcomes are kept between snapshots): nothing counted since.
  if (cur === undefined || cur === prev) return undefined;
  // No array of differences: the dashboard takes two of these per pool per sample.
  const c = cur.counts;
  const p = prev?.counts;
  let total = 0;
  for (let i = 0; i < c.length; i++) total += c[i]! - (p?.[i] ?? 0);
  if (total <= 0) return undefined;
  let seen = 0;
  for (let i = 0; i < c.length; i++) {
    seen += c[i]! - (p?.[i] ?? 0);
    // The last bucket has no upper bound: report the highest bound ("more than").
    if (seen >= q * total) return cur.boundsMs[Math.min(i, cur.boundsMs.length - 1)];
  }
  return cur.boundsMs[cur.boundsMs.length - 1];
}
