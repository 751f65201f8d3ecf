/**
 * The status snapshot: everything `fcgi-pm status` and the status pages show, taken once
 * (snapshot.ts) and rendered by one pure function per format (render-*.ts). Plain JSON
 * data (times are epoch ms), so the control socket sends it as is and the CLI renders
 * it; fields.ts says once how each figure is named in every format.
 */

export const SNAPSHOT_FORMAT = 'fcgi-pm-status/1';
import type { PreloadParentStatus } from '../pool/types.js';
import type { PoolCounters, Summary } from '../pool/counters.js';
import type { DirectFallback, DirectSnapshot, PoolSnapshot } from '../pool/types.js';


export interface StatusSnapshot {
  format: typeof SNAPSHOT_FORMAT;
  daemon: DaemonStatus;
  listeners: ListenerStatus[];
  pools: PoolStatus[];
  /** The memory governor's host view (budget, used, committed...), when it runs. */
  memory?: MemoryBudgetView | undefined;
  /** vhosts: how many sites are defined, active (have a pool: listed in `pools`), broken. */
  sites?: SitesView | undefined;
}

export interface SitesView {
  source: string;
  defined: number;
  active: number;
  broken: number;
  /** The broken definitions by site id, with what is wrong (a known site keeps serving its previous one). */
  brokenSites: Array<{ id: string; error: string }>;
  /** Every defined site, when asked (status --all-sites). */
  list?: Array<{ id: string; names: string[]; documentRoot: string; active: boolean }> | undefined;
}

export interface DaemonStatus {
  version: string;
  pid: number;
  /** 'starting' | 'running' | 'reloading' | 'stopping' | ... */
  state: string;
  startedAt: number;
  /** When the snapshot was taken. */
  now: number;
  config: string;
  controlSocket: string | undefined;
  reloads: { ok: number; failed: number; last?: { at: number; ok: boolean; error?: string | undefined } | undefined };
  /** The daemon's own resident memory, bytes. */
  rss: number;
}

export interface ListenerStatus {
  address: string;
  protocol: string;
  pool: string;
  connections: number;
  /** Connections taken since it started (a front end that keeps its connections alive takes few). */
  accepted: number;
  /** Connections closed unread because the client is not in allowed_clients. */
  refused: number;
  /** Connections answered 503 and closed at accept: max_conns or the open-files reserve. */
  overflowed?: number | undefined;
  /** Every request it took, answered by a pool or before any (outcomes.ts), once any finished. */
  outcomes?: AnswerCounts | undefined;
  name?: string | undefined;
  statusPath?: string | undefined;
  pingPath?: string | undefined;
  /** Taken over from systemd (socket activation). */
  inherited?: boolean | undefined;
}

export type { Summary };

export interface PoolStatus {
  name: string;
  kind: PoolSnapshot['kind'];
  /** accept: direct: the shared socket (the pool's other figures count its overflow only). */
  direct?: DirectSnapshot | undefined;
  /** accept: direct in fallback (no native addon): proxied, fcgi-pm listening on direct_listen. */
  directFallback?: DirectFallback | undefined;
  /** static | dynamic | ondemand, or 'external'. */
  pm: string;
  /** running | failing | stopping | stopped */
  state: string;
  /** Epoch ms this pool (its current generation) was created: start or the reload that changed it. */
  startedAt: number;
  /** Pool objects counted: 1, more while pools replaced by a reload drain. */
  generations: number;
  maxChildren: number | undefined;
  /** Spawned pools: requests it can run at once (max_children × seats per worker); busy ÷ this is its utilization. */
  capacity?: number | undefined;
  accepted: number;
  completed: number;
  aborted: number;
  active: number;
  maxActive: number;
  queue: {
    length: number;
    max: number;
    limit: number;
    /** Age of the oldest waiting request, ms (0 when none). */
    oldestWaitMs: number;
    /** Time requests spent waiting, when the pool reports it. */
    waits?: Summary | undefined;
  };
  /** Live workers by state; total = all of them. */
  processes: { spawning: number; idle: number; busy: number; draining: number; stopping: number; total: number };
  rejected: PoolCounters['rejected'];
  errors: PoolCounters['errors'];
  maxChildrenReached: number;
  crashes: number;
  recycles: Record<string, number>;
  slowRequests: number;
  /** Time from spawn to ready, when the pool reports it. */
  spawns?: Summary | undefined;
  backends: Array<{ address: string; active: number; down: boolean }>;
  memory?: PoolMemoryView | undefined;
  /** The pool's CPU cgroup: its directory, cpu_weight, and the kernel file and value it set (cpu.shares or cpu.weight). */
  cpu?: { dir: string; weight: number; file: string; value: string } | undefined;
  /** Requests finished per second over the last 10 s (outcomes.ts RATE_WINDOW_S). */
  rps?: number | undefined;
  /** Finished responses by status class and by latency (outcomes.ts), once any finished. */
  outcomes?: PoolOutcomes | undefined;
  /** preload: the parent the workers are forked from (pid, forks served, memory: counted in the pool's). */
  preload?: PreloadParentStatus | undefined;
  workers: WorkerStatus[];
}

