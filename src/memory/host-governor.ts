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
 */
import type { Config } from '../config/types.js';
import type { Logger } from '../log/log.js';
import { readMeminfo, resolveBudget, type MemInfo, type ResolvedBudget } from './budget.js';
import { formatBytes } from './format.js';
import { decideSpawn, planRelief, recommendMaxChildren, type SpawnDecision } from './governor.js';
import { createSampler, type MemorySampler } from './sampler.js';
import type { BudgetMember, BudgetSnapshot, MemoryClock, MemorySample, WorkerRef } from './types.js';
import { ErrorCodes } from '../errors.js';

export interface HostGovernorOptions {
  logger: Logger;
  /** Default interval for pools that do not set their own (ms). */
  sampleInterval: number;
  budget?: ResolvedBudget | undefined;
  meminfo?: MemInfo | undefined;
  sampler?: MemorySampler;
  clock?: MemoryClock;
  /** Dispose when the last pool leaves (a governor a lone pool made for itself). */
  disposeWhenEmpty?: boolean;
}

export interface AdmitAsk {
  want: number;
  demand: number;
  estimate: number;
  /** The asking pool's committed memory and memory_limit (0 = off). */
  committed: number;
  limit: number;
}

/** What the host decided, with the numbers for the pool's log line. */
export type HostDecision = SpawnDecision & { budget: number | undefined; hostCommitted: number | undefined };

/** What a pool's memory part needs of the daemon's governor (injected through PoolDeps.memory). */
export interface MemoryGovernor {
  readonly sampler: MemorySampler;
  /** Default interval for pools that do not set their own (ms). */
  readonly sampleInterval: number;
  /** Bytes; undefined without memory_budget. */
  readonly budget: number | undefined;
  join(m: BudgetMember): void;
  leave(m: BudgetMember): void;
  decide(m: BudgetMember, ask: AdmitAsk): HostDecision;
  released(): void;
  wentIdle(m: BudgetMember): void;
  checkBudget(): void;
  isWaiting(m: BudgetMember): boolean;
  recommend(m: BudgetMember, estimate: number, limit: number): number | undefined;
}

export const DEFAULT_SAMPLE_INTERVAL = 2000;

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
  /** Bytes; undefined without memory_budget. */
  readonly budget: number | undefined;
  readonly clock: MemoryClock;
  private readonly resolved: ResolvedBudget | undefined;
  private readonly meminfo: MemInfo | undefined;
  private readonly log: Logger;
  private readonly members = new Set<BudgetMember>();
  /** Pools whose queued requests wait for the budget, in the order they began waiting. */
  private readonly waiters = new Set<BudgetMember>();
  private selfSample: MemorySample | undefined;
  private selfPending = false;
  private retryHandle: unknown;
  private disposed = false;
  private readonly disposeWhenEmpty: boolean;
  refusedSpawns = 0;
  evictions = 0;
  overBudget = 0;

  constructor(opts: HostGovernorOptions) {
    this.log = opts.logger;
    this.sampleInterval = opts.sampleInterval;
    this.resolved = opts.budget;
    this.budget = opts.budget?.bytes;
    this.meminfo = opts.meminfo;
    this.sampler = opts.sampler ?? createSampler();
    this.clock = opts.clock ?? systemClock;
    this.disposeWhenEmpty = opts.disposeWhenEmpty === true;
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
    const budget = this.budget;
    if (budget === undefined || this.disposed) {
      const d = decideSpawn({ want: ask.want, demand: ask.demand, estimate: ask.estimate, poolCommitted: ask.committed, poolLimit: ask.limit, host: undefined });
      return { ...d, budget: undefined, hostCommitted: undefined };
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
      collect(o, o.idleWorkers(), idle, owners);
      if (o.workerCount() > 1) collect(o, o.busyWorkers(), busy, owners);
      if (this.waiters.has(o) && o.hasDemand()) othersWaiting = true;
    }
    const d = decideSpawn({
      want: ask.want,
      demand: ask.demand,
      estimate: ask.estimate,
      poolCommitted: ask.committed,
      poolLimit: ask.limit,
      host: { budget, committed, freeing, othersWaiting, idle, busy, starving: m.workerCount() === 0 },
    });
    if (d.limitedBy === 'memory_budget') this.refusedSpawns++;
    if (d.unmetDemand > 0) this.waiters.add(m);
    else this.waiters.delete(m);
    const numbers = { budget, committed, freeing, estimate: ask.estimate, measure: self.measure };
    for (const v of d.evict) {
      this.evictions++;
      const idleMs = Math.round(this.clock.now() - v.since);
      owners.get(v)?.evict(v, 'memory_budget', { ...numbers, forPool: m.name, victimPool: v.pool, victimPid: v.pid, charge: v.charge, value: v.value, idleMs },
        `evicting idle worker ${v.pid} of pool ${v.pool} (least recently used, idle ${idleMs} ms, ${formatBytes(v.charge)} counted) to make room for pool ${m.name}: ` +
          `${formatBytes(committed)} committed + ${formatBytes(ask.estimate)} needed > budget ${formatBytes(budget)}`);
    }
    for (const v of d.retire) {
      this.evictions++;
      owners.get(v)?.evict(v, 'memory_budget', { ...numbers, forPool: m.name, victimPool: v.pool, victimPid: v.pid, charge: v.charge, value: v.value },
        `retiring busy worker ${v.pid} of pool ${v.pool} after its request (${formatBytes(v.charge)} counted): pool ${m.name} has no worker and the budget ` +
          `(${formatBytes(budget)}, ${formatBytes(committed)} committed) has no room for one`);
    }
    return { ...d, budget, hostCommitted: committed };
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

  /** After a sampling round: measured use over the budget retires workers until it is back under. */
  checkBudget(): void {
    const budget = this.budget;
    if (budget === undefined || this.disposed) return;
    const self = this.self();
    let measured = self.value;
    let freeing = 0;
    const idle: WorkerRef[] = [];
    const busy: WorkerRef[] = [];
    const owners = new Map<WorkerRef, BudgetMember>();
    for (const o of this.members) {
      measured += o.measured();
      freeing += o.freeingMeasured();
      collect(o, o.idleWorkers(), idle, owners);
      collect(o, o.busyWorkers(), busy, owners);
    }
    const excess = measured - freeing - budget;
    if (excess <= 0) return;
    const victims = planRelief(excess, idle, busy);
    if (victims.length === 0) return;
    this.overBudget++;
    for (const v of victims) {
      const busyOne = busy.includes(v);
      owners.get(v)?.evict(v, 'memory_budget', { budget, measured, freeing, excess, victimPool: v.pool, victimPid: v.pid, value: v.value, measure: self.measure, busy: busyOne },
        `memory use ${formatBytes(measured)} is over the budget ${formatBytes(budget)} by ${formatBytes(excess)}: ` +
          `retiring ${busyOne ? 'busy worker (after its request)' : 'idle worker'} ${v.pid} of pool ${v.pool} (${formatBytes(v.value ?? v.charge)})`);
    }
  }

  /**
   * The daemon's own memory. Read synchronously once; after that refreshed in the
   * background at most once per sample interval (a Node process's smaps_rollup costs
   * about a millisecond), the last reading standing in meanwhile.
   */
  self(): MemorySample {
    const now = this.clock.now();
    const s = this.selfSample;
    if (s === undefined) {
      this.selfSample = this.sampler.self(now);
      return this.selfSample;
    }
    if (now - s.at >= this.sampleInterval && !this.selfPending && !this.disposed) {
      this.selfPending = true;
      void this.sampler
        .selfAsync(now)
        .then((v) => (this.selfSample = v))
        .catch(() => {})
        .finally(() => (this.selfPending = false));
    }
    return s;
  }

  /** The budget share left for `m`: budget - daemon - what every other pool keeps while idle. */
  budgetShare(m: BudgetMember): number | undefined {
    if (this.budget === undefined) return undefined;
    let rest = this.budget - this.self().value;
    for (const o of this.members) if (o !== m) rest -= o.floor();
    return rest;
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
    };
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
    this.waiters.clear();
    this.sampler.close();
  }

  private scheduleRetry(): void {
    if (this.retryHandle !== undefined || this.disposed) return;
    this.retryHandle = this.clock.setTimer(() => {
      this.retryHandle = undefined;
      this.log.debug({ waiting: [...this.waiters].map((w) => w.name) }, 'memory came free: retrying pools waiting for the budget');
      for (const w of [...this.waiters]) {
        if (!this.members.has(w) || !w.hasDemand()) {
          this.waiters.delete(w);
          continue;
        }
        w.retry();
      }
    }, 0);
  }
}

