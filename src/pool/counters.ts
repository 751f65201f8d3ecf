/**
 * A pool's counters, defined once: what the pool bumps on the hot path (PoolStats), what
 * its snapshot carries, what a stopped generation leaves behind (control/generations.ts)
 * and what status sums over generations (control/snapshot.ts) are this one record, folded
 * by one rule: counts are summed, high-water marks (MAXIMA) take the larger, timing
 * summaries add their counts and totals and keep the larger maximum, and a record of
 * counts (rejected by cause, recycles by reason) folds key by key.
 */

/** Count, total and maximum of a time, ms (queue waits, spawn-to-ready). */
export interface Summary {
  count: number;
  totalMs: number;
  maxMs: number;
}

export interface PoolCounters {
  accepted: number;
  completed: number;
  /** Clients that went away before their response was complete. */
  aborted: number;
  /** High-water mark of requests running at once. */
  maxActive: number;
  /** High-water mark of the queue. */
  maxQueued: number;
  /** Requests answered 503 without running, by cause. */
  rejected: { queueFull: number; queueTimeout: number; failing: number; shuttingDown: number };
  /** Requests answered with an error: unreachable/all down, timeouts (read, request_timeout), crashed worker, other (closed mid-response, protocol). */
  errors: { unreachable: number; timeout: number; crashed: number; other: number };
  /** Times a request found every worker busy at max_children. */
  maxChildrenReached: number;
  crashes: number;
  recycles: Record<string, number>;
  slowRequests: number;
  /** Time requests waited in the queue before a target took them. */
  queueWait?: Summary | undefined;
  /** Time from spawn to ready of this pool's workers. */
  spawnLatency?: Summary | undefined;
}

/** The high-water marks: folded by max, not summed. */
const MAXIMA: ReadonlySet<string> = new Set<keyof PoolCounters | keyof Summary>(['maxActive', 'maxQueued', 'maxMs']);

/** Every counter at zero. */
export function zeroCounters(): PoolCounters {
  return {
    accepted: 0,
    completed: 0,
    aborted: 0,
    maxActive: 0,
    maxQueued: 0,
    rejected: { queueFull: 0, queueTimeout: 0, failing: 0, shuttingDown: 0 },
    errors: { unreachable: 0, timeout: 0, crashed: 0, other: 0 },
    maxChildrenReached: 0,
    crashes: 0,
    recycles: {},
    slowRequests: 0,
    queueWait: undefined,
    spawnLatency: undefined,
  };
}

/** Zeros to fold from (folding never changes its inputs), and the counters' names: a snapshot folds every pool's, so neither is made again per fold. */
const ZERO: PoolCounters = zeroCounters();
const KEYS: readonly string[] = Object.keys(ZERO);

/**
 * `c`'s counters copied into `out` (records copied, not shared), key by key into fields
 * `out` already has: a pool's snapshot is a copy of one shape with every field, then
 * filled. Spreading a copy into a literal that adds fields (`{...countersOf(c), name}`)
 * made V8 build the literal's hidden class anew at every call: about 9 KB a pool per
 * status snapshot, against under 2 KB now.
 */
export function copyCounters(out: PoolCounters, c: Partial<PoolCounters>): void {
  const o = out as unknown as Record<string, unknown>;
  const from = c as Record<string, unknown>;
  for (const key of KEYS) o[key] = copy(from[key]);
}

/** The counters of `c` alone (a snapshot carries gauges and lists beside them). */
export function countersOf(c: PoolCounters): PoolCounters {
  return foldCounters(ZERO, c);
}

/** `a` and `b` folded (a new record; neither is changed). */
export function foldCounters(a: PoolCounters, b: PoolCounters): PoolCounters {
  const out = {} as Record<string, unknown>;
  for (const key of KEYS) {
    out[key] = fold(key, (a as unknown as Record<string, unknown>)[key], (b as unknown as Record<string, unknown>)[key]);
  }
  return out as unknown as PoolCounters;
}

function fold(key: string, a: unknown, b: unknown): unknown {
  if (a === undefined || b === undefined) return copy(a ?? b);
  if (typeof a === 'number') return MAXIMA.has(key) ? Math.max(a, b as number) : a + (b as number);
  const out: Record<string, unknown> = { ...(a as Record<string, unknown>) };
  for (const [k, v] of Object.entries(b as Record<string, unknown>)) out[k] = fold(k, out[k], v);
  return out;
}

function copy(v: unknown): unknown {
  return v !== null && typeof v === 'object' ? { ...(v as object) } : v;
}
