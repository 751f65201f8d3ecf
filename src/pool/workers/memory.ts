/**
 * A spawned pool's part in the memory governor (docs/memory.md), in rooms:
 * spawn admission (memory-admission.ts: the host governor asked before every spawn),
 * caps and sampling (memory-caps.ts: max_memory, max_memory_hard, memory_limit), the
 * worker-size estimate (memory-estimate.ts), the preload parent's share
 * (memory-parent.ts), and the glue to the kernel (memory-placement.ts: the pool's memory
 * cgroup and oom_score_adj; one worker's samples are worker-memory.ts). This class joins
 * them for the pool and answers the governor's questions about the pool (BudgetMember).
 *
 * The pool calls: spawned / started / ready / exited / wentIdle (bookkeeping), admit
 * (before spawning), afterRequest (re-measures a worker near a cap, or after its first
 * request, right after it), fill (snapshot), removeCgroup (stopped). It carries out
 * what this decides through PoolMemoryHooks.
 *
 * A worker killed by SIGKILL while the pool's cgroup's (or fcgi-pm's own) OOM-kill
 * counter rose was killed by the kernel: logged ERR_WORKER_OOM_KILLED, its request
 * answered 503.
 */
import type { PoolConfig } from '../../config/types.js';
import { ErrorCodes } from '../../errors.js';
import type { Logger } from '../../log/log.js';
import { formatBytes } from '../../memory/format.js';
import { chargeOf, idleName, planRelief, type WorkerCaps } from '../../memory/governor.js';
import { boxHeadroom } from '../../memory/box-watch.js';
import type { MemoryGovernor } from '../../memory/host-governor.js';
import { DEFAULT_CPU_WEIGHT } from '../../memory/cpu-cgroup.js';
import { WORKER_OOM_SCORE_ADJ } from '../../memory/oom-score.js';
import type { PoolCgroup } from '../../memory/pool-cgroup.js';
import type { BudgetMember, PoolMemoryFigures, WorkerRef } from '../../memory/types.js';
import type { RetireReason } from '../../worker/types.js';
import type { Clock } from '../../util/clock.js';
import { scriptOf, type SlotView } from './slot.js';
import { SpawnAdmission } from './memory-admission.js';
import { MemoryCaps, type MemoryCapsHooks } from './memory-caps.js';
import { PoolEstimate } from './memory-estimate.js';
import { PreloadParentMemory, type PreloadParentHooks } from './memory-parent.js';
import { WorkerPlacement } from './memory-placement.js';
import { DEFAULT_BUSY_CPU_SLICE_MS } from './busy-slice.js';
import { FiguresRevision, WorkerMemory } from './worker-memory.js';
import type { PoolSnapshot } from '../types.js';

/** What the memory part asks of its pool. */
export interface PoolMemoryHooks extends MemoryCapsHooks, PreloadParentHooks {}

export class PoolMemory implements BudgetMember {
  readonly name: string;
  readonly interval: number;
  private cfg: PoolConfig;
  private readonly host: MemoryGovernor;
  private readonly hooks: PoolMemoryHooks;
  private readonly log: Logger;
  private readonly caps: WorkerCaps;
  private readonly limit: number;
  private readonly est: PoolEstimate;
  private readonly parent: PreloadParentMemory;
  private readonly admission: SpawnAdmission;
  private readonly sampling: MemoryCaps;
  /** Where its workers run: the pool's memory cgroup and their oom_score_adj (memory-placement.ts). */
  private readonly placement: WorkerPlacement;
  private readonly cgroup: PoolCgroup | undefined;
  oomKills = 0;
  evicted = 0;

  constructor(cfg: PoolConfig, host: MemoryGovernor, hooks: PoolMemoryHooks, clock: Clock, log: Logger, private readonly revision = new FiguresRevision()) {
    this.name = cfg.name;
    this.cfg = cfg;
    this.host = host;
    this.hooks = hooks;
    this.log = log;
    this.caps = { soft: cfg.maxMemory ?? 0, hard: cfg.maxMemoryHard ?? 0 };
    this.limit = cfg.memoryLimit ?? 0;
    this.interval = cfg.memorySampleInterval ?? host.sampleInterval;
    this.est = new PoolEstimate(cfg);
    this.parent = new PreloadParentMemory(cfg.name, host, hooks, clock, this.interval, revision);
    this.placement = new WorkerPlacement(cfg.name, this.limit, cfg.oomScoreAdj ?? WORKER_OOM_SCORE_ADJ, cfg.cpuWeight ?? DEFAULT_CPU_WEIGHT, cfg.busyCpuSlice ?? DEFAULT_BUSY_CPU_SLICE_MS, host, log);
    this.cgroup = this.placement.cgroup;
    const slots = (): Iterable<SlotView> => hooks.slots();
    const queued = (): number => hooks.queued();
    this.admission = new SpawnAdmission({ member: this, host, estimate: this.est, placement: this.placement, limit: this.limit, slots, queued, clock, log });
    this.sampling = new MemoryCaps({ member: this, host, estimate: this.est, parent: this.parent, hooks, caps: this.caps, limit: this.limit, interval: this.interval, clock, log });
    host.join(this);
  }

