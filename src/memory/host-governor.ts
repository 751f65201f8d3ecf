/**
 * One governor per daemon, shared by every pool: it owns the sampler, the host budget
 * (memory_budget, counting the daemon's own memory) and the list of pools whose requests
 * wait for memory. Pools ask it before spawning (decide), tell it when memory came back
 * (released, wentIdle) and after each sampling round (checkBudget). Decisions come from
 * governor.ts; this class gathers the numbers, carries them out and logs them.
 *
 * Waiting pools are retried in the order they started waiting, from a zero-delay timer
 * (never from inside another pool's event handler): after any worker exit, and when a
 * worker of another pool goes idle (it can then be evicted).
 *
 * In a memory cgroup with a limit it also watches the box itself (box-watch.ts): its room
 * is read before every spawn decision, and the watch runs while workers live.
 */
import type { Config, MemoryBudgetSetting } from '../config/types.js';
import type { Logger } from '../log/log.js';
import { readMeminfo, resolveBudget, type MemInfo, type ResolvedBudget } from './budget.js';
import { boxHeadroom, BoxWatch, readBox } from './box-watch.js';
import type { MemoryBox, MemoryCgroup } from './cgroup-files.js';
import { formatBytes } from './format.js';
import { cpuCgroupsAtStart, DEFAULT_DAEMON_CPU_WEIGHT, raiseDaemonShare } from './cpu-cgroup.js';
import { OomCounter } from './pool-cgroup.js';
import { decideShare, type ShareMember } from './worker-shares.js';
import { collectWorkers, decideSpawn, idleName, planRelief, recommendMaxChildren, type SpawnDecision } from './governor.js';
import { createSampler, type MemorySampler } from './sampler.js';
import type { BudgetMember, BudgetSnapshot, MemoryClock, MemorySample, WorkerRef } from './types.js';
import { SharedTimer, type Clock } from '../util/clock.js';
import { ErrorCodes } from '../errors.js';

export interface HostGovernorOptions {
  logger: Logger;
  /** Default interval for pools that do not set their own (ms). */
  sampleInterval: number;
  budget?: ResolvedBudget | undefined;
  meminfo?: MemInfo | undefined;
  /** fcgi-pm's own memory cgroup (pools with memory_limit create theirs below it). */
  cgroup?: MemoryCgroup | undefined;
  /** The memory limit on it or a parent, when there is one. */
  box?: MemoryBox | undefined;
  sampler?: MemorySampler;
  clock?: MemoryClock;
  /** Dispose when the last pool leaves (a governor a lone pool made for itself). */
  disposeWhenEmpty?: boolean;
  /** Pools put their workers in CPU cgroups of their own (cpu-cgroup.ts): the daemon found it may. */
  cpuCgroups?: boolean;
  /** max_children_total: the most workers across all pools, shared fairly (worker-shares.ts); 0 = off. */
  processMax?: number;
}

export interface AdmitAsk {
  want: number;
  demand: number;
  estimate: number;
  /** The asking pool's committed memory and memory_limit (0 = off). */
  committed: number;
  limit: number;
  /** The smallest plausible worker while the pool has none measured (governor.ts SpawnAsk.probe). */
  probe?: number | undefined;
}

/** What the host decided, with the numbers for the pool's log line. */
export type HostDecision = SpawnDecision & { budget: number | undefined; hostCommitted: number | undefined; room: number | undefined };

/** What a pool's memory part needs of the daemon's governor (injected through PoolDeps.memory). */
export interface MemoryGovernor {
  readonly sampler: MemorySampler;
  /** Default interval for pools that do not set their own (ms). */
  readonly sampleInterval: number;
  /** Bytes; undefined without memory_budget. */
  readonly budget: number | undefined;
  /** fcgi-pm's own memory cgroup, where pool cgroups go; undefined when unknown. */
  readonly cgroup: MemoryCgroup | undefined;
  /** Pools put their workers in CPU cgroups of their own, weighted by cpu_weight (cpu-cgroup.ts). */
  readonly cpuCgroups: boolean;
  /** max_children_total: the most workers across all pools (0 = off; worker-shares.ts). */
  readonly processMax: number;
  /** A worker died by SIGKILL: did the kernel's OOM killer kill it in fcgi-pm's cgroup? */
  oomKilledHere(): boolean;
  join(m: BudgetMember): void;
  leave(m: BudgetMember): void;
  decide(m: BudgetMember, ask: AdmitAsk): HostDecision;
  released(): void;
  wentIdle(m: BudgetMember): void;
  checkBudget(): void;
  /** A pool's sampling round ended: the budget is checked once for the rounds that end together. */
  roundDone(): void;
  isWaiting(m: BudgetMember): boolean;
  recommend(m: BudgetMember, estimate: number, limit: number): number | undefined;
  /** The one timer every pool's sampling rounds share, for pools on `clock`. */
  rounds(clock: Clock): SharedTimer;
}