function collect(owner: BudgetMember, refs: WorkerRef[], into: WorkerRef[], owners: Map<WorkerRef, BudgetMember>): void {
  for (const r of refs) {
    into.push(r);
    owners.set(r, owner);
  }
}

/** The daemon's governor: memory_budget resolved against /proc/meminfo now, one start-up line. */
export function createHostGovernor(cfg: Pick<Config, 'memoryBudget' | 'memorySampleInterval'>, logger: Logger, opts: { sampler?: MemorySampler; meminfo?: MemInfo; clock?: MemoryClock } = {}): HostGovernor {
  const meminfo = opts.meminfo ?? readMeminfo();
  const budget = cfg.memoryBudget !== undefined ? resolveBudget(cfg.memoryBudget, meminfo) : undefined;
  const g = new HostGovernor({ logger, sampleInterval: cfg.memorySampleInterval ?? DEFAULT_SAMPLE_INTERVAL, budget, meminfo, sampler: opts.sampler, clock: opts.clock });
  const self = g.self();
  const how = g.sampler.kind === 'proc' ? (g.sampler.measure === 'pss' ? 'PSS from /proc/PID/smaps_rollup' : 'RSS from /proc/PID/stat (smaps_rollup not readable)') : 'RSS through pidusage';
  const fields = { kind: 'memory', budget: budget?.bytes, setting: budget?.setting ?? 'off', derivation: budget?.derivation, measure: g.sampler.measure, sampler: g.sampler.kind, sampleInterval: g.sampleInterval, memTotal: meminfo.memTotal, memAvailable: meminfo.memAvailable, daemon: self.value };
  if (budget === undefined) {
    logger.info(fields, `memory: no memory_budget; measuring ${how} every ${g.sampleInterval} ms; fcgi-pm itself uses ${formatBytes(self.value)} (${self.measure})`);
  } else {
    logger.info(fields, `memory budget ${formatBytes(budget.bytes)} (${budget.derivation}) for all pools and fcgi-pm itself (now ${formatBytes(self.value)} ${self.measure}); measuring ${how} every ${g.sampleInterval} ms`);
    if (budget.bytes > meminfo.memTotal) logger.warn({ code: ErrorCodes.MEMORY_BUDGET_UNFIT, ...fields }, `memory_budget ${formatBytes(budget.bytes)} is more than the host has (MemTotal ${formatBytes(meminfo.memTotal)})`);
    if (budget.bytes <= self.value) logger.warn({ code: ErrorCodes.MEMORY_BUDGET_UNFIT, ...fields }, `memory_budget ${formatBytes(budget.bytes)} leaves nothing for workers: fcgi-pm itself uses ${formatBytes(self.value)}`);
  }
  return g;
}
