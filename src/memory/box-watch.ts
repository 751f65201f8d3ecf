/**
 * The box: the memory cgroup with a limit that fcgi-pm runs in (a container, a unit's
 * MemoryMax, a board's cgroup), watched so that the kernel's OOM killer never has to act.
 * What the kernel cannot reclaim (usage minus file pages, two small file reads,
 * cgroup-files.ts) is read before every spawn decision (room) and, while workers live,
 * every sample interval; every WATCH_FAST_MS while a worker is busy and the box, or a
 * pool's own cgroup, is above WATCH_SHARE of its limit. Past the limit minus its headroom
 * no worker is spawned and idle workers are retired. The watch runs for pools' own
 * cgroups (BudgetMember.watchTick) even outside a limited box. The host governor
 * (host-governor.ts) owns it and asks it for room.
 */
import type { Logger } from '../log/log.js';
import { locateMemoryCgroup, readCgroupUsed, readMemoryBox, type MemoryBox, type MemoryCgroup } from './cgroup-files.js';
import { formatBytes } from './format.js';
import { collectWorkers, idleName, planRelief } from './governor.js';
import type { BudgetMember, BudgetSnapshot, MemoryClock, WorkerRef } from './types.js';
import { ErrorCodes } from '../errors.js';

/** The box is re-read this often while a worker is busy and it is above WATCH_SHARE of its limit. */
export const WATCH_FAST_MS = 250;
export const WATCH_SHARE = 0.5;
export const MIN_BOX_HEADROOM = 4 * 1024 * 1024;

/** What stays free under a cgroup limit: a sixteenth of it, at least MIN_BOX_HEADROOM. */
export function boxHeadroom(limit: number): number {
  return Math.max(MIN_BOX_HEADROOM, Math.floor(limit / 16));
}

/** The memory cgroup fcgi-pm runs in and the tightest limit on it, read now. */
export function readBox(): { cgroup: MemoryCgroup | undefined; box: MemoryBox | undefined } {
  const cgroup = locateMemoryCgroup();
  return { cgroup, box: cgroup && readMemoryBox(cgroup) };
}

/** What the watch needs of the governor that owns it. */
export interface BoxWatchOwner {
  /** The pools, each with its part in the budget. */
  members(): Iterable<BudgetMember>;
  /** Each tick checks the budget too. */
  checkBudget(): void;
  /** The box is back under its headroom: pools waiting for memory may spawn. */
  retry(): void;
  /** A worker retired to get the box back under its headroom (counted in the governor's evictions). */
  evicted(): void;
}

export class BoxWatch {
  private readonly owner: BoxWatchOwner;
  private readonly clock: MemoryClock;
  private readonly log: Logger;
  private readonly sampleInterval: number;
  private box: MemoryBox | undefined;
  /** The cgroup that sets the box's limit: its usage is what the limit applies to. */
  private boxCg: MemoryCgroup | undefined;
  private handle: unknown;
  /** The watch runs at WATCH_FAST_MS: busy workers are measured at each tick too. */
  private fast = false;
  private shedding = false;
  private disposed = false;

  constructor(owner: BoxWatchOwner, box: MemoryBox | undefined, clock: MemoryClock, log: Logger, sampleInterval: number) {
    this.owner = owner;
    this.clock = clock;
    this.log = log;
    this.sampleInterval = sampleInterval;
    this.setBox(box);
  }

  /** The box's limit, or undefined outside a limited cgroup. */
  get limit(): number | undefined {
    return this.box?.limit;
  }

  /** On reload: the box read again. */
  setBox(box: MemoryBox | undefined): void {
    this.box = box;
    this.boxCg = box && { ...box.cgroup, dir: box.limitDir };
  }

  /** What the box can still take before its headroom, read now; undefined outside a limited cgroup. */
  room(): number | undefined {
    const box = this.box;
    if (box === undefined) return undefined;
    const used = readCgroupUsed(this.boxCg!);
    return used === undefined ? undefined : box.limit - boxHeadroom(box.limit) - used;
  }

  /** For the budget snapshot: where the limit is set, the limit, the headroom kept, what the kernel cannot reclaim now. */
  snapshot(): BudgetSnapshot['cgroup'] {
    const box = this.box;
    return box === undefined ? undefined : { dir: box.limitDir, limit: box.limit, headroom: boxHeadroom(box.limit), used: readCgroupUsed(this.boxCg!) };
  }

  /** Keeps the watch running while any pool has a worker (inside a limited cgroup, or for pool cgroups). */
  start(): void {
    if (this.handle !== undefined || this.disposed) return;
    if (this.box === undefined && ![...this.owner.members()].some((m) => m.hasCgroup())) return;
    this.handle = this.clock.setTimer(() => this.tick(), WATCH_FAST_MS);
  }

  dispose(): void {
    this.disposed = true;
    if (this.handle !== undefined) this.clock.clearTimer(this.handle);
    this.handle = undefined;
  }

  private tick(): void {
    this.handle = undefined;
    if (this.disposed) return;
    let poolsFull = false;
    for (const o of this.owner.members()) if (o.watchTick(WATCH_SHARE, this.fast)) poolsFull = true;
    this.owner.checkBudget();
    const box = this.box;
    const room = this.room();
    const idle: WorkerRef[] = [];
    const owners = new Map<WorkerRef, BudgetMember>();
    let live = 0;
    let busy = 0;
    for (const o of this.owner.members()) {
      live += o.workerCount();
      busy += o.busyWorkers().length;
      collectWorkers(o, o.idleWorkers(), idle, owners);
    }
    if (box !== undefined && room !== undefined && room < 0) {
      const victims = planRelief(-room, idle, []);
      if (!this.shedding || victims.length > 0) {
        const used = box.limit - boxHeadroom(box.limit) - room;
        const fields = { limit: box.limit, cgroup: box.limitDir, used, headroom: boxHeadroom(box.limit), busy, idle: idle.length };
        this.log.warn({ code: ErrorCodes.MEMORY_BOX_FULL, ...fields }, `memory cgroup ${box.limitDir} holds ${formatBytes(used)} of its ${formatBytes(box.limit)} limit, inside the ${formatBytes(boxHeadroom(box.limit))} headroom: ` +
          (victims.length > 0 ? `retiring ${victims.length} idle worker(s) and` : 'no idle worker to retire;') + ' spawning nothing until it is back under');
      }
      this.shedding = true;
      for (const v of victims) {
        this.owner.evicted();
        owners.get(v)?.evict(v, 'memory_budget', { victimPool: v.pool, victimPid: v.pid, value: v.value }, `retiring ${idleName(v)}: the memory cgroup is near its limit`);
      }
    } else if (this.shedding) {
      this.shedding = false;
      this.owner.retry();
    }
    if (live === 0) {
      this.fast = false;
      return;
    }
    const used = box === undefined || room === undefined ? 0 : box.limit - boxHeadroom(box.limit) - room;
    this.fast = busy > 0 && (poolsFull || (box !== undefined && used > box.limit * WATCH_SHARE));
    this.handle = this.clock.setTimer(() => this.tick(), this.fast ? WATCH_FAST_MS : this.sampleInterval);
  }
}
