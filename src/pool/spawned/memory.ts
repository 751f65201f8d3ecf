/**
 * A spawned pool's part in the memory governor (docs/memory.md): samples its workers
 * every memory_sample_interval while it has any, applies max_memory (recycle after the
 * request), max_memory_hard (kill now, 503) and memory_limit (no spawn past it; idle
 * workers go first when measured use is over it), asks the host governor before every
 * spawn, and answers the governor's questions about this pool (BudgetMember).
 *
 * The pool calls: spawned / started / ready / exited / wentIdle (bookkeeping), admit
 * (before spawning), afterRequest (re-measures a worker near a cap, or after its first
 * request, right after it), fill (snapshot), removeCgroup (stopped). It carries out
 * what this decides through PoolMemoryHooks.
 *
 * A pool with no worker measured yet plans new ones at expected_worker_memory, a guess;
 * when that does not fit, one worker may still start if MIN_WORKER_MEMORY does (the
 * governor's probe), is measured when ready and after its first request, and the
 * pool's estimate is then what it measured. Estimates are not kept between runs.
 *
 * Each started worker gets oom_score_adj; with memory_limit and a cgroup fcgi-pm may
 * create, it goes into the pool's own memory cgroup, where the kernel enforces
 * memory_limit (memory-placement.ts, the glue to the kernel; one worker's samples are
 * worker-memory.ts). A worker killed by SIGKILL while that cgroup's (or fcgi-pm's
 * own) OOM-kill counter rose was killed by the kernel: logged ERR_WORKER_OOM_KILLED,
 * its request answered 503.
 */
import type { PoolConfig } from '../../config/types.js';
import { ErrorCodes } from '../../errors.js';
import type { Logger } from '../../log/log.js';
import { estimateWorker, PeakHistory, type Estimate } from '../../memory/estimate.js';
import { formatBytes } from '../../memory/format.js';
import { checkWorker, chargeOf, fitCount, idleName, planRelief, type WorkerCaps } from '../../memory/governor.js';
import { boxHeadroom, type MemoryGovernor } from '../../memory/host-governor.js';
import { WORKER_OOM_SCORE_ADJ } from '../../memory/oom-score.js';
import type { PoolCgroup } from '../../memory/pool-cgroup.js';
import type { BudgetMember, MemorySample, PoolMemoryFigures, WorkerRef } from '../../memory/types.js';
import type { RetireReason } from '../../worker/types.js';
import { OneTimer, type Clock } from '../../util/clock.js';
import { scriptOf, type Slot } from './slot.js';
import { WorkerPlacement } from './memory-placement.js';
import { WorkerMemory } from './worker-memory.js';
import type { PoolSnapshot } from '../types.js';

/** One refused-spawn line per this many ms per pool; the rest are counted into the next. */
const REFUSAL_LOG_INTERVAL_MS = 1000;

/** The smallest plausible worker (a php-cgi worker measures about 8 MiB, a shell loop less). */
export const MIN_WORKER_MEMORY = 4 * 1024 * 1024;
/**
 * While its estimate rests on fewer workers than this and is below expected_worker_memory,
 * the pool starts one worker at a time, each after the previous one served a request:
 * one small first request (a health check) must not teach it that every worker is small
 * and let it start eight at once.
 */
export const LEARN_WORKERS = 3;

/** What the memory part asks of its pool. */
export interface PoolMemoryHooks {
  /** Live workers (spawned, not yet exited). */
  slots(): Iterable<Slot>;
  /** Retires a worker (busy ones after their request), logging `msg` with `fields` as its one line. */
  retire(slot: Slot, reason: RetireReason, fields: Record<string, unknown>, msg: string): void;
  /** Stops a worker now with SIGKILL; a request it runs is answered 503 MEMORY_HARD_LIMIT. Logs `msg` at warn. */
  kill(slot: Slot, fields: Record<string, unknown>, msg: string): void;
  /** Spawns what waiting requests need. */
  scale(): void;
  queued(): number;
  /** preload: the parent's pid; it is measured with the workers and counts in memory_limit and the budget. */
  preloadParent?(): number | undefined;
  /** preload: stops the parent now if it has no worker and no fork pending; resolves once it exited (undefined: nothing stopped). */
  stopPreloadParent?(): Promise<void> | undefined;
}

