/**
 * What front ends and the daemon see of a pool.
 */
import type { PoolConfig } from '../config/types.js';
import type { HandedWorker } from '../worker/types.js';
import type { Exchange } from '../protocol/exchange.js';
import type { CpuPlacementView } from '../memory/cpu-cgroup.js';
import type { PoolMemoryFigures, WorkerMemoryFigures } from '../memory/types.js';
import type { Logger } from '../log/log.js';
import type { SocketAddress } from '../protocol/address.js';
import type { Endpoint, UpstreamOptions } from '../upstream/types.js';
import type { PoolCounters } from './counters.js';

export interface WorkerSnapshot {
  pid: number;
  state: string;
  requests: number;
  startedAt: number; // epoch ms
  lastUsedAt: number; // epoch ms
  /** Current request's SCRIPT_NAME/REQUEST_URI and start, if busy. */
  current: { uri: string; startedAt: number } | undefined;
  /** Latest memory/CPU sample (spawned pools, once sampled). */
  memory?: WorkerMemoryFigures;
  /** group_size > 1: the requests it takes at once, and how many it runs now. */
  slots?: number;
  busySlots?: number;
  /** group_size > 1: the parent's children (pids from /proc) and their memory. */
  children?: Array<{ pid: number; memory?: WorkerMemoryFigures }>;
  /**
   * accept: direct: state and figures come from sampling /proc, not from requests the
   * daemon handed out: `requests` counts connections seen (a lower bound), `current`
   * has no URI, and state may be 'unknown' (no access to /proc/PID/syscall).
   */
  sampled?: boolean;
}

/** accept: direct: what the kernel and the watch know of the shared socket. */
export interface DirectSnapshot {
  address: string;
  /** Connections in the accept queue now, and its limit; undefined once closed. */
  waiting: number | undefined;
  backlog: number | undefined;
  /** Connections the watch saw arrive (direct and overflow), since `since`. */
  arrivals: number;
  /** Overflow requests running on the direct socket now. */
  overflowActive: number;
  /** limit_extensions / script_roots run inside the workers (auto_prepend_file). */
  guard: boolean;
  since: number;
}

/** accept: direct without the native addon: the pool is proxied, fcgi-pm listening on its direct_listen. */
export interface DirectFallback {
  address: string;
  /** Why the shared socket cannot be had here. */
  reason: string;
}

/** A pool now: its counters (counters.ts) and what it holds at this moment. */
export interface PoolSnapshot extends PoolCounters {
  name: string;
  /** direct: requests, queue and errors count the overflow only (the direct path has no per-request figures). */
  kind: 'external' | 'spawned' | 'direct';
  pm: string | undefined;
  /** 'running' | 'failing' (crash limit reached: answering 503) | 'stopping' | 'stopped'. */
  state?: string;
  queued: number;
  /** queue_limit as the pool runs it (a site's pool has no entry in the config file). */
  queueLimit: number;
  /** Spawned pools: max_children as the pool runs it. */
  maxChildren?: number;
  /** Spawned pools: requests the pool can run at once (max_children × seats per worker), the utilization's denominator. */
  capacity?: number;
  active: number;
  workers: WorkerSnapshot[];
  backends: Array<{ address: string; active: number; down: boolean }>;
  /** Spawned pools: measured total, limit, estimate, recommended max_children (docs/memory.md). */
  memory?: PoolMemoryFigures;
  /** group_size > 1: requests each worker takes at once. */
  slotsPerWorker?: number;
  /**
   * The pool's resident parent, counted in its memory: preload's parent the workers are
   * forked from, or resident_parent's paused php-cgi parent while the pool is at warm zero.
   */
  preload?: PreloadParentStatus;
  direct?: DirectSnapshot;
  directFallback?: DirectFallback;
  /** The pool's CPU cgroup and cpu_weight, when its workers have one. */
  cpu?: CpuPlacementView;
}

/** A preload pool's parent: pid, forks served, its latest measure once sampled. */
export interface PreloadParentStatus {
  pid: number;
  ready: boolean;
  /** Workers forked (preload), or times woken (a php-cgi parent). */
  forks: number;
  /** 'php-cgi': resident_parent's paused parent; absent: a preload parent. */
  kind?: 'php-cgi' | undefined;
  memory?: number | undefined;
  measure?: string | undefined;
}

/** Which files a pool may run (limit_extensions, script_roots); the front ends check SCRIPT_FILENAME against it. */
export interface ScriptRules {
  /** Allowed endings such as ".php"; empty = any name. */
  readonly extensions: readonly string[];
  /** Directories the real path must lie in; empty = anywhere. */
  readonly roots: readonly string[];
}

/** `authorizer`, `authorizer_cache` and `authorizer_cache_key` of a pool (src/frontend/authorize.ts acts on them). */
export interface AuthorizerRules {
  readonly pool: string;
  /** ms a grant is kept; 0 = no cache. */
  readonly cacheMs: number;
  readonly cacheKey: readonly string[];
}