export const DEFAULT_SAMPLE_INTERVAL = 2000;

/** How long the daemon's own memory counts at its highest reading (HostGovernor.self). */
export const SELF_PEAK_MS = 30_000;

const systemClock: MemoryClock = {
  now: () => performance.now(),
  setTimer(fn, ms) {
    const t = setTimeout(fn, Math.max(0, Math.ceil(ms)));
    t.unref();
    return t;
  },
  clearTimer(h) {
    clearTimeout(h as NodeJS.Timeout);
  },
};

export class HostGovernor implements MemoryGovernor {
  readonly sampler: MemorySampler;
  readonly sampleInterval: number;
  readonly clock: MemoryClock;
  readonly cgroup: MemoryCgroup | undefined;
  readonly cpuCgroups: boolean;
  /** max_children_total (0 = off). */
  processMax: number;
  private resolved: ResolvedBudget | undefined;
  private meminfo: MemInfo | undefined;
  /** The memory cgroup with a limit that fcgi-pm runs in, watched (box-watch.ts). */
  private readonly box: BoxWatch;
  private readonly oom: OomCounter | undefined;
  private readonly log: Logger;
  private readonly members = new Set<BudgetMember>();
  /** The pools' rounds' one timer, per clock (pools and tests on another clock get their own). */
  private readonly roundTimers = new WeakMap<Clock, SharedTimer>();
  /** Pools whose queued requests wait for the budget, in the order they began waiting. */
  private readonly waiters = new Set<BudgetMember>();
  private selfSample: MemorySample | undefined;
  private selfPending = false;
  /** The daemon's readings of the last SELF_PEAK_MS, falling values only (the first is the peak). */
  private readonly selfPeaks: Array<{ at: number; value: number }> = [];
  private selfCounted = 0;
  /** shareOfAll() in the current task. */
  private allShare: number | undefined;
  private retryHandle: unknown;
  private stallHandle: unknown;
  /** A round ended since the budget was last checked (roundDone). */
  private budgetDue = false;
  private disposed = false;
  private readonly disposeWhenEmpty: boolean;
  refusedSpawns = 0;
  evictions = 0;
  overBudget = 0;

  constructor(opts: HostGovernorOptions) {
    this.log = opts.logger;
    this.sampleInterval = opts.sampleInterval;
    this.resolved = opts.budget;
    this.meminfo = opts.meminfo;
    this.cgroup = opts.cgroup ?? opts.box?.cgroup;
    this.oom = this.cgroup && new OomCounter(this.cgroup);
    this.sampler = opts.sampler ?? createSampler();
    this.clock = opts.clock ?? systemClock;
    const owner = { members: () => this.members, checkBudget: () => this.checkBudget(), retry: () => this.scheduleRetry(), evicted: () => void this.evictions++ };
    this.box = new BoxWatch(owner, opts.box, this.clock, this.log, this.sampleInterval);
    this.disposeWhenEmpty = opts.disposeWhenEmpty === true;
    this.cpuCgroups = opts.cpuCgroups === true;
    this.processMax = opts.processMax ?? 0;
  }

  /** On reload: max_children_total again (0 = off). */
  setProcessMax(n: number): void {
    if (n === this.processMax) return;
    this.processMax = n;
    this.scheduleRetry();
  }

  /** Bytes; undefined without memory_budget. */
  get budget(): number | undefined {
    return this.resolved?.bytes;
  }

  /** The box's limit, or undefined outside a limited cgroup. */
  get boxLimit(): number | undefined {
    return this.box.limit;
  }