export class PoolMemory implements BudgetMember {
  readonly name: string;
  readonly interval: number;
  private readonly cfg: PoolConfig;
  private readonly host: MemoryGovernor;
  private readonly hooks: PoolMemoryHooks;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly caps: WorkerCaps;
  private readonly limit: number;
  private readonly history = new PeakHistory();
  private readonly timer: OneTimer;
  private est: Estimate;
  /** How many workers the estimate rests on (exited ones in the history, live ones that served). */
  private learnedFrom = 0;
  private sampling = false;
  private disposed = false;
  /** preload: the parent's latest sample (undefined: none runs, or not measured yet). */
  private parent: { pid: number; sample: MemorySample } | undefined;
  /** Parents stopped for memory that have not exited yet: still counted, and freeing. */
  private parentsStopping = 0;
  private refusalLog = { at: -Infinity, suppressed: 0 };
  private warnedFresh = false;
  /** Spare (non-demand) spawns are being refused: said once, until a spawn is admitted again. */
  private refusingSpares = false;
  /** Where its workers run: the pool's memory cgroup and their oom_score_adj (memory-placement.ts). */
  private readonly placement: WorkerPlacement;
  private readonly cgroup: PoolCgroup | undefined;
  refused = 0;
  oomKills = 0;
  recycled = 0;
  killed = 0;
  evicted = 0;

  constructor(cfg: PoolConfig, host: MemoryGovernor, hooks: PoolMemoryHooks, clock: Clock, log: Logger) {
    this.name = cfg.name;
    this.cfg = cfg;
    this.host = host;
    this.hooks = hooks;
    this.clock = clock;
    this.log = log;
    this.caps = { soft: cfg.maxMemory ?? 0, hard: cfg.maxMemoryHard ?? 0 };
    this.limit = cfg.memoryLimit ?? 0;
    this.interval = cfg.memorySampleInterval ?? host.sampleInterval;
    this.est = { bytes: cfg.expectedWorkerMemory ?? 32 * 1024 * 1024, source: 'configured' };
    this.timer = new OneTimer(clock, () => this.round());
    this.placement = new WorkerPlacement(cfg.name, this.limit, cfg.oomScoreAdj ?? WORKER_OOM_SCORE_ADJ, host, log);
    this.cgroup = this.placement.cgroup;
    host.join(this);
  }


  // ---- what the pool calls ------------------------------------------------------------

  spawned(slot: Slot): void {
    slot.mem = new WorkerMemory();
    if (!this.timer.armed && !this.disposed) this.timer.armAt(this.clock.now() + this.interval);
  }

  /** The process started (not yet ready): into the pool's cgroup, and its oom_score_adj, before it can serve. */
  started(pid: number): void {
    this.placement.place(pid);
  }

  /** Ready: measured at once, so its charge is what it is rather than the guess. */
  ready(slot: Slot): void {
    const pid = slot.pid;
    if (pid === undefined || slot.mem === undefined || !this.host.sampler.sync) return;
    const s = this.host.sampler.readNow(pid, this.clock.now(), true);
    if (s !== undefined) slot.mem.recordFresh(s);
  }

  /** Removes the pool's cgroup once its workers are gone. */
  removeCgroup(): void {
    this.placement.remove();
  }

  exited(slot: Slot): void {
    const m = slot.mem;
    if (m !== undefined && this.placement.oomKilled(slot.exit)) {
      m.oomKilled = true;
      this.oomKills++;
      const ex = slot.current;
      const where = this.cgroup !== undefined ? `its pool's memory cgroup (limit ${formatBytes(this.limit)})` : `fcgi-pm's memory cgroup`;
      this.log.error({ code: ErrorCodes.WORKER_OOM_KILLED, wpid: slot.pid, cgroup: this.cgroup?.cg.dir, peak: m.peak, requests: slot.requests, uri: ex?.params.get('REQUEST_URI'), oomKills: this.oomKills },
        `worker ${slot.pid} of pool ${this.name} was killed by the kernel's OOM killer in ${where}` + (ex !== undefined ? `; its request to ${scriptOf(ex)} gets 503 ${ErrorCodes.WORKER_OOM_KILLED}` : ''));
    }
    if (m !== undefined && m.peak > 0 && slot.requests > 0) this.history.record(m.peak);
    if (slot.pid !== undefined) this.host.sampler.forget(slot.pid);
    this.updateEstimate();
    this.host.released();
  }