/** A reload's new generation: as many seats ready as the one it replaces had, before it takes a request. */
/** Why a pool stops: the daemon's stop, a reload that replaced it, or an exec in place of the daemon (idle workers may be handed on). */
export type StopReason = 'shutdown' | 'reload' | 'upgrade';

export interface WarmStart {
  seats: number;
  /** Workers started at once; the next step waits for them to be ready. */
  step: number;
  /**
   * A reload whose old generation serves meanwhile (the hand-over): start() resolves once
   * the first step is ready, and each further step starts once the previous one's workers
   * have finished a request (or were ready PACE_MS without one), so that a reload under
   * load loads the application in one cold worker per step at a time, and a reload that a
   * newer one replaces has not started workers that never serve.
   */
  afterServed?: boolean;
  /** Spawned pools: workers the code before an exec in place of the daemon handed on, adopted first (they count toward `seats`). */
  adopt?: readonly HandedWorker[];
}

export interface Pool {
  readonly name: string;
  /** undefined: the pool runs whatever it is asked (no limit_extensions, no script_roots). */
  readonly scriptRules?: ScriptRules | undefined;
  /** The pool asked before each request is dispatched here (`authorizer`), and its cache; undefined: none. */
  readonly authorizer?: AuthorizerRules | undefined;
  /** `script` as a CGI value (latin1): every request runs this file (dispatch sets SCRIPT_FILENAME to it). */
  readonly script?: string | undefined;
  /** Takes ownership of the exchange: it will be answered (response or error) exactly once. */
  dispatch(ex: Exchange): void;
  /**
   * Pools that can tell: a number that grows with every event that changes what status
   * shows of the pool while it is idle; undefined while requests run or wait (status kept
   * between two dashboard samples is made again then: control/snapshot.ts StatusReuse).
   */
  idleRevision?(): number | undefined;
  /**
   * Spawns the workers static/dynamic modes start with, or `warm.seats` when more (in
   * steps of `warm.step` workers); resolves when they are ready or failed.
   */
  start(warm?: WarmStart): Promise<void>;
  /**
   * Stops taking requests (new ones get 503 SHUTTING_DOWN), lets queued and running ones
   * finish for up to timeoutMs, then stops every worker (SIGTERM → kill_timeout → SIGKILL).
   * `reason` is the workers' retire reason: 'reload' when a reload replaced the pool.
   */
  stop(timeoutMs: number, reason?: StopReason): Promise<void>;
  /**
   * Spawned pools, an exec in place is coming: the sockets of the workers that serve now
   * and can be handed on (the upgrade's bridge sends requests there meanwhile); from now on
   * none of them is stopped for being idle. `false`: the upgrade failed, idle stops resume.
   */
  holdForHandover?(hold?: boolean): string[];
  /**
   * Pools whose requests fcgi-pm hands to workers it spawned: when `next` differs from the
   * running settings only in scaling keys (retune.ts), the function that applies it with the
   * workers the pool has (a reload calls it at its commit); undefined: a reload replaces the
   * pool. Absent: always replaced.
   */
  retune?(next: PoolConfig): (() => void) | undefined;
  /**
   * Spawned pools (a reload's hand-over, handover.ts): what the next request would meet
   * ('warm': an idle seat of a worker that has finished a request; 'cold': of one that has
   * not; 'wait': none idle), how many workers run their first requests (none finished yet),
   * and how many are up and were given none. A php-cgi group is one worker: its first
   * request warms every child's (they share its parent's opcache memory). undefined: the
   * pool cannot tell or takes no request (stopping).
   */
  warmth?(): Warmth | undefined;
  /** After a stop for 'upgrade': the workers handed on to the new code (spawned pools). */
  handedOn?(): readonly HandedWorker[];
  snapshot(): PoolSnapshot;
  /** Spawned pools: retire every worker (busy ones after their request); see Supervisor.drain. */
  drain?(): Promise<PoolActionReport>;
  /** Spawned pools: replace the workers one at a time; see Supervisor.rollingRestart. */
  rollingRestart?(): Promise<PoolActionReport>;
}

/** Pool.warmth's answer. */
export interface Warmth {
  next: 'warm' | 'cold' | 'wait';
  firstRunning: number;
  unserved: number;
  /** Workers still to come: starting, or not spawned yet by a start paced by first requests (WarmStart.afterServed). */
  pending: number;
}

/** What drain or a rolling restart did: the pids retired, and those started in their place. */
export interface PoolActionReport {
  pool: string;
  action: 'drain' | 'restart';
  retired: number[];
  started: number[];
}

/** Makes the connection side of one backend or worker (upstream/endpoint.ts in production, fakes in tests). */
export type EndpointFactory = (address: SocketAddress, opts: UpstreamOptions, logger: Logger) => Endpoint;