  /** On reload: memory_budget resolved again against the host and the cgroup limit now. */
  rebudget(setting: MemoryBudgetSetting | undefined, meminfo: MemInfo, box: MemoryBox | undefined): void {
    const before = this.resolved;
    this.meminfo = meminfo;
    this.box.setBox(box);
    this.resolved = setting === undefined ? undefined : resolveBudget(setting, meminfo, box && { limit: box.limit, dir: box.limitDir });
    if (before?.bytes === this.resolved?.bytes && before?.derivation === this.resolved?.derivation) return;
    const r = this.resolved;
    this.log.info({ kind: 'memory', budget: r?.bytes, setting: r?.setting ?? 'off', derivation: r?.derivation, before: before?.bytes },
      r === undefined ? 'memory budget now off' : `memory budget now ${formatBytes(r.bytes)} = ${r.derivation}`);
    this.scheduleRetry();
  }

  oomKilledHere(): boolean {
    return this.oom !== undefined && this.oom.claim();
  }

  join(m: BudgetMember): void {
    this.members.add(m);
  }

  leave(m: BudgetMember): void {
    this.members.delete(m);
    this.waiters.delete(m);
    if (this.disposeWhenEmpty && this.members.size === 0) this.dispose();
  }

  /**
   * May pool `m` spawn `ask.want` workers? Applies its memory_limit and the host budget,
   * evicts idle workers of other pools when its queued requests need the room, and
   * keeps it on the waiting list while they cannot be met.
   */
  decide(m: BudgetMember, ask: AdmitAsk): HostDecision {
    const d = this.decideMemory(m, ask);
    return this.processMax > 0 ? this.applyShares(m, ask, d) : d;
  }

  /**
   * max_children_total over what memory admitted: free places first; a pool below its
   * fair share with requests waiting takes places from pools above theirs (worker-shares.ts).
   */
  private applyShares(m: BudgetMember, ask: AdmitAsk, d: HostDecision): HostDecision {
    const others: Array<ShareMember<BudgetMember>> = [];
    for (const o of this.members) {
      if (o === m) continue;
      const count = o.workerCount();
      if (count === 0 && !o.hasDemand()) continue;
      const leaving = o.leavingCount();
      others.push({ member: o, count: count - leaving, leaving, waiting: this.waiters.has(o) && o.hasDemand(), idle: o.idleWorkers(), busy: o.busyWorkers() });
    }
    const mineLeaving = m.leavingCount();
    const s = decideShare({ want: d.admit, demand: Math.min(ask.demand, d.admit), mine: m.workerCount() - mineLeaving, mineLeaving, max: this.processMax, others });
    const unmet = d.unmetDemand + s.unmet;
    if (unmet > 0) this.waiters.add(m);
    else this.waiters.delete(m);
    const fields = { maxChildrenTotal: this.processMax, share: s.share, forPool: m.name };
    for (const v of s.evict) {
      this.evictions++;
      v.member.evict(v.ref, 'host_share', { ...fields, victimPool: v.ref.pool, victimPid: v.ref.pid },
        `stopping idle worker ${v.ref.pid} of pool ${v.ref.pool} (above its share of max_children_total ${this.processMax}) for pool ${m.name}, below its share of ${s.share} with requests waiting`);
    }
    for (const v of s.retire) {
      this.evictions++;
      v.member.evict(v.ref, 'host_share', { ...fields, victimPool: v.ref.pool, victimPid: v.ref.pid },
        `retiring busy worker ${v.ref.pid} of pool ${v.ref.pool} after its request (above its share of max_children_total ${this.processMax}): pool ${m.name} has no worker`);
    }
    if (s.admit === d.admit) return { ...d, unmetDemand: unmet };
    return { ...d, admit: s.admit, limitedBy: 'max_children_total', unmetDemand: unmet, evict: [...d.evict, ...s.evict.map((v) => v.ref)], retire: [...d.retire, ...s.retire.map((v) => v.ref)] };
  }