  wentIdle(): void {
    this.host.wentIdle(this);
  }

  /** How many of `want` spawns memory allows; `demand` of them are for queued requests. */
  admit(want: number, demand: number): number {
    if (want <= 0) return 0;
    const committed = this.committed();
    const probe = this.est.source === 'configured' ? Math.min(MIN_WORKER_MEMORY, this.est.bytes) : undefined;
    const d = this.host.decide(this, { want, demand, estimate: this.est.bytes, committed, limit: this.limit, probe });
    let admit = d.admit;
    let limitedBy: string | undefined = d.limitedBy;
    let room = d.room;
    // Only where memory is capped can a wrong small estimate overcommit it.
    const capped = d.budget !== undefined || d.room !== undefined || this.limit > 0 || this.cgroup !== undefined;
    let held = 0;
    if (capped && this.learning() && admit > 0) {
      let unproven = 0;
      for (const slot of this.hooks.slots()) if (slot.requests === 0 || (slot.requests === 1 && slot.workerState === 'busy')) unproven++;
      const learning = Math.max(0, 1 - unproven);
      if (learning < admit) {
        // Not a refusal: the next one starts once this one has shown its size.
        this.logLearning(admit, learning);
        held = admit - learning;
        admit = learning;
      }
    }
    // The kernel charges the pool's cgroup more than the PSS it is planned at (whole shared pages, page tables).
    const cgRoom = this.placement.room();
    if (cgRoom !== undefined) {
      let fit = fitCount(cgRoom, this.est.bytes);
      if (fit === 0 && probe !== undefined && this.workerCount() === 0 && cgRoom >= probe) fit = 1;
      if (fit < admit) [admit, limitedBy, room] = [fit, 'pool_cgroup', cgRoom];
    }
    if (admit + held < want) {
      this.refused += want - admit - held;
      this.logRefusal(want, admit, admit < demand, limitedBy, committed, d.evict.length + d.retire.length, d.covered, d.hostCommitted, room);
    } else {
      this.refusingSpares = false;
    }
    return admit;
  }

  /** Measured from too few workers, and smaller than the configured guess: trust it one worker at a time. */
  private learning(): boolean {
    return this.est.source === 'measured' && this.learnedFrom < LEARN_WORKERS && this.est.bytes < (this.cfg.expectedWorkerMemory ?? Infinity);
  }

  /** One debug line per learning spawn held back. */
  private logLearning(wanted: number, admitted: number): void {
    this.log.debug({ wanted, admitted, learnedFrom: this.learnedFrom, estimate: this.est.bytes },
      `pool ${this.name}: starting ${admitted} of ${wanted} worker(s) while its worker size is learnt (${this.learnedFrom} of ${LEARN_WORKERS} measured)`);
  }


  /**
   * After a request: a worker near a cap, or after its first request, is measured again
   * now (the first one teaches the pool its real worker size). True when it was
   * recycled or killed.
   */
  afterRequest(slot: Slot): boolean {
    const m = slot.mem;
    const pid = slot.pid;
    const first = slot.requests === 1;
    if (m === undefined || (!m.near && !first) || pid === undefined || !this.host.sampler.sync) return false;
    const s = this.host.sampler.readNow(pid, this.clock.now(), true);
    if (s === undefined) return false;
    this.record(slot, s);
    if (first) {
      const before = this.est.bytes;
      const learning = this.learning() || this.est.source === 'configured';
      this.updateEstimate();
      // Smaller than planned, or one more learnt: spawns that waited may start now (not from inside the pool's handler).
      if (this.est.bytes < before) this.host.released();
      if (learning && this.hooks.queued() > 0) this.clock.setTimer(() => this.hooks.scale(), 0);
    }
    return this.enforce(slot, s);
  }

  fill(s: PoolSnapshot): void {
    s.memory = this.figures();
  }

  dispose(): void {
    this.disposed = true;
    this.timer.cancel();
    this.host.leave(this);
  }

  // ---- BudgetMember -------------------------------------------------------------------

  committed(): number {
    let sum = this.parentValue() + this.parentsStopping;
    for (const slot of this.hooks.slots()) sum += chargeOf(slot.mem?.last?.value, this.est.bytes);
    return sum;
  }

  measured(): number {
    let sum = this.parentValue() + this.parentsStopping;
    for (const slot of this.hooks.slots()) sum += slot.mem?.last?.value ?? 0;
    return sum;
  }