  // ---- what the pool calls ------------------------------------------------------------

  /** A worker was spawned: its samples' record (the supervisor keeps it on the slot). */
  spawned(): WorkerMemory {
    this.sampling.spawned();
    return new WorkerMemory(this.revision);
  }

  /** A reload changed the pool's scaling keys in place (Supervisor.retune). */
  retune(next: PoolConfig): void {
    this.cfg = next;
  }

  /** The process started (not yet ready): into the pool's cgroup, and its oom_score_adj, before it can serve. */
  started(pid: number): void {
    this.placement.place(pid);
  }

  /** busy_cpu_slice: the pool's requests wait (on) or no longer do (off); busy-slice.ts decides. */
  busySlice(on: boolean): void {
    const pids: number[] = [];
    for (const slot of this.hooks.slots()) if (slot.pid !== undefined) pids.push(slot.pid);
    this.placement.setBusySlice(on, pids);
  }

  /** Ready: measured at once, so its charge is what it is rather than the guess. */
  ready(slot: SlotView): void {
    this.sampling.ready(slot);
  }

  /** Removes the pool's cgroup once its workers are gone. */
  removeCgroup(): void {
    this.placement.remove();
  }

  exited(slot: SlotView): void {
    const m = slot.mem;
    if (m !== undefined && this.placement.oomKilled(slot.exit)) {
      m.oomKilled = true;
      this.oomKills++;
      const ex = slot.current;
      const where = this.cgroup !== undefined ? `its pool's memory cgroup (limit ${formatBytes(this.limit)})` : `fcgi-pm's memory cgroup`;
      this.log.error({ code: ErrorCodes.WORKER_OOM_KILLED, wpid: slot.pid, cgroup: this.cgroup?.cg.dir, peak: m.peak, requests: slot.requests, uri: ex?.params.get('REQUEST_URI'), oomKills: this.oomKills },
        `worker ${slot.pid} of pool ${this.name} was killed by the kernel's OOM killer in ${where}` + (ex !== undefined ? `; its request to ${scriptOf(ex)} gets 503 ${ErrorCodes.WORKER_OOM_KILLED}` : ''));
    }
    this.est.exited(slot);
    if (slot.pid !== undefined) this.host.sampler.forget(slot.pid);
    this.est.update(this.hooks.slots());
    this.host.released();
  }

  wentIdle(): void {
    this.host.wentIdle(this);
  }

  /** How many of `want` spawns memory allows; `demand` of them are for queued requests (memory-admission.ts). */
  admit(want: number, demand: number): number {
    return this.admission.admit(want, demand);
  }

  /** After a request: re-measured near a cap or after its first request (memory-caps.ts). True when it was recycled or killed. */
  afterRequest(slot: SlotView): boolean {
    return this.sampling.afterRequest(slot);
  }

  fill(s: PoolSnapshot): void {
    s.memory = this.figures();
    s.cpu = this.placement.cpuView();
  }

  /** The preload parent's pid and measure as the last figures() counted it, for status (after fill()). */
  preloadParent(): { pid: number; memory: number; measure: string } | undefined {
    return this.parent.status();
  }

  dispose(): void {
    this.sampling.dispose();
    this.host.leave(this);
  }

  // ---- BudgetMember -------------------------------------------------------------------

  committed(): number {
    let sum = this.parent.value() + this.parent.stopping;
    for (const slot of this.hooks.slots()) sum += chargeOf(heldBy(slot), this.est.bytes);
    return sum;
  }

  measured(): number {
    let sum = this.parent.value() + this.parent.stopping;
    for (const slot of this.hooks.slots()) sum += heldBy(slot) ?? 0;
    return sum;
  }

  freeing(): number {
    let sum = this.parent.stopping;
    for (const slot of this.hooks.slots()) if (retiring(slot)) sum += chargeOf(heldBy(slot), this.est.bytes);
    return sum;
  }

  freeingMeasured(): number {
    let sum = this.parent.stopping;
    for (const slot of this.hooks.slots()) if (retiring(slot)) sum += heldBy(slot) ?? 0;
    return sum;
  }

  estimate(): number {
    return this.est.bytes;
  }

  workerCount(): number {
    let n = 0;
    for (const _ of this.hooks.slots()) n++;
    return n;
  }

  leavingCount(): number {
    let n = 0;
    for (const slot of this.hooks.slots()) if (retiring(slot)) n++;
    return n;
  }

