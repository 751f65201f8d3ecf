/**
 * Chart points from two consecutive snapshots of one pool (pure): rates come from the
 * cumulative counters' difference, latency percentiles from the outcome histogram's.
 */
import type { PoolOutcomes, PoolStatus } from '../control/types.js';

export interface PoolPoint {
  /** Epoch ms of the later snapshot. */
  t: number;
  rps: number;
  /** Latency percentiles over the interval, ms (upper bucket bounds); undefined when nothing finished. */
  p50?: number | undefined;
  p99?: number | undefined;
  busy: number;
  idle: number;
  queue: number;
  /** Bytes of the pool's workers together. */
  memory?: number | undefined;
  /** 5xx responses per second. */
  errors: number;
}

/** The bucket bound below which fraction q of the interval's requests finished. */
export function percentile(prev: PoolOutcomes['latency'] | undefined, cur: PoolOutcomes['latency'] | undefined, q: number): number | undefined {
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

export function poolPoint(prev: { t: number; pool: PoolStatus } | undefined, t: number, pool: PoolStatus): PoolPoint {
  const secs = prev === undefined ? 0 : (t - prev.t) / 1000;
  // A counter going down means the daemon restarted: no rate for this interval.
  const rate = (a: number | undefined, b: number): number => (secs <= 0 || a === undefined || b < a ? 0 : Math.round(((b - a) / secs) * 10) / 10);
  const p = prev?.pool;
  return {
    t,
    rps: rate(p?.completed, pool.completed),
    p50: prev ? percentile(p?.outcomes?.latency, pool.outcomes?.latency, 0.5) : undefined,
    p99: prev ? percentile(p?.outcomes?.latency, pool.outcomes?.latency, 0.99) : undefined,
    busy: pool.processes.busy,
    idle: pool.processes.idle,
    queue: pool.queue.length,
    memory: pool.memory?.total,
    errors: rate(p?.outcomes?.status['5xx'] ?? 0, pool.outcomes?.status['5xx'] ?? 0),
  };
}