  /**
   * The preload parent's latest measure, while it is the one running (0 without). With no
   * worker no sampling round runs: a parent not measured yet (a reload renewed it) or
   * measured longer than a sample interval ago (while it was importing) is measured now.
   */
  private parentValue(): number {
    const pid = this.hooks.preloadParent?.();
    if (pid === undefined) return 0;
    const now = this.clock.now();
    if ((this.parent?.pid !== pid || now - this.parent.sample.at >= this.interval) && this.host.sampler.sync) {
      const s = this.host.sampler.readNow(pid, now, true);
      this.parent = s && { pid, sample: s };
    }
    return this.parent?.pid === pid ? this.parent.sample.value : 0;
  }

  /** The preload parent's pid and latest measure, for status. */
  preloadParent(): { pid: number; memory: number; measure: string } | undefined {
    if (this.parentValue() === 0) return undefined;
    const p = this.parent!;
    return { pid: p.pid, memory: p.sample.value, measure: p.sample.measure };
  }

  freeing(): number {
    let sum = this.parentsStopping;
    for (const slot of this.hooks.slots()) if (retiring(slot)) sum += chargeOf(slot.mem?.last?.value, this.est.bytes);
    return sum;
  }

  freeingMeasured(): number {
    let sum = this.parentsStopping;
    for (const slot of this.hooks.slots()) if (retiring(slot)) sum += slot.mem?.last?.value ?? 0;
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

  floor(): number {
    const keep = this.cfg.pm === 'static' ? this.cfg.maxChildren : this.cfg.pm === 'dynamic' ? this.cfg.minSpare : 0;
    return keep * this.est.bytes;
  }

  idleWorkers(): WorkerRef[] {
    const out: WorkerRef[] = [];
    const parent = this.idleParent();
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
    if (w.parent) return this.evictParent(w, reason, fields, msg);
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

  /** The preload parent, while it is measured and the pool has no worker: the first thing to give back. */
  private idleParent(): WorkerRef | undefined {
    const v = this.parentValue();
    if (v === 0 || this.hooks.stopPreloadParent === undefined || this.workerCount() > 0) return undefined;
    return { pool: this.name, id: -1, pid: this.parent!.pid, charge: v, value: v, since: 0, parent: true };
  }

  private evictParent(w: WorkerRef, reason: RetireReason, fields: Record<string, unknown>, msg: string): void {
    const value = this.parentValue();
    if (value === 0 || this.parent!.pid !== w.pid || this.workerCount() > 0) return;
    const exited = this.hooks.stopPreloadParent?.();
    if (exited === undefined) return;
    this.evicted++;
    this.parent = undefined;
    this.parentsStopping += value;
    this.log.info({ code: ErrorCodes.PRELOAD_PARENT_EVICTED, wpid: w.pid, reason, ...fields, evicted: this.evicted }, msg);
    void exited.then(() => {
      this.parentsStopping -= value;
      this.host.released();
    });
  }

  hasCgroup(): boolean {
    return this.cgroup !== undefined;
  }

  watchTick(share: number, measureBusy: boolean): boolean {
    const sampler = this.host.sampler;
    if (measureBusy && sampler.sync) {
      const now = this.clock.now();
      for (const slot of this.hooks.slots()) {
        if (slot.workerState !== 'busy' || slot.pid === undefined) continue;
        const s = sampler.readNow(slot.pid, now);
        if (s !== undefined) this.apply(slot, s);
      }
      this.updateEstimate();
    }
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
    let total = this.parentValue() + this.parentsStopping;
    let committed = total;
    let sampled = 0;
    let pss = 0;
    for (const slot of this.hooks.slots()) {
      const v = slot.mem?.last;
      committed += chargeOf(v?.value, this.est.bytes);
      if (v === undefined) continue;
      total += v.value;
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
      refusedSpawns: this.refused,
      recycled: this.recycled,
      killed: this.killed,
      evicted: this.evicted,
      waitingForBudget: this.host.isWaiting(this),
    };
  }

  // ---- sampling -----------------------------------------------------------------------

  private round(): void {
    if (this.disposed || this.sampling) return;
    const now = this.clock.now();
    const sampler = this.host.sampler;
    const slots = [...this.hooks.slots()].filter((s) => s.pid !== undefined && s.state !== 'gone');
    const parent = this.hooks.preloadParent?.();
    const keepParent = (s: MemorySample | undefined): void => {
      this.parent = parent !== undefined && s !== undefined ? { pid: parent, sample: s } : undefined;
    };
    if (sampler.syncRounds === true) {
      for (const slot of slots) {
        const s = sampler.readNow(slot.pid!, now);
        if (s !== undefined) this.apply(slot, s);
      }
      keepParent(parent === undefined ? undefined : sampler.readNow(parent, now));
      this.afterRound();
      return;
    }
    this.sampling = true;
    const pids = slots.map((s) => s.pid!);
    if (parent !== undefined) pids.push(parent);
    void sampler
      .read(pids, now)
      .then((got) => {
        for (const slot of slots) {
          const s = got.get(slot.pid!);
          if (s !== undefined && slot.exit === undefined) this.apply(slot, s);
        }
        keepParent(parent === undefined ? undefined : got.get(parent));
      })
      .catch((err: unknown) => this.log.debug({ err }, 'memory sampling failed'))
      .finally(() => {
        this.sampling = false;
        this.afterRound();
      });
  }

  private afterRound(): void {
    if (this.disposed) return;
    this.updateEstimate();
    this.checkLimit();
    this.host.checkBudget();
    let live = false;
    for (const _ of this.hooks.slots()) {
      live = true;
      break;
    }
    // No workers, no sampling: the next spawn starts it again.
    if (live) this.timer.armAt(this.clock.now() + this.interval);
  }

  private apply(slot: Slot, s: MemorySample): void {
    this.record(slot, s);
    this.enforce(slot, s);
  }

  /**
   * Records a sample, and the worker's peak since it started as the kernel's RSS
   * high-water mark (VmHWM) less its shared part now (RSS - PSS): a request's peak that
   * fell between two samples still counts in the estimate.
   */
  private record(slot: Slot, s: MemorySample): void {
    const m = slot.mem;
    if (m === undefined) return;
    m.record(s);
    const hwm = this.host.sampler.hwm?.(s.pid);
    if (hwm !== undefined) m.peak = Math.max(m.peak, hwm - (s.rss - s.value));
  }

  /** Applies max_memory / max_memory_hard to one fresh sample. True when the worker was recycled or killed. */
  private enforce(slot: Slot, s: MemorySample): boolean {
    const m = slot.mem!;
    const st = slot.workerState;
    const verdict = checkWorker(s.value, this.caps);
    m.near = verdict === 'near';
    if (st === 'stopping' || st === 'exited') return false;
    const base = { wpid: slot.pid, value: s.value, measure: s.measure, rss: s.rss, pss: s.pss, requests: slot.requests };
    if (verdict === 'hard') {
      this.killed++;
      const ex = slot.current;
      const what = ex !== undefined ? `; its request to ${scriptOf(ex)} gets 503 MEMORY_HARD_LIMIT` : '';
      this.hooks.kill(slot, { ...base, maxMemoryHard: this.caps.hard, uri: ex?.params.get('REQUEST_URI') },
        `worker ${slot.pid} of pool ${this.name} uses ${formatBytes(s.value)} (${s.measure}), over max_memory_hard ${formatBytes(this.caps.hard)}: killing it now${what}`);
      return true;
    }
    if (verdict !== 'soft' || st === 'draining') return false;
    if (slot.requests === 0) {
      // Recycling a worker that is this big before serving anything would only loop.
      if (!this.warnedFresh) {
        this.warnedFresh = true;
        this.log.warn({ code: ErrorCodes.MAX_MEMORY_TOO_LOW, ...base, maxMemory: this.caps.soft }, `worker ${slot.pid} of pool ${this.name} uses ${formatBytes(s.value)} (${s.measure}) before serving any request, over max_memory ${formatBytes(this.caps.soft)}: max_memory is too low for this application; not recycling fresh workers`);
      }
      return false;
    }
    this.recycled++;
    this.hooks.retire(slot, 'memory', { ...base, maxMemory: this.caps.soft },
      `worker ${slot.pid} of pool ${this.name} uses ${formatBytes(s.value)} (${s.measure}), over max_memory ${formatBytes(this.caps.soft)}: recycling it ${st === 'busy' ? 'after its current request' : 'now'}`);
    return true;
  }

  /** memory_limit: measured use over it retires idle workers first, then busy ones after their request. */
  private checkLimit(): void {
    if (this.limit <= 0) return;
    const measured = this.measured();
    const freeing = this.freeingMeasured();
    const excess = measured - freeing - this.limit;
    if (excess <= 0) return;
    const busy = this.busyWorkers();
    for (const v of planRelief(excess, this.idleWorkers(), busy)) {
      const busyOne = busy.includes(v);
      this.evict(v, 'memory_budget', { memoryLimit: this.limit, measured, freeing, excess, victimPid: v.pid, value: v.value, busy: busyOne },
        `pool ${this.name} uses ${formatBytes(measured)}, over its memory_limit ${formatBytes(this.limit)}: retiring ${busyOne ? 'busy worker (after its request)' : 'idle worker'} ${v.pid} (${formatBytes(v.value ?? v.charge)})`);
    }
  }

  private updateEstimate(): void {
    const live: number[] = [];
    for (const slot of this.hooks.slots()) {
      const m = slot.mem;
      if (m !== undefined && m.peak > 0 && slot.requests > 0) live.push(m.peak);
    }
    this.learnedFrom = this.history.values().length + live.length;
    this.est = estimateWorker(this.history.values(), live, this.cfg.expectedWorkerMemory ?? this.est.bytes, this.caps.hard > 0 ? this.caps.hard : Infinity);
  }

  private ref(slot: Slot, since: number): WorkerRef {
    const value = slot.mem?.last?.value;
    return { pool: this.name, id: slot.worker.id, pid: slot.pid, charge: chargeOf(value, this.est.bytes), value, since };
  }

  private logRefusal(
    want: number, admitted: number, demandRefused: boolean, limitedBy: string | undefined, committed: number, evicting: number, covered: number, hostCommitted: number | undefined, room: number | undefined,
  ): void {
    const now = this.clock.now();
    const r = this.refusalLog;
    if (!demandRefused) {
      // Spares for dynamic/static modes: nobody waits for them; one line per episode.
      if (this.refusingSpares) return;
      this.refusingSpares = true;
    } else if (now - r.at < REFUSAL_LOG_INTERVAL_MS && evicting === 0) {
      r.suppressed++;
      return;
    }
    const suppressed = r.suppressed;
    this.refusalLog = { at: now, suppressed: 0 };
    const est = this.est.bytes;
    const budget = this.host.budget;
    const fields = {
      want, admitted, limitedBy, estimate: est, estimateSource: this.est.source, committed, memoryLimit: this.limit > 0 ? this.limit : undefined,
      budget, hostCommitted, room, evicting, covered, queued: this.hooks.queued(), ...(suppressed > 0 ? { suppressedSinceLastLine: suppressed } : {}),
    };
    const n = want - admitted;
    const then = evicting > 0 ? `evicting ${evicting} worker(s) of other pools` : covered > 0 ? 'waiting for retiring workers to exit' : 'waiting for memory to come free';
    const needs = `a worker needs ${formatBytes(est)} (${this.est.source === 'measured' ? 'measured' : 'expected_worker_memory, not measured yet'})`;
    let why: string;
    if (limitedBy === 'memory_limit') {
      why = `${formatBytes(committed)} committed + ${formatBytes(est)} per worker would pass memory_limit ${formatBytes(this.limit)}`;
    } else if (limitedBy === 'cgroup_limit' || limitedBy === 'pool_cgroup') {
      const which = limitedBy === 'pool_cgroup' ? `the pool's memory cgroup (kernel limit ${formatBytes(this.limit)})` : "fcgi-pm's memory cgroup";
      why = `${which} has ${formatBytes(Math.max(0, room ?? 0))} left above its headroom and ${needs}; ${then}`;
    } else {
      why = `the memory budget ${formatBytes(budget ?? 0)} has ${formatBytes(Math.max(0, (budget ?? 0) - (hostCommitted ?? 0)))} uncommitted and ${needs}; ${then}`;
    }
    if (demandRefused) this.log.warn({ code: ErrorCodes.MEMORY_BUDGET, ...fields }, `pool ${this.name}: not spawning ${n} worker(s): ${why}; requests wait in the queue`);
    else this.log.info(fields, `pool ${this.name}: not spawning ${n} spare worker(s): ${why}`);
  }
}

function retiring(slot: Slot): boolean {
  const st = slot.workerState;
  return st === 'draining' || st === 'stopping';
}