  floor(): number {
    const keep = this.cfg.pm === 'static' ? this.cfg.maxChildren : this.cfg.pm === 'dynamic' ? this.cfg.minSpare : 0;
    return keep * this.est.bytes;
  }

  idleWorkers(): WorkerRef[] {
    const out: WorkerRef[] = [];
    const parent = this.parent.idleRef(this.workerCount());
    if (parent !== undefined) out.push(parent);
    for (const slot of this.hooks.slots()) if (slot.inIdle && slot.workerState === 'idle') out.push(this.ref(slot, slot.idleSince));
    return out;
  }

  busyWorkers(): WorkerRef[] {
    const out: WorkerRef[] = [];
    for (const slot of this.hooks.slots()) if (slot.workerState === 'busy') out.push(this.ref(slot, slot.busySince));
    return out;
  }

  evict(w: WorkerRef, reason: RetireReason, fields: Record<string, unknown>, msg: string): void {
    if (w.parent) {
      if (!this.parent.stop(w, this.workerCount())) return;
      this.evicted++;
      this.log.info({ code: ErrorCodes.PRELOAD_PARENT_EVICTED, wpid: w.pid, reason, ...fields, evicted: this.evicted }, msg);
      return;
    }
    for (const slot of this.hooks.slots()) {
      if (slot.worker.id !== w.id) continue;
      const st = slot.workerState;
      if (st !== 'idle' && st !== 'busy') return;
      this.evicted++;
      this.hooks.retire(slot, reason, fields, msg);
      return;
    }
  }

  retry(): void {
    this.hooks.scale();
  }

  hasCgroup(): boolean {
    return this.cgroup !== undefined;
  }

  watchTick(share: number, measureBusy: boolean): boolean {
    if (measureBusy) this.sampling.measureBusy();
    const cg = this.cgroup;
    const room = this.placement.room();
    if (cg === undefined || room === undefined) return false;
    if (room < 0) {
      for (const v of planRelief(-room, this.idleWorkers(), [])) {
        this.evict(v, 'memory_budget', { cgroup: cg.cg.dir, memoryLimit: cg.limit, victimPid: v.pid, value: v.value },
          `pool ${this.name}: its memory cgroup is within ${formatBytes(boxHeadroom(cg.limit))} of its ${formatBytes(cg.limit)} limit: retiring ${idleName(v)}`);
      }
    }
    return cg.limit - boxHeadroom(cg.limit) - room > cg.limit * share;
  }

  hasDemand(): boolean {
    return this.hooks.queued() > 0;
  }

  figures(): PoolMemoryFigures {
    // The preload parent's pages are the pool's too (its children share them copy-on-write; PSS splits them).
    let total = this.parent.value() + this.parent.stopping;
    let committed = total;
    let sampled = 0;
    let pss = 0;
    for (const slot of this.hooks.slots()) {
      const v = slot.mem?.last;
      const held = heldBy(slot);
      committed += chargeOf(held, this.est.bytes);
      if (v === undefined || held === undefined) continue;
      total += held;
      sampled++;
      if (v.measure === 'pss') pss++;
    }
    return {
      measure: sampled === 0 ? this.host.sampler.measure : pss === sampled ? 'pss' : 'rss',
      total,
      committed,
      limit: this.limit > 0 ? this.limit : undefined,
      estimate: this.est.bytes,
      estimateSource: this.est.source,
      maxMemory: this.caps.soft > 0 ? this.caps.soft : undefined,
      maxMemoryHard: this.caps.hard > 0 ? this.caps.hard : undefined,
      sampleInterval: this.interval,
      recommendedMaxChildren: this.host.recommend(this, this.est.bytes, this.limit),
      refusedSpawns: this.admission.refused,
      recycled: this.sampling.recycled,
      killed: this.sampling.killed,
      evicted: this.evicted,
      waitingForBudget: this.host.isWaiting(this),
    };
  }

  private ref(slot: SlotView, since: number): WorkerRef {
    const value = heldBy(slot);
    return { pool: this.name, id: slot.worker.id, pid: slot.pid, charge: chargeOf(value, this.est.bytes), value, since };
  }
}

function retiring(slot: SlotView): boolean {
  const st = slot.workerState;
  return st === 'draining' || st === 'stopping';
}

/**
 * What a worker holds: its latest sample and, for a php-cgi group, its children's (groups.ts
 * samples them every round; PSS splits the pages they share with their parent, so the sum is
 * what the group holds).
 */
function heldBy(slot: SlotView): number | undefined {
  const own = slot.mem?.last?.value;
  if (own === undefined || slot.children === undefined) return own;
  let sum = own;
  for (const m of slot.children.values()) sum += m.last?.value ?? 0;
  return sum;
}
