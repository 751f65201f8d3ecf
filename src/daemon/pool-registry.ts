/**
 * The one owner of "the pools by name", as undici's Agent owns its dispatchers: a Map
 * the listeners read per request, filled at start (static pools) or by a factory on
 * first use (vhost sites), swapped by reload, emptied by stop. A pool that leaves (a
 * reload replaced or removed it, or its site went idle) drains through `generations`,
 * which keeps it visible to status and folds its counters into its name's totals.
 */
import type { PoolGenerations } from '../control/generations.js';
import type { PoolConfig } from '../config/types.js';
import type { Logger } from '../log/log.js';
import type { Pool, StopReason } from '../pool/types.js';
import { ErrorCodes } from '../errors.js';

export type PoolFactory = (cfg: PoolConfig, runtimeDir?: string) => Pool;

export class PoolRegistry {
  private readonly live = new Map<string, Pool>();
  /** The live pool found last, at hand: a listener's next request usually names it too (no Map look-up). Dropped on every change of `live`. */
  private lastName: string | undefined;
  private last: Pool | undefined;

  constructor(
    private readonly generations: PoolGenerations,
    private readonly factory: PoolFactory,
    private readonly logger: Logger,
  ) {}

  /** Live pools in the order they came (status lists them so). */
  get pools(): ReadonlyMap<string, Pool> {
    return this.live;
  }

  get size(): number {
    return this.live.size;
  }

  /** The live pool of `name`, else one still draining (requests of a closing listener reach it). */
  get(name: string): Pool | undefined {
    if (name === this.lastName) return this.last;
    const pool = this.live.get(name);
    if (pool === undefined) return this.generations.drainingPool(name);
    this.lastName = name;
    this.last = pool;
    return pool;
  }

  has(name: string): boolean {
    return this.live.has(name);
  }

  /** A pool object from the factory, not yet in service (reload starts it first). */
  make(cfg: PoolConfig, runtimeDir?: string): Pool {
    const pool = this.factory(cfg, runtimeDir);
    this.generations.born(pool);
    return pool;
  }

  /**
   * The live pool of `name`, created from `cfg()` and started on first use (`runtimeDir`:
   * where its worker sockets go, asked only then). Its start is not awaited: a pool takes requests at once and queues them until a worker is ready.
   */
  obtain(name: string, cfg: () => PoolConfig, runtimeDir?: () => string | undefined): Pool {
    let pool = this.live.get(name);
    if (pool !== undefined) return pool;
    pool = this.make(cfg(), runtimeDir?.());
    this.setLive(name, pool);
    pool.start().catch((err: unknown) => this.logger.error({ code: ErrorCodes.START_FAILED, err, pool: name }, `pool ${name} could not start its workers`));
    return pool;
  }

  /** Puts `pool` in service under its name; a pool it replaces drains (`stop` says how). */
  put(pool: Pool, stop: (old: Pool) => Promise<unknown>): void {
    const old = this.live.get(pool.name);
    this.setLive(pool.name, pool);
    if (old !== undefined && old !== pool) this.generations.retire(old, stop(old));
  }

  /** Puts `to` in service in place of `from`, which leaves without draining (a reload's hand-over ended); nothing when `from` is not the live pool any more. */
  swap(from: Pool, to: Pool): void {
    if (this.live.get(from.name) === from) this.setLive(from.name, to);
  }

  /** Takes `name` out of service; its pool drains (`stop` says how). False when it had none. */
  retire(name: string, stop: (old: Pool) => Promise<unknown>): boolean {
    const old = this.live.get(name);
    if (old === undefined) return false;
    this.live.delete(name);
    this.lastName = this.last = undefined;
    this.generations.retire(old, stop(old));
    return true;
  }

  private setLive(name: string, pool: Pool): void {
    this.live.set(name, pool);
    this.lastName = this.last = undefined;
  }

  /** Stops every live pool (daemon stop); they stay listed until stopped. */
  stopAll(timeoutMs: number, reason: (name: string) => StopReason = () => 'shutdown'): Promise<PromiseSettledResult<void>[]> {
    return Promise.allSettled([...this.live.values()].map((p) => p.stop(timeoutMs, reason(p.name))));
  }
}