  /** memory_limit, the host budget and the box (governor.ts decideSpawn). */
  private decideMemory(m: BudgetMember, ask: AdmitAsk): HostDecision {
    const budget = this.budget;
    const room = this.box.room();
    this.box.start();
    if ((budget === undefined && room === undefined) || this.disposed) {
      const d = decideSpawn({ want: ask.want, demand: ask.demand, estimate: ask.estimate, poolCommitted: ask.committed, poolLimit: ask.limit, probe: ask.probe, host: undefined });
      return { ...d, budget: undefined, hostCommitted: undefined, room: undefined };
    }
    const self = this.self();
    let committed = self.value;
    let freeing = 0;
    let othersWaiting = false;
    const idle: WorkerRef[] = [];
    const busy: WorkerRef[] = [];
    // By reference, not by pool name: during a reload the old and new pool share a name.
    const owners = new Map<WorkerRef, BudgetMember>();
    for (const o of this.members) {
      committed += o.committed();
      freeing += o.freeing();
      if (o === m) continue;
      collectWorkers(o, o.idleWorkers(), idle, owners);
      if (o.workerCount() > 1) collectWorkers(o, o.busyWorkers(), busy, owners);
      if (this.waiters.has(o) && o.hasDemand()) othersWaiting = true;
    }
    const d = decideSpawn({
      want: ask.want,
      demand: ask.demand,
      estimate: ask.estimate,
      poolCommitted: ask.committed,
      poolLimit: ask.limit,
      probe: ask.probe,
      host: { budget: budget ?? Infinity, committed, freeing, othersWaiting, idle, busy, starving: m.workerCount() === 0, room },
    });
    if (d.limitedBy === 'memory_budget' || d.limitedBy === 'cgroup_limit') this.refusedSpawns++;
    if (d.unmetDemand > 0) this.waiters.add(m);
    else this.waiters.delete(m);
    if (d.unmetDemand > 0 && m.workerCount() === 0 && d.evict.length + d.retire.length === 0) this.recheckStalled();
    const numbers = { budget, committed, freeing, estimate: ask.estimate, measure: self.measure, room };
    const cap = budget !== undefined ? `budget ${formatBytes(budget)}` : `the cgroup limit ${formatBytes(this.box.limit!)}`;
    for (const v of d.evict) {
      this.evictions++;
      const idleMs = v.parent ? undefined : Math.round(this.clock.now() - v.since);
      const why = v.parent ? 'its pool has no worker' : `least recently used, idle ${idleMs} ms`;
      owners.get(v)?.evict(v, 'memory_budget', { ...numbers, forPool: m.name, victimPool: v.pool, victimPid: v.pid, charge: v.charge, value: v.value, idleMs },
        `evicting ${idleName(v)} (${why}, ${formatBytes(v.charge)} counted) to make room for pool ${m.name}: ` +
          `${formatBytes(committed)} committed + ${formatBytes(ask.estimate)} needed > ${cap}`);
    }
    for (const v of d.retire) {
      this.evictions++;
      owners.get(v)?.evict(v, 'memory_budget', { ...numbers, forPool: m.name, victimPool: v.pool, victimPid: v.pid, charge: v.charge, value: v.value },
        `retiring busy worker ${v.pid} of pool ${v.pool} after its request (${formatBytes(v.charge)} counted): pool ${m.name} has no worker and the ${cap} ` +
          `(${formatBytes(committed)} committed) has no room for one`);
    }
    return { ...d, budget, hostCommitted: committed, room };
  }

  /** A worker exited: waiting pools may fit now. */
  released(): void {
    if (this.waiters.size > 0) this.scheduleRetry();
  }

  /** A worker of `m` went idle: a pool waiting for the budget may evict it. */
  wentIdle(m: BudgetMember): void {
    if (this.waiters.size === 0 || (this.waiters.size === 1 && this.waiters.has(m))) return;
    this.scheduleRetry();
  }

  /**
   * The budget is checked once for the rounds that end together, not once a pool (each
   * check sums every pool: at 200 pools, 200 sums of 200 pools every memory_sample_interval).
   * Rounds that read synchronously end inside the rounds' timer, which checks after the
   * last of them (afterRounds); rounds whose reads went through the threadpool end as
   * those reads come back, and the ones that end in the same task share one check.
   */
  roundDone(): void {
    if (this.budgetDue) return;
    this.budgetDue = true;
    queueMicrotask(() => this.afterRounds());
  }

  private afterRounds(): void {
    if (!this.budgetDue) return;
    this.budgetDue = false;
    this.checkBudget();
  }

