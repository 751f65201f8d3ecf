/**
 * The children of php-cgi groups (group_size k): one parent with PHP_FCGI_CHILDREN=k
 * forks k children that accept on the worker's socket and replaces any that exits. The
 * pool cannot tell which child runs which request, but it sees each child (pids from
 * /proc, src/worker/children.ts), measures each every memory_sample_interval, and
 * applies the per-process caps to each: over max_memory_hard a child gets SIGKILL now
 * (the request it runs, if any, ends 502); over max_memory it gets SIGTERM as soon as
 * its group runs no request. The parent forks the replacement. The group as a whole is
 * recycled by the supervisor (max_requests, max_lifetime, idle stops).
 */
import { ErrorCodes } from '../../errors.js';
import type { Logger } from '../../log/log.js';
import type { PoolConfig } from '../../config/types.js';
import { formatBytes } from '../../memory/format.js';
import { checkWorker, type WorkerCaps } from '../../memory/governor.js';
import type { MemoryGovernor } from '../../memory/host-governor.js';
import type { MemorySample } from '../../memory/types.js';
import { childrenOf } from '../../worker/children.js';
import { OneTimer, type Clock } from '../../util/clock.js';
import { signalChildOf } from './hard-kill.js';
import { WorkerMemory, type FiguresRevision } from './worker-memory.js';
import type { SlotView } from './slot.js';
import type { PoolStats } from '../stats.js';

export interface GroupChildrenDeps {
  host: MemoryGovernor | undefined;
  clock: Clock;
  log: Logger;
  stats: PoolStats;
  /** Live groups. */
  groups(): Iterable<SlotView>;
  /** Children of a parent pid (tests give a fake /proc). */
  list?: (pid: number) => number[];
  signal?: (parent: number, pid: number, sig: NodeJS.Signals) => boolean;
  /** Moves when a group's children or their shown memory change (SpawnedPool.idleRevision). */
  revision?: FiguresRevision;
}

export class GroupChildren {
  private readonly deps: GroupChildrenDeps;
  private readonly caps: WorkerCaps;
  private readonly interval: number;
  private readonly timer: OneTimer;
  private readonly list: (pid: number) => number[];
  private readonly signal: (parent: number, pid: number, sig: NodeJS.Signals) => boolean;
  /** Children over max_memory, waiting for their group to run no request. */
  private readonly marked = new Set<number>();
  private sampling = false;
  private disposed = false;

  constructor(cfg: PoolConfig, deps: GroupChildrenDeps) {
    this.deps = deps;
    this.caps = { soft: cfg.maxMemory ?? 0, hard: cfg.maxMemoryHard ?? 0 };
    this.interval = cfg.memorySampleInterval ?? deps.host?.sampleInterval ?? 0;
    this.timer = new OneTimer(deps.clock, () => this.round());
    this.list = deps.list ?? childrenOf;
    this.signal = deps.signal ?? signalChildOf;
  }

  /** A group became ready: sampling runs while there is one. */
  started(): void {
    if (this.deps.host !== undefined && this.interval > 0 && !this.disposed) this.timer.armAt(this.deps.clock.now() + this.interval);
  }

  /** The group runs no request now: children marked over max_memory go. */
  idle(slot: SlotView): void {
    const parent = slot.pid;
    if (parent === undefined || slot.children === undefined) return;
    for (const pid of slot.children.keys()) {
      if (slot.busy > 0) return;
      if (this.marked.has(pid)) this.stop(slot, parent, pid, 'memory', 'SIGTERM');
    }
  }

  /** Refreshes the group's children (pids), dropping those that went. */
  refresh(slot: SlotView): number[] {
    const parent = slot.pid;
    if (parent === undefined || slot.exit !== undefined) return [];
    const pids = this.list(parent);
    const kids = slot.children;
    if (kids === undefined) return [];
    const rev = this.deps.revision;
    for (const pid of kids.keys()) {
      if (pids.includes(pid)) continue;
      if (rev !== undefined) rev.n++;
      kids.delete(pid);
      this.marked.delete(pid);
      this.deps.host?.sampler.forget(pid);
    }
    for (const pid of pids) {
      if (kids.has(pid)) continue;
      if (rev !== undefined) rev.n++;
      kids.set(pid, new WorkerMemory(rev));
    }
    return pids;
  }

  dispose(): void {
    this.disposed = true;
    this.timer.cancel();
  }

  private round(): void {
    const host = this.deps.host;
    if (this.disposed || this.sampling || host === undefined) return;
    const groups = [...this.deps.groups()].filter((s) => s.state === 'up' || s.state === 'retiring');
    if (groups.length === 0) return; // the next ready group starts it again
    const all: number[] = [];
    for (const slot of groups) all.push(...this.refresh(slot));
    this.sampling = true;
    void host.sampler
      .read(all, this.deps.clock.now())
      .then((got) => {
        for (const slot of groups) {
          if (slot.exit !== undefined || slot.children === undefined) continue;
          for (const [pid, m] of slot.children) {
            const s = got.get(pid);
            if (s !== undefined) this.apply(slot, pid, m, s);
          }
          if (slot.busy === 0) this.idle(slot);
        }
      })
      .catch((err: unknown) => this.deps.log.debug({ err }, 'group memory sampling failed'))
      .finally(() => {
        this.sampling = false;
        if (!this.disposed) this.timer.armAt(this.deps.clock.now() + this.interval);
      });
  }

  private apply(slot: SlotView, pid: number, m: WorkerMemory, s: MemorySample): void {
    m.record(s);
    const verdict = checkWorker(s.value, this.caps);
    const fields = { wpid: slot.pid, child: pid, value: s.value, measure: s.measure, pss: s.pss, rss: s.rss };
    if (verdict === 'hard') {
      this.deps.log.warn({ code: ErrorCodes.MEMORY_HARD_LIMIT, ...fields, maxMemoryHard: this.caps.hard },
        `child ${pid} of group ${slot.pid} uses ${formatBytes(s.value)} (${s.measure}), over max_memory_hard ${formatBytes(this.caps.hard)}: killing it now; its parent forks a new one`);
      this.stop(slot, slot.pid!, pid, 'memory_hard', 'SIGKILL');
    } else if (verdict === 'soft' && !this.marked.has(pid)) {
      // Marked: it goes when the group runs no request (which child runs one is unknown).
      this.marked.add(pid);
      this.deps.log.info({ ...fields, maxMemory: this.caps.soft },
        `child ${pid} of group ${slot.pid} uses ${formatBytes(s.value)} (${s.measure}), over max_memory ${formatBytes(this.caps.soft)}: replacing it when its group is idle`);
    }
  }

  private stop(slot: SlotView, parent: number, pid: number, reason: 'memory' | 'memory_hard', sig: NodeJS.Signals): void {
    this.marked.delete(pid);
    if (!this.signal(parent, pid, sig)) return;
    this.deps.stats.recycled(reason);
    slot.children?.delete(pid);
  }
}
