/**
 * Takes the status snapshot: once per request for status, from the daemon's pools (all
 * generations, generations.ts), listeners, in-flight requests (request-board.ts) and
 * memory governor. Worker CPU and memory come from the governor's samples
 * (WorkerSnapshot.memory); a worker it has not sampled is read with pidusage when the
 * per-process view is asked for.
 */
import { countersOf, foldCounters } from '../pool/counters.js';
import type { Pool, PoolSnapshot, WorkerSnapshot } from '../pool/types.js';
import type { Exchange } from '../protocol/exchange.js';
import type { PoolGenerations, PoolGroup } from './generations.js';
import type { OutcomeCounter } from './outcomes.js';
import { requestStatus, type RequestBoard } from './request-board.js';
import {
  SNAPSHOT_FORMAT,
  type DaemonStatus,
  type ListenerStatus,
  type MemoryBudgetView,
  type PoolMemoryView,
  type PoolStatus,
  type SitesView,
  type StatusSnapshot,
  type WorkerStatus,
} from './types.js';

export interface SnapshotSources {
  version: string;
  pid: number;
  startedAt: number;
  state(): string;
  configSource(): string;
  controlSocket(): string | undefined;
  reloads(): DaemonStatus['reloads'];
  listeners(): ListenerStatus[];
  pools(): ReadonlyMap<string, Pool>;
  generations: PoolGenerations;
  board: RequestBoard;
  /** Responses by status class and latency, per pool name. */
  outcomes?: OutcomeCounter | undefined;
  /** The governor's BudgetSnapshot, when it runs. */
  memory?: (() => unknown) | undefined;
  /** vhosts counts; `all`: with every defined site. */
  sites?: ((all: boolean) => SitesView | undefined) | undefined;
}

export interface SnapshotOptions {
  /** Sample CPU/memory of workers the governor has not measured (per-process views). */
  processes?: boolean;
  /** List every defined vhost site, not only the count. */
  allSites?: boolean;
  /** Statuses of idle pools kept from an earlier snapshot of this caller (the dashboard's samples). */
  reuse?: StatusReuse | undefined;
}

/**
 * A kept status is made again after this long even when its revision did not move: a
 * safety net for what moves without an event (the revision counts samples that change a
 * worker's memory or CPU, so those no longer need it).
 */
export const REUSE_MAX_AGE_MS = 60_000;

/**
 * Pool statuses kept between one caller's snapshots: an idle pool's (Pool.idleRevision)
 * is made again only when an event changed it, or REUSE_MAX_AGE_MS after it was made. A
 * dashboard over 200 idle sites made every pool's status again at every sample, most of
 * what an idle daemon allocated with a page open. Only for readers that take an idle
 * pool's memory and CPU figures as up to that old; status and metrics make them afresh.
 */
export class StatusReuse {
  private readonly kept = new WeakMap<Pool, { revision: number; base: PoolGroup['base']; at: number; status: PoolStatus }>();

  /** The group's status: the kept one when its one generation is idle and nothing changed it since; else `make(group)`'s, kept when idle. */
  status(group: PoolGroup, nowPerf: number, make: (group: PoolGroup) => PoolStatus | undefined): PoolStatus | undefined {
    const pool = group.current;
    const revision = pool !== undefined && group.retiring.length === 0 ? pool.idleRevision?.() : undefined;
    if (revision === undefined) {
      // What was kept from before is not reused after a busy spell, whatever it says.
      if (pool !== undefined) this.kept.delete(pool);
      return make(group);
    }
    const k = this.kept.get(pool!);
    // A generation gone since (its counters folded into `base`) changes the totals too.
    if (k !== undefined && k.revision === revision && k.base === group.base && nowPerf - k.at < REUSE_MAX_AGE_MS) return k.status;
    const status = make(group);
    if (status !== undefined) this.kept.set(pool!, { revision, base: group.base, at: nowPerf, status });
    return status;
  }
}

interface WorkerMemoryLike {
  pss?: number | undefined;
  rss?: number;
  cpu?: number;
  peak?: number;
  measure?: string;
}