  /** After sampling rounds (roundDone): measured use over the budget retires workers until it is back under. */
  checkBudget(): void {
    const budget = this.budget;
    if (budget === undefined || this.disposed) return;
    const self = this.self();
    let measured = self.value;
    let freeing = 0;
    for (const o of this.members) {
      measured += o.measured();
      freeing += o.freeingMeasured();
    }
    const excess = measured - freeing - budget;
    // Within the budget (nearly always): no list of every pool's workers.
    if (excess <= 0) return;
    const idle: WorkerRef[] = [];
    const busy: WorkerRef[] = [];
    const owners = new Map<WorkerRef, BudgetMember>();
    for (const o of this.members) {
      collectWorkers(o, o.idleWorkers(), idle, owners);
      // A pool's last busy worker stays: without it the pool serves nothing (governor.ts).
      if (o.workerCount() > 1) collectWorkers(o, o.busyWorkers(), busy, owners);
    }
    const victims = planRelief(excess, idle, busy);
    if (victims.length === 0) return;
    this.overBudget++;
    for (const v of victims) {
      const busyOne = busy.includes(v);
      owners.get(v)?.evict(v, 'memory_budget', { budget, measured, freeing, excess, victimPool: v.pool, victimPid: v.pid, value: v.value, measure: self.measure, busy: busyOne },
        `memory use ${formatBytes(measured)} is over the budget ${formatBytes(budget)} by ${formatBytes(excess)}: ` +
          `retiring ${busyOne ? `busy worker (after its request) ${v.pid} of pool ${v.pool}` : idleName(v)} (${formatBytes(v.value ?? v.charge)})`);
    }
  }

  /**
   * The daemon's own memory. Read synchronously once; after that refreshed in the
   * background at most once per sample interval (a Node process's smaps_rollup costs
   * about a millisecond), the last reading standing in meanwhile. It counts at its peak
   * of the last SELF_PEAK_MS: a garbage collection frees megabytes that the heap takes
   * back soon after, and a worker admitted into that dip would be evicted for it.
   */
  self(): MemorySample {
    const now = this.clock.now();
    let s = this.selfSample;
    if (s === undefined) {
      s = this.selfSample = this.sampler.self(now);
    } else if (now - s.at >= this.sampleInterval && !this.selfPending && !this.disposed) {
      this.selfPending = true;
      void this.sampler
        .selfAsync(now)
        .then((v) => (this.selfSample = v))
        .catch(() => {})
        .finally(() => (this.selfPending = false));
    }
    const peaks = this.selfPeaks;
    const last = peaks[peaks.length - 1];
    if (last === undefined || last.at !== s.at) {
      while (peaks.length > 0 && peaks[peaks.length - 1]!.value <= s.value) peaks.pop();
      peaks.push({ at: s.at, value: s.value });
    }
    while (peaks.length > 1 && peaks[0]!.at < now - SELF_PEAK_MS) peaks.shift();
    const peak = peaks[0]!.value;
    // The daemon gave memory back for good: pools waiting for the budget may fit now.
    if (peak < this.selfCounted && this.waiters.size > 0) this.scheduleRetry();
    this.selfCounted = peak;
    return peak === s.value ? s : { ...s, value: peak };
  }

  /** The budget share left for `m`: budget - daemon - what every other pool keeps while idle. */
  budgetShare(m: BudgetMember): number | undefined {
    if (this.budget === undefined) return undefined;
    return this.shareOfAll() + m.floor();
  }

  /**
   * Budget - daemon - every pool's floor, summed once per synchronous run: a status
   * snapshot asks it for every pool (recommended max_children), and a sum over all pools
   * for each of them grew with the square of the pools. The daemon changes a floor only
   * in a task of its own (a sample, a reload), and the next task sums again; a test that
   * drives a fake clock and snapshots in one synchronous run sees the first sum.
   */
  private shareOfAll(): number {
    if (this.allShare === undefined) {
      let rest = this.budget! - this.self().value;
      for (const o of this.members) rest -= o.floor();
      this.allShare = rest;
      queueMicrotask(() => (this.allShare = undefined));
    }
    return this.allShare;
  }

