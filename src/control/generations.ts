/**
 * Pools across reloads. A reload that changes a pool replaces its Pool object; the old
 * one drains (its workers finish their requests) while the new one serves. Status shows
 * one pool per name: the live object, plus the draining ones, plus the counters of
 * generations that are gone, so counters (accepted conn, crashes...) keep counting up
 * across reloads instead of resetting, as Prometheus counters should.
 */
import type { Pool, PoolSnapshot } from '../pool/types.js';

export interface PoolGroup {
  name: string;
  current: Pool | undefined;
  /** Replaced or removed pools still draining. */
  retiring: Pool[];
  /** Counters of generations that have stopped (undefined when none). */
  base: PoolSnapshot | undefined;
}

type Summary = { count: number; totalMs: number; maxMs: number };

function addSummary(a: Summary | undefined, b: Summary | undefined): Summary | undefined {
  if (b === undefined) return a;
  if (a === undefined) return { ...b };
  return { count: a.count + b.count, totalMs: a.totalMs + b.totalMs, maxMs: Math.max(a.maxMs, b.maxMs) };
}

function addRecord<T extends object>(a: T, b: object | undefined): T {
  const out = { ...a } as Record<string, number>;
  if (b !== undefined) for (const [k, v] of Object.entries(b) as Array<[string, number | undefined]>) out[k] = (out[k] ?? 0) + (v ?? 0);
  return out as T;
}

/**
 * Counters of `from` added to `into` (a copy is returned); high-water marks take the max.
 * Gauges (queued, active, workers) are not carried: a stopped generation has none.
 */
export function foldCounters(into: PoolSnapshot | undefined, from: PoolSnapshot): PoolSnapshot {
  const base: PoolSnapshot = into ?? {
    ...from,
    queued: 0,
    active: 0,
    accepted: 0,
    completed: 0,
    aborted: 0,
    maxActive: 0,
    maxQueued: 0,
    rejected: { queueFull: 0, queueTimeout: 0, failing: 0, shuttingDown: 0 },
    errors: { unreachable: 0, timeout: 0, crashed: 0, other: 0 },
    workers: [],
    backends: [],
    maxChildrenReached: 0,
    crashes: 0,
    recycles: {},
    slowRequests: 0,
    queueWait: undefined,
    spawnLatency: undefined,
    memory: undefined,
  };
  return {
    ...base,
    accepted: base.accepted + from.accepted,
    completed: base.completed + from.completed,
    aborted: (base.aborted ?? 0) + (from.aborted ?? 0),
    maxActive: Math.max(base.maxActive, from.maxActive),
    maxQueued: Math.max(base.maxQueued, from.maxQueued),
    rejected: addRecord({ shuttingDown: 0, ...base.rejected }, from.rejected),
    errors: addRecord({ other: 0, ...base.errors }, from.errors),
    maxChildrenReached: base.maxChildrenReached + from.maxChildrenReached,
    crashes: base.crashes + from.crashes,
    recycles: addRecord(base.recycles, from.recycles),
    slowRequests: base.slowRequests + from.slowRequests,
    queueWait: addSummary(base.queueWait, from.queueWait),
    spawnLatency: addSummary(base.spawnLatency, from.spawnLatency),
  };
}

export class PoolGenerations {
  private readonly created = new WeakMap<Pool, number>();
  private readonly retiring = new Map<Pool, string>();
  private readonly base = new Map<string, PoolSnapshot>();

  /** Records when a pool object was created (status "start time"). */
  born(pool: Pool, at = Date.now()): void {
    if (!this.created.has(pool)) this.created.set(pool, at);
  }

  createdAt(pool: Pool): number {
    let at = this.created.get(pool);
    if (at === undefined) {
      at = Date.now();
      this.created.set(pool, at);
    }
    return at;
  }

  /**
   * A pool leaves service (replaced or removed by a reload): it stays in status until
   * `stopped` settles, then its counters are folded into its name's base.
   */
  retire(pool: Pool, stopped: Promise<unknown>): void {
    this.retiring.set(pool, pool.name);
    const done = (): void => {
      this.retiring.delete(pool);
      try {
        this.base.set(pool.name, foldCounters(this.base.get(pool.name), pool.snapshot()));
      } catch {
        // a pool that cannot describe itself any more adds nothing
      }
    };
    stopped.then(done, done);
  }

  /** Pools still draining (for a daemon stop that must stop them too). */
  get draining(): Pool[] {
    return [...this.retiring.keys()];
  }

  /** A draining pool by name: requests of a closing listener still reach it. */
  drainingPool(name: string): Pool | undefined {
    let found: Pool | undefined;
    for (const [p, n] of this.retiring) if (n === name) found = p;
    return found;
  }

  /** Live pools in config order, then names that only have draining pools left. */
  groups(current: ReadonlyMap<string, Pool>): PoolGroup[] {
    const out: PoolGroup[] = [];
    const byName = new Map<string, PoolGroup>();
    for (const [name, pool] of current) {
      const g: PoolGroup = { name, current: pool, retiring: [], base: this.base.get(name) };
      out.push(g);
      byName.set(name, g);
    }
    for (const [pool, name] of this.retiring) {
      let g = byName.get(name);
      if (g === undefined) {
        g = { name, current: undefined, retiring: [], base: this.base.get(name) };
        out.push(g);
        byName.set(name, g);
      }
      g.retiring.push(pool);
    }
    return out;
  }
}