function snapOrUndefined(p: Pool): PoolSnapshot | undefined {
  try {
    return p.snapshot();
  } catch {
    return undefined;
  }
}

/** What every pool's status reads of the requests in flight: walked once per snapshot, not once per pool. */
interface InFlight {
  board: RequestBoard;
  running: Map<number, Exchange>;
  /** By pool: performance.now() of its oldest queued request's start. */
  oldestQueued: Map<string, number>;
}

/** One pool name's status from its live generation, draining ones and folded counters. */
function poolStatus(group: PoolGroup, gens: PoolGenerations, inFlight: InFlight, nowPerf: number, nowEpoch: number, outcomes: OutcomeCounter | undefined): PoolStatus | undefined {
  const live: Array<{ snap: PoolSnapshot; retiring: boolean; pool: Pool }> = [];
  if (group.current) {
    const s = snapOrUndefined(group.current);
    if (s) live.push({ snap: s, retiring: false, pool: group.current });
  }
  for (const p of group.retiring) {
    const s = snapOrUndefined(p);
    if (s) live.push({ snap: s, retiring: true, pool: p });
  }
  const head = live[0];
  if (head === undefined) return undefined;
  // Counters over every generation (live, draining, and those gone), gauges over the live ones.
  // One generation and none gone (most pools): its snapshot, made for this call, is the total.
  const totals = live.length === 1 && group.base === undefined ? head.snap : [...live.slice(1).map((l) => l.snap), ...(group.base ? [group.base] : [])].reduce(foldCounters, countersOf(head.snap));
  const liveSum = (f: (s: PoolSnapshot) => number): number => live.reduce((n, l) => n + f(l.snap), 0);

  const workers: WorkerStatus[] = [];
  for (const l of live) for (const w of l.snap.workers) workers.push(workerStatus(w, l.retiring, inFlight.running, inFlight.board, nowPerf, nowEpoch));
  const processes = { spawning: 0, idle: 0, busy: 0, draining: 0, stopping: 0, total: 0 };
  for (const w of workers) {
    if (w.state in processes && w.state !== 'total') processes[w.state as keyof typeof processes]++;
    processes.total++;
  }
  const s = head.snap;
  const memory = s.memory as PoolMemoryView | undefined;
  return {
    name: group.name,
    kind: s.kind,
    pm: s.kind === 'external' ? 'external' : (s.pm ?? 'ondemand'),
    state: group.current ? (s.state ?? 'running') : 'stopping',
    startedAt: gens.createdAt(head.pool),
    generations: live.length,
    maxChildren: s.kind === 'external' ? undefined : s.maxChildren,
    capacity: s.capacity,
    direct: s.direct === undefined ? undefined : { ...s.direct },
    directFallback: s.directFallback === undefined ? undefined : { ...s.directFallback },
    accepted: totals.accepted,
    completed: totals.completed,
    aborted: totals.aborted,
    active: liveSum((x) => x.active),
    maxActive: totals.maxActive,
    queue: {
      length: liveSum((x) => x.queued),
      max: totals.maxQueued,
      limit: s.queueLimit,
      oldestWaitMs: Math.round(nowPerf - (inFlight.oldestQueued.get(group.name) ?? nowPerf)),
      waits: totals.queueWait,
    },
    processes,
    rejected: totals.rejected,
    errors: totals.errors,
    maxChildrenReached: totals.maxChildrenReached,
    crashes: totals.crashes,
    recycles: totals.recycles,
    slowRequests: totals.slowRequests,
    spawns: totals.spawnLatency,
    backends: s.backends.map((b) => ({ ...b })),
    // Made for this snapshot (figures() of the pool's memory part): not copied again.
    memory,
    cpu: s.cpu === undefined ? undefined : { ...s.cpu },
    preload: s.preload === undefined ? undefined : { ...s.preload },
    workers,
    // In the literal, not added after: a field added to a made object costs a new hidden class.
    outcomes: outcomes?.of(group.name),
    rps: outcomes?.rate(group.name, nowPerf),
  };
}