  snapshot(): BudgetSnapshot {
    const self = this.self();
    const pools: BudgetSnapshot['pools'] = [];
    let used = self.value;
    let committed = self.value;
    for (const m of this.members) {
      const f = m.figures();
      used += f.total;
      committed += f.committed;
      pools.push({ name: m.name, total: f.total, committed: f.committed, estimate: f.estimate, workers: m.workerCount(), waiting: this.waiters.has(m), recommendedMaxChildren: f.recommendedMaxChildren });
    }
    return {
      budget: this.budget,
      setting: this.resolved?.setting ?? 'off',
      derivation: this.resolved?.derivation,
      measure: this.sampler.measure,
      sampler: this.sampler.kind,
      sampleInterval: this.sampleInterval,
      daemon: { pss: self.pss, rss: self.rss, anon: self.anon, measure: self.measure, value: self.value },
      used,
      committed,
      available: this.budget === undefined ? undefined : this.budget - committed,
      pools,
      refusedSpawns: this.refusedSpawns,
      evictions: this.evictions,
      overBudget: this.overBudget,
      memTotal: this.meminfo?.memTotal,
      memAvailableAtStart: this.meminfo?.memAvailable,
      cgroup: this.box.snapshot(),
    };
  }

  rounds(clock: Clock): SharedTimer {
    let t = this.roundTimers.get(clock);
    if (t === undefined) this.roundTimers.set(clock, (t = new SharedTimer(clock, () => this.afterRounds())));
    return t;
  }

  isWaiting(m: BudgetMember): boolean {
    return this.waiters.has(m);
  }

  /** Recommended max_children for `m` at estimate `estimate` (memory_limit `limit`, 0 = off). */
  recommend(m: BudgetMember, estimate: number, limit: number): number | undefined {
    return recommendMaxChildren({ estimate, poolLimit: limit, budgetShare: this.budgetShare(m) });
  }

  dispose(): void {
    this.disposed = true;
    if (this.retryHandle !== undefined) this.clock.clearTimer(this.retryHandle);
    this.retryHandle = undefined;
    this.box.dispose();
    if (this.stallHandle !== undefined) this.clock.clearTimer(this.stallHandle);
    this.stallHandle = undefined;
    this.waiters.clear();
    this.sampler.close();
  }

  /**
   * A pool with no worker waits, and no exit of its own will free memory for it: what
   * moves is fcgi-pm's own size and other pools' sizes. Ask again every sample interval.
   */
  private recheckStalled(): void {
    if (this.stallHandle !== undefined || this.disposed) return;
    this.stallHandle = this.clock.setTimer(() => {
      this.stallHandle = undefined;
      this.scheduleRetry();
    }, this.sampleInterval);
  }

  private scheduleRetry(): void {
    if (this.retryHandle !== undefined || this.disposed) return;
    this.retryHandle = this.clock.setTimer(() => {
      this.retryHandle = undefined;
      this.log.debug({ waiting: [...this.waiters].map((w) => w.name) }, 'memory or places came free: retrying pools waiting for them');
      // With max_children_total, the pool that has fewest workers is asked first: the next free place goes to it.
      const order = [...this.waiters];
      if (this.processMax > 0) order.sort((a, b) => a.workerCount() - b.workerCount());
      for (const w of order) {
        if (!this.members.has(w) || !w.hasDemand()) {
          this.waiters.delete(w);
          continue;
        }
        w.retry();
      }
    }, 0);
  }
}

