/**
 * A preload pool's parent (fork-server.ts) as its pool's memory counts it: its pages are
 * the pool's too (its children share them copy-on-write; PSS splits them), so it is
 * measured with the workers and counts in memory_limit and the budget, with its spare
 * (the child it keeps forked ahead of need, not yet a worker) added to its measure. While the pool has
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
  /** The pid of the child the parent keeps forked ahead of need, while there is one. */
  preloadSpare?(): number | undefined;
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

  /** The parent's spare while there is one: a sampling round measures it with the parent. */
  sparePid(): number | undefined {
    return this.hooks.preloadSpare?.();
  }

  /** A sampling round's reading of `pid` (the pid() it was asked for) and of its spare. */
  keep(pid: number | undefined, s: MemorySample | undefined, spare?: MemorySample): void {
    this.set(pid !== undefined && s !== undefined ? { pid, sample: withSpare(s, spare) } : undefined);
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
      const sparePid = this.sparePid();
      const spare = sparePid === undefined ? undefined : this.host.sampler.readNow(sparePid, now, true);
      this.set(s && { pid, sample: withSpare(s, spare) });
    }
    return this.parent?.pid === pid ? this.parent.sample.value : 0;
  }

  /** The parent's pid and latest measure, for status. */
  status(): { pid: number; memory: number; measure: string } | undefined {
    if (this.value() === 0) return undefined;
    const p = this.parent!;
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

/** The parent's sample with its spare's added (pages the two share are split by PSS, so the sum is what they hold). */
function withSpare(s: MemorySample, spare: MemorySample | undefined): MemorySample {
  if (spare === undefined) return s;
  const pss = s.pss === undefined || spare.pss === undefined ? undefined : s.pss + spare.pss;
  const anon = s.anon === undefined || spare.anon === undefined ? undefined : s.anon + spare.anon;
  const rss = s.rss + spare.rss;
  return { ...s, rss, pss, anon, value: pss ?? rss, measure: pss === undefined ? 'rss' : s.measure };
}