/** Answers by status class, and those fcgi-pm gave itself (refusals, failures) by error code. Cumulative. */
export interface AnswerCounts {
  status: { '1xx': number; '2xx': number; '3xx': number; '4xx': number; '5xx': number };
  /** ERR_* code → answers: the script guard's 403/404, ERR_VHOST_UNKNOWN, the authorizer's 503, queue full, backend failures... */
  refusals: Record<string, number>;
}

/** counts[i]: requests that took ≤ boundsMs[i] (and more than the bound before); the last, more than every bound. */
export interface Histogram {
  boundsMs: number[];
  counts: number[];
  /** Of all the times counted, ms. */
  sumMs: number;
}

/** Cumulative: subtract two snapshots' counts for an interval. */
export interface PoolOutcomes extends AnswerCounts {
  /** From the request's arrival to its end. */
  latency: Histogram;
  /** Time in the queue of requests that reached a worker or backend (0 for most). */
  queueWait: Histogram;
  /** A pool with an `authorizer`: its decisions about the requests that finished. */
  authorizer?: PoolAuthorizerCounts | undefined;
  /** A pool that got authorizer requests from a front end (lighttpd, Apache): its answers. */
  authorizerAnswers?: PoolAuthorizerAnswers | undefined;
}

/** allowed: a 200 went back; denied: another status; failed: fcgi-pm answered an error instead (502, 503, 504). */
export interface PoolAuthorizerAnswers {
  allowed: number;
  denied: number;
  failed: number;
}

/** allowed: granted by the authorizer; cached: granted from authorizer_cache; denied: its answer went to the client; failed: 503 ERR_AUTHORIZER_FAILED. */
export interface PoolAuthorizerCounts {
  allowed: number;
  cached: number;
  denied: number;
  failed: number;
}

export interface RequestStatus {
  method: string;
  uri: string;
  script: string;
  contentLength: number;
  user: string;
  remote: string;
  /** Epoch ms it arrived. */
  startedAt: number;
  /** So far (running) or in all (finished). */
  durationMs: number;
}

export interface WorkerStatus {
  pid: number;
  state: string;
  /** Why it is on its way out (e.g. 'reload' for a worker of a replaced pool). */
  retiring?: string | undefined;
  /** accept: direct: state from /proc sampling; `requests` counts connections seen (a lower bound), no per-request details. */
  sampled?: boolean | undefined;
  requests: number;
  startedAt: number;
  lastUsedAt: number;
  /** Percent of one CPU, latest sample. */
  cpu?: number | undefined;
  /** Bytes: PSS where known, else RSS (`measure`). */
  memory?: number | undefined;
  memoryPeak?: number | undefined;
  measure?: string | undefined;
  request?: RequestStatus | undefined;
  /** The last finished request (idle workers). */
  last?: RequestStatus | undefined;
  /** group_size > 1: requests it takes at once, runs now, and its php-cgi children (JSON only). */
  slots?: number | undefined;
  busySlots?: number | undefined;
  children?: Array<{ pid: number; memory?: number | undefined; measure?: string | undefined }> | undefined;
}

/** Read structurally from PoolSnapshot.memory (src/memory/types.ts PoolMemoryFigures). */
export interface PoolMemoryView {
  measure?: string;
  total?: number;
  committed?: number;
  limit?: number | undefined;
  estimate?: number;
  recommendedMaxChildren?: number | undefined;
  refusedSpawns?: number;
  recycled?: number;
  killed?: number;
  evicted?: number;
  waitingForBudget?: boolean;
}

/** Read structurally from the governor's BudgetSnapshot. */
export interface MemoryBudgetView {
  budget?: number | undefined;
  setting?: string;
  /** How the budget was found: "80% of cgroup limit 64.0MiB (/sys/fs/cgroup/memory/box)". */
  derivation?: string | undefined;
  /** The memory cgroup limit fcgi-pm runs under. */
  cgroup?: { dir: string; limit: number; headroom: number; used: number | undefined } | undefined;
  measure?: string;
  used?: number;
  committed?: number;
  available?: number | undefined;
  refusedSpawns?: number;
  evictions?: number;
  overBudget?: number;
}
