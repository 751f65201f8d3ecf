/**
 * A preload pool's parent (fork-server.ts) as its pool's memory counts it: its pages are
 * the pool's too (its children share them copy-on-write; PSS splits them), so it is
 * measured with the workers and counts in memory_limit and the budget, with its spares
 * (the child a preload parent keeps forked ahead of need, the children a parked php-cgi
 * parent keeps paused beside it: not workers) added to its measure. While the pool has
 * no worker it is the first thing given back under pressure; a parent stopped for memory
 * counts as freeing until it exited.
 */
import type { MemoryGovernor } from '../../memory/host-governor.js';
import type { MemorySample, WorkerRef } from '../../memory/types.js';
import type { Clock } from '../../util/clock.js';
import type { FiguresRevision } from './worker-memory.js';

export interface PreloadParentHooks {
  /** The parent's pid while one runs. */
  preloadParent?(): number | undefined;
  /** The pids of the children the parent keeps beside it, not yet workers. */
  preloadSpares?(): readonly number[];
  /** Stops the parent now if it has no worker and no fork pending; resolves once it exited (undefined: nothing stopped). */
  stopPreloadParent?(): Promise<void> | undefined;
}

export class PreloadParentMemory {
  private readonly pool: string;
  private readonly host: MemoryGovernor;
  private readonly hooks: PreloadParentHooks;
  private readonly clock: Clock;
  private readonly interval: number;
  /** The latest sample of the parent that runs (undefined: none runs, or not measured yet). */
  private parent: { pid: number; sample: MemorySample } | undefined;
  /** Parents stopped for memory that have not exited yet: still counted, and freeing. */
  stopping = 0;

  constructor(pool: string, host: MemoryGovernor, hooks: PreloadParentHooks, clock: Clock, interval: number, private readonly revision?: FiguresRevision) {
    this.pool = pool;
    this.host = host;
    this.hooks = hooks;
    this.clock = clock;
    this.interval = interval;
  }

  /** The parent's pid while one runs: a sampling round measures it with the workers. */
  pid(): number | undefined {
    return this.hooks.preloadParent?.();
  }

  /** The parent's spares: a sampling round measures them with the parent. */
  sparePids(): readonly number[] {
    return this.hooks.preloadSpares?.() ?? NO_SPARES;
  }

  /** A sampling round's reading of `pid` (the pid() it was asked for) and of its spares (those measured). */
  keep(pid: number | undefined, s: MemorySample | undefined, spares: readonly (MemorySample | undefined)[] = []): void {
    this.set(pid !== undefined && s !== undefined ? { pid, sample: withSpares(s, spares) } : undefined);
  }

  /** A new reading; one that changes what status shows moves the pool's revision. */
  private set(next: { pid: number; sample: MemorySample } | undefined): void {
    const was = this.parent;
    if (this.revision !== undefined && (was?.pid !== next?.pid || was?.sample.value !== next?.sample.value)) this.revision.n++;
    this.parent = next;
  }

  /**
   * The parent's latest measure, while it is the one running (0 without). With no
   * worker no sampling round runs: a parent not measured yet (a reload renewed it) or
   * measured longer than a sample interval ago (while it was importing) is measured now.
   */
  value(): number {
    const pid = this.pid();
    if (pid === undefined) return 0;
    const now = this.clock.now();
    if ((this.parent?.pid !== pid || now - this.parent.sample.at >= this.interval) && this.host.sampler.sync) {
      const s = this.host.sampler.readNow(pid, now, true);
      const spares = this.sparePids().map((p) => this.host.sampler.readNow(p, now, true));
      this.set(s && { pid, sample: withSpares(s, spares) });
    }
    return this.parent?.pid === pid ? this.parent.sample.value : 0;
  }

  /**
   * The parent's pid and measure as value() last counted it, for status: a snapshot's
   * figures() has just counted it, and reading it again here could find a new sample
   * (the interval passed in between) that the pool's committed memory does not hold.
   */
  status(): { pid: number; memory: number; measure: string } | undefined {
    const p = this.parent;
    if (p === undefined || p.pid !== this.pid() || p.sample.value === 0) return undefined;
    return { pid: p.pid, memory: p.sample.value, measure: p.sample.measure };
  }

  /** The parent, while it is measured and the pool has no worker: the first thing to give back. */
  idleRef(workers: number): WorkerRef | undefined {
    const v = this.value();
    if (v === 0 || this.hooks.stopPreloadParent === undefined || workers > 0) return undefined;
    return { pool: this.pool, id: -1, pid: this.parent!.pid, charge: v, value: v, since: 0, parent: true };
  }

  /** Stops the parent `w` names for memory, when it still runs and the pool has no worker. True when it was stopped. */
  stop(w: WorkerRef, workers: number): boolean {
    const value = this.value();
    if (value === 0 || this.parent!.pid !== w.pid || workers > 0) return false;
    const exited = this.hooks.stopPreloadParent?.();
    if (exited === undefined) return false;
    this.parent = undefined;
    this.stopping += value;
    void exited.then(() => {
      this.stopping -= value;
      this.host.released();
    });
    return true;
  }
}

const NO_SPARES: readonly number[] = [];

/** The parent's sample with its spares' added (pages they share are split by PSS, so the sum is what they hold). */
function withSpares(s: MemorySample, spares: readonly (MemorySample | undefined)[]): MemorySample {
  let out = s;
  for (const spare of spares) {
    if (spare === undefined) continue;
    const pss = out.pss === undefined || spare.pss === undefined ? undefined : out.pss + spare.pss;
    const anon = out.anon === undefined || spare.anon === undefined ? undefined : out.anon + spare.anon;
    const rss = out.rss + spare.rss;
    out = { ...out, rss, pss, anon, value: pss ?? rss, measure: pss === undefined ? 'rss' : s.measure };
  }
  return out;
}