/** The daemon's governor: memory_budget resolved against /proc/meminfo and the cgroup limit now, one start-up line. */
export function createHostGovernor(
  cfg: Pick<Config, 'memoryBudget' | 'memorySampleInterval' | 'maxChildrenTotal' | 'daemonCpuWeight'>,
  logger: Logger,
  opts: { sampler?: MemorySampler; meminfo?: MemInfo; clock?: MemoryClock; cgroup?: MemoryCgroup; box?: MemoryBox; cpuCgroups?: ReturnType<typeof cpuCgroupsAtStart> } = {},
): HostGovernor {
  const meminfo = opts.meminfo ?? readMeminfo();
  const found = opts.cgroup !== undefined || opts.meminfo !== undefined ? { cgroup: opts.cgroup, box: opts.box } : readBox();
  const box = found.box;
  const budget = cfg.memoryBudget !== undefined ? resolveBudget(cfg.memoryBudget, meminfo, box && { limit: box.limit, dir: box.limitDir }) : undefined;
  const cpu = opts.cpuCgroups ?? (opts.cgroup === undefined && opts.meminfo === undefined ? cpuCgroupsAtStart() : undefined);
  if (cpu?.ok === true) {
    const weight = cfg.daemonCpuWeight ?? DEFAULT_DAEMON_CPU_WEIGHT;
    const own = weight === 0 ? undefined : opts.cpuCgroups === undefined ? raiseDaemonShare(weight) : { why: 'not asked' };
    const ownText = own === undefined ? '' : 'done' in own ? `; fcgi-pm's own daemon_cpu_weight ${weight}: ${own.done}` : `; fcgi-pm's own share left as it is (${own.why})`;
    logger.info({ kind: 'cpu', cpuCgroups: cpu.dir, cgroupVersion: cpu.version, daemonCpuWeight: own !== undefined && 'done' in own ? weight : undefined }, `cpu: each pool's workers run in a CPU cgroup of their own under ${cpu.dir}, weighted by cpu_weight (100 each unless set)${ownText}`);
  }
  else if (cpu !== undefined) logger.info({ kind: 'cpu', cpuCgroups: false, why: cpu.why }, `cpu: no CPU cgroups for pools (${cpu.why}); pools share the CPU as plain processes, cpu_weight has no effect`);
  const g = new HostGovernor({ logger, sampleInterval: cfg.memorySampleInterval ?? DEFAULT_SAMPLE_INTERVAL, budget, meminfo, cgroup: found.cgroup, box, sampler: opts.sampler, clock: opts.clock, cpuCgroups: cpu?.ok === true, processMax: cfg.maxChildrenTotal ?? 0 });
  const self = g.self();
  const how = g.sampler.kind === 'proc' ? (g.sampler.measure === 'pss' ? 'PSS from /proc/PID/smaps_rollup' : 'RSS from /proc/PID/stat (smaps_rollup not readable)') : 'RSS through pidusage';
  const fields = {
    kind: 'memory', budget: budget?.bytes, setting: budget?.setting ?? 'off', derivation: budget?.derivation, measure: g.sampler.measure, sampler: g.sampler.kind, sampleInterval: g.sampleInterval,
    memTotal: meminfo.memTotal, memAvailable: meminfo.memAvailable, daemon: self.value, cgroup: found.cgroup?.dir, cgroupVersion: found.cgroup?.version, cgroupLimit: box?.limit, cgroupLimitDir: box?.limitDir,
  };
  const inBox = box === undefined ? '' : `; in memory cgroup ${box.limitDir} (limit ${formatBytes(box.limit)}), no spawn past ${formatBytes(box.limit - boxHeadroom(box.limit))}`;
  if (budget === undefined) {
    logger.info(fields, `memory: no memory_budget; measuring ${how} every ${g.sampleInterval} ms; fcgi-pm itself uses ${formatBytes(self.value)} (${self.measure})${inBox}`);
  } else {
    logger.info(fields, `memory budget ${formatBytes(budget.bytes)} ${budget.derivation === 'configured' ? '(configured)' : `= ${budget.derivation}`} for all pools and fcgi-pm itself (now ${formatBytes(self.value)} ${self.measure}); measuring ${how} every ${g.sampleInterval} ms${inBox}`);
    const cap = box !== undefined && box.limit < meminfo.memTotal ? { what: `its cgroup limit ${formatBytes(box.limit)}`, bytes: box.limit } : { what: `MemTotal ${formatBytes(meminfo.memTotal)}`, bytes: meminfo.memTotal };
    if (budget.bytes > cap.bytes) logger.warn({ code: ErrorCodes.MEMORY_BUDGET_UNFIT, ...fields }, `memory_budget ${formatBytes(budget.bytes)} is more than fcgi-pm has (${cap.what})`);
    if (budget.bytes <= self.value) logger.warn({ code: ErrorCodes.MEMORY_BUDGET_UNFIT, ...fields }, `memory_budget ${formatBytes(budget.bytes)} leaves nothing for workers: fcgi-pm itself uses ${formatBytes(self.value)}`);
  }
  return g;
}
