/**
 * Pools across reloads. A reload that changes a pool replaces its Pool object; the old
 * one drains (its workers finish their requests) while the new one serves. Status shows
 * one pool per name: the live object, plus the draining ones, plus the counters of
 * generations that are gone, so counters (accepted conn, crashes...) keep counting up
 * across reloads instead of resetting, as Prometheus counters should.
 */
import { countersOf, foldCounters, type PoolCounters } from '../pool/counters.js';
import type { Pool } from '../pool/types.js';

export interface PoolGroup {
  name: string;
  current: Pool | undefined;
  /** Replaced or removed pools still draining. */
  retiring: Pool[];
  /** Counters of generations that have stopped (undefined when none). */
  base: PoolCounters | undefined;
}

export class PoolGenerations {
  private readonly created = new WeakMap<Pool, number>();
  private readonly retiring = new Map<Pool, string>();
  private readonly base = new Map<string, PoolCounters>();

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
        const base = this.base.get(pool.name);
        const counters = pool.snapshot();
        this.base.set(pool.name, base === undefined ? countersOf(counters) : foldCounters(base, counters));
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
