/**
 * The memory governor's decisions, as pure functions of samples, limits and counts.
 * No timers, no I/O: host-governor.ts, box-watch.ts and src/pool/workers/memory*.ts gather the numbers,
 * call these, and carry out (and log) what they return.
 *
 * Accounting. Every live worker is charged max(its latest sample, its pool's estimate):
 * a worker that has not grown yet is still planned at the size its pool's workers reach.
 * A spawn is admitted only when the pool's committed memory plus one estimate stays
 * within memory_limit, and the host's (daemon + all pools) within memory_budget. So a
 * spawn never takes the budget past what could be foreseen; only workers growing past
 * their pool's estimate between two samples can, and then relief (planRelief) retires
 * workers until measured use is back under it.
 *
 * Two exceptions keep a guess from starving a pool or the kernel from killing: a pool
 * with no worker and no measurement yet may start one worker when the smallest
 * plausible worker (`probe`) fits, and then learns its real size; and when fcgi-pm runs
 * in a memory cgroup, no spawn may take the box's measured anonymous memory into its
 * headroom (`room`).
 *
 * The budget is fcgi-pm's target, the box's limit the kernel's: a pool with no worker
 * whose requests wait for memory that nothing can give back (the daemon's own, other
 * pools' last workers) starts one where the box has room (lastResort), and relief never
 * retires a pool's last busy worker. Else, on a 64 MiB board where the daemon and one
 * worker pass the budget, the pool would never serve again.
 */
import type { BudgetMember, WorkerRef } from './types.js';

/** A worker at this share of its cap is re-measured right after each request. */
export const NEAR_SHARE = 0.8;

export interface WorkerCaps {
  /** max_memory (0 = off). */
  soft: number;
  /** max_memory_hard (0 = off). */
  hard: number;
}

export type WorkerVerdict = 'hard' | 'soft' | 'near' | 'ok';

export function checkWorker(value: number, caps: WorkerCaps): WorkerVerdict {
  if (caps.hard > 0 && value > caps.hard) return 'hard';
  if (caps.soft > 0 && value > caps.soft) return 'soft';
  const cap = caps.soft > 0 ? caps.soft : caps.hard;
  return cap > 0 && value >= cap * NEAR_SHARE ? 'near' : 'ok';
}

/** What a worker counts for: its latest sample, but never less than its pool's estimate. */
export function chargeOf(value: number | undefined, estimate: number): number {
  return value === undefined || value < estimate ? estimate : value;
}

/** How many workers of `size` fit in `room` bytes (never negative). */
export function fitCount(room: number, size: number): number {
  if (size <= 0) return room > 0 ? Infinity : 0;
  return room <= 0 ? 0 : Math.floor(room / size);
}

export interface HostView {
  budget: number;
  /** Daemon plus every pool's committed memory, this pool included. */
  committed: number;
  /** Charge of workers already retiring anywhere: memory on its way back. */
  freeing: number;
  /** Requests of another pool wait for the budget: spare (non-demand) spawns yield to them. */
  othersWaiting: boolean;
  /** Idle workers of other pools, in any order. */
  idle: readonly WorkerRef[];
  /** Busy workers of other pools that have more than one worker. */
  busy: readonly WorkerRef[];
  /** This pool has no live worker: it cannot make progress on its own. */
  starving: boolean;
  /** The memory cgroup's limit minus its headroom minus its anonymous memory now; undefined outside a limited cgroup. */
  room?: number | undefined;
}

export interface SpawnAsk {
  /** Workers the scaling policy wants started. */
  want: number;
  /** Of those, the ones for requests waiting in the queue (only these may evict others). */
  demand: number;
  estimate: number;
  poolCommitted: number;
  /** memory_limit, 0 = off. */
  poolLimit: number;
  /**
   * The smallest plausible worker, when the pool has none measured yet: a pool with no
   * live worker may start one that fits this even where `estimate` (a guess) does not.
   */
  probe?: number | undefined;
  /** undefined when there is no host budget and no cgroup limit. */
  host: HostView | undefined;
}

export interface SpawnDecision {
  admit: number;
  /** Why fewer than `want` were admitted. */
  limitedBy: 'memory_limit' | 'memory_budget' | 'cgroup_limit' | 'max_children_total' | undefined;
  /** Idle workers of other pools to stop now (least recently used first). */
  evict: WorkerRef[];
  /** Busy workers of other pools to retire after their request (this pool had none at all). */
  retire: WorkerRef[];
  /** Demand spawns that will fit once retiring and evicted workers have exited. */
  covered: number;
  /** Demand spawns the budget refused (the pool waits for memory to come free). */
  unmetDemand: number;
}

