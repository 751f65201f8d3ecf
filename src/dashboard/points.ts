/**
 * Chart points from two consecutive snapshots of one pool (pure): rates come from the
 * cumulative counters' difference, latency percentiles from the outcome histogram's.
 */
import { percentile } from '../control/histogram.js';
import type { PoolStatus } from '../control/types.js';

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