function workerStatus(w: WorkerSnapshot, retiring: boolean, running: Map<number, Exchange>, board: RequestBoard, nowPerf: number, nowEpoch: number): WorkerStatus {
  const m = (w as { memory?: WorkerMemoryLike }).memory;
  const out: WorkerStatus = {
    pid: w.pid,
    state: w.state,
    requests: w.requests,
    startedAt: w.startedAt,
    lastUsedAt: w.lastUsedAt,
  };
  if (retiring) out.retiring = 'reload';
  if (w.sampled === true) out.sampled = true;
  if (w.slots !== undefined) {
    out.slots = w.slots;
    out.busySlots = w.busySlots;
    out.children = (w.children ?? []).map((c) => ({ pid: c.pid, memory: c.memory?.pss ?? c.memory?.rss, measure: c.memory?.measure }));
  }
  if (m !== undefined) {
    out.cpu = m.cpu;
    out.memory = m.pss ?? m.rss;
    out.memoryPeak = m.peak;
    out.measure = m.measure;
  }
  const ex = running.get(w.pid);
  if (ex !== undefined && (w.state === 'busy' || w.state === 'draining')) out.request = requestStatus(ex, nowPerf, nowEpoch);
  else if (w.current !== undefined) {
    out.request = { method: '', uri: w.current.uri, script: '', contentLength: 0, user: '', remote: '', startedAt: w.current.startedAt, durationMs: nowEpoch - w.current.startedAt };
  } else {
    const last = board.lastStatus(w.pid, nowPerf, nowEpoch);
    if (last !== undefined) out.last = last;
  }
  return out;
}

/** CPU (%) and RSS for workers the memory governor has not sampled. */
async function sampleUnmeasured(pools: PoolStatus[]): Promise<void> {
  const todo: WorkerStatus[] = [];
  for (const p of pools) for (const w of p.workers) if (w.memory === undefined && w.pid > 0) todo.push(w);
  if (todo.length === 0) return;
  // Loaded when first needed: on Linux the governor's /proc sampler measures the workers.
  const { default: pidusage } = await import('pidusage');
  await Promise.all(
    todo.map(async (w) => {
      try {
        const st = await pidusage(w.pid);
        w.cpu = Math.round(st.cpu * 100) / 100;
        w.memory = st.memory;
        w.measure = 'rss';
      } catch {
        // exited meanwhile
      }
    }),
  );
}

export async function takeSnapshot(src: SnapshotSources, opts: SnapshotOptions = {}): Promise<StatusSnapshot> {
  const nowPerf = performance.now();
  const nowEpoch = Date.now();
  const pools: PoolStatus[] = [];
  const inFlight: InFlight = { board: src.board, running: src.board.runningByPid(), oldestQueued: src.board.oldestQueued() };
  const reuse = opts.processes === true ? undefined : opts.reuse;
  const statusOf = (g: PoolGroup): PoolStatus | undefined => poolStatus(g, src.generations, inFlight, nowPerf, nowEpoch, src.outcomes);
  for (const g of src.generations.groups(src.pools())) {
    const st = reuse === undefined ? statusOf(g) : reuse.status(g, nowPerf, statusOf);
    if (st) pools.push(st);
  }
  const alive = new Set<number>();
  for (const p of pools) for (const w of p.workers) alive.add(w.pid);
  src.board.prune(alive);
  if (opts.processes) await sampleUnmeasured(pools);
  let memory: MemoryBudgetView | undefined;
  try {
    memory = src.memory?.() as MemoryBudgetView | undefined;
  } catch {
    memory = undefined;
  }
  return {
    format: SNAPSHOT_FORMAT,
    daemon: {
      version: src.version,
      pid: src.pid,
      state: src.state(),
      startedAt: src.startedAt,
      now: nowEpoch,
      config: src.configSource(),
      controlSocket: src.controlSocket(),
      reloads: src.reloads(),
      rss: process.memoryUsage.rss(),
    },
    listeners: src.listeners(),
    pools,
    memory,
    sites: src.sites?.(opts.allSites === true),
  };
}