export function decideSpawn(ask: SpawnAsk): SpawnDecision {
  const est = ask.estimate;
  let k = Math.max(0, ask.want);
  let limitedBy: SpawnDecision['limitedBy'];
  const firstFits = (free: number): boolean => ask.probe !== undefined && ask.poolCommitted === 0 && free >= ask.probe;
  if (ask.poolLimit > 0) {
    let room = fitCount(ask.poolLimit - ask.poolCommitted, est);
    if (room === 0 && firstFits(ask.poolLimit)) room = 1;
    if (room < k) {
      k = room;
      limitedBy = 'memory_limit';
    }
  }
  const demand = Math.min(Math.max(0, ask.demand), k);
  const host = ask.host;
  if (host === undefined) return { admit: k, limitedBy, evict: [], retire: [], covered: 0, unmetDemand: 0 };

  const budgetFree = host.budget - host.committed;
  const boxTighter = host.room !== undefined && host.room < budgetFree;
  const free = boxTighter ? host.room! : budgetFree;
  let fit = fitCount(free, est);
  if (fit === 0 && host.starving && firstFits(free)) fit = 1;
  if (fit === 0 && lastResort(host, demand, ask.probe ?? est)) fit = 1;
  const admitDemand = Math.min(demand, fit);
  const admitSpare = host.othersWaiting ? 0 : Math.min(k - demand, fit - admitDemand);
  const admit = admitDemand + admitSpare;
  if (admit < k) limitedBy = boxTighter ? 'cgroup_limit' : 'memory_budget';
  const unmet = demand - admitDemand;
  if (unmet === 0) return { admit, limitedBy, evict: [], retire: [], covered: 0, unmetDemand: 0 };

  // Memory already on its way back, then idle preload parents, then idle workers of other pools, oldest first.
  const have = free - admitDemand * est + host.freeing;
  const lru = evictionOrder(host.idle);
  const evict: WorkerRef[] = [];
  let got = 0;
  let covered = 0;
  let used = 0;
  for (let n = 1; n <= unmet; n++) {
    const need = n * est;
    while (have + got < need && used < lru.length) got += lru[used++]!.charge;
    if (have + got < need) break;
    covered = n;
    // Keep exactly the victims this many spawns need.
    while (evict.length < used) evict.push(lru[evict.length]!);
  }
  const retire: WorkerRef[] = [];
  if (covered === 0 && host.starving && have < est && host.busy.length > 0) {
    // Nothing idle to take and no worker of our own to wait for: the biggest busy
    // worker of a pool that keeps others steps down after its request.
    retire.push([...host.busy].sort((a, b) => (b.value ?? b.charge) - (a.value ?? a.charge))[0]!);
  }
  return { admit, limitedBy, evict, retire, covered, unmetDemand: unmet };
}

/** A pool with none that nothing could make room for starts one worker past the budget, within the box. */
function lastResort(host: HostView, demand: number, size: number): boolean {
  const nothingToTake = host.idle.length === 0 && host.busy.length === 0 && host.freeing === 0;
  return host.starving && demand > 0 && nothingToTake && (host.room === undefined || host.room >= size);
}

/**
 * Idle processes in the order they are given back: preload parents of pools with no
 * worker first (a parent serves nothing; the next request of its pool starts a new one),
 * then workers, least recently used first.
 */
export function evictionOrder(idle: readonly WorkerRef[]): WorkerRef[] {
  return [...idle].sort((a, b) => (a.parent === b.parent ? a.since - b.since : a.parent ? -1 : 1));
}

/** How a log line names an idle process it gives back. */
export function idleName(v: WorkerRef): string {
  return `${v.parent ? 'idle preload parent' : 'idle worker'} ${v.pid} of pool ${v.pool}`;
}

/**
 * Workers to retire so that `excess` bytes of measured use come back: idle ones first
 * (evictionOrder); then busy ones (after their request), largest first.
 */
export function planRelief(excess: number, idle: readonly WorkerRef[], busy: readonly WorkerRef[]): WorkerRef[] {
  const out: WorkerRef[] = [];
  if (excess <= 0) return out;
  let freed = 0;
  for (const w of evictionOrder(idle)) {
    if (freed >= excess) return out;
    out.push(w);
    freed += w.value ?? w.charge;
  }
  for (const w of [...busy].sort((a, b) => (b.value ?? b.charge) - (a.value ?? a.charge))) {
    if (freed >= excess) return out;
    out.push(w);
    freed += w.value ?? w.charge;
  }
  return out;
}

export interface RecommendInput {
  estimate: number;
  /** memory_limit, 0 = off. */
  poolLimit: number;
  /** The budget left for this pool: budget - daemon - what other pools keep while idle; undefined without a budget. */
  budgetShare: number | undefined;
}

/** max_children that fits the pool's limit and its share of the budget at the estimated size; undefined when neither is set. */
export function recommendMaxChildren(r: RecommendInput): number | undefined {
  let room = Infinity;
  if (r.poolLimit > 0) room = r.poolLimit;
  if (r.budgetShare !== undefined) room = Math.min(room, r.budgetShare);
  if (room === Infinity) return undefined;
  const n = fitCount(room, r.estimate);
  return n === Infinity ? undefined : n;
}

/** Gathers one pool's workers into `into`, remembering whose each is (by reference: in a reload the old and new pool share a name). */
export function collectWorkers(owner: BudgetMember, refs: WorkerRef[], into: WorkerRef[], owners: Map<WorkerRef, BudgetMember>): void {
  for (const r of refs) {
    into.push(r);
    owners.set(r, owner);
  }
}
