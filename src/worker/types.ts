/**
 * The contract between a pool and the worker processes it spawns.
 * A worker's lifecycle (src/worker/lifecycle.ts owns the table):
 *   spawning → idle ⇄ busy → draining → stopping → exited
 *   spawning → stopping|exited (spawn timeout, spawn failure)
 * `draining` = retired (reason set) but still finishing its request.
 */

import type { SocketAddress } from '../protocol/address.js';
import type { ErrorCode } from '../errors.js';
import type { Logger } from '../log/log.js';
import type { ExitVerdict } from './exit-policy.js';

export type WorkerState = 'spawning' | 'idle' | 'busy' | 'draining' | 'stopping' | 'exited';

/** Why the manager retired a worker; undefined while it is wanted. */
export type RetireReason =
  | 'idle_timeout'
  | 'max_requests'
  | 'max_lifetime'
  | 'memory'
  | 'memory_hard'
  | 'memory_budget'
  | 'request_timeout'
  | 'spawn_timeout'
  | 'reload'
  | 'shutdown'
  | 'scale_down'
  /** An operator's rolling restart or drain (fcgi-pm restart --rolling, fcgi-pm drain). */
  | 'restart'
  | 'drain'
  /** The client went away and the request could not be cancelled (SCGI): the worker may still run it. */
  | 'client_abort';

export interface WorkerExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the manager asked it to stop; absent means it crashed or exited by itself. */
  reason: RetireReason | undefined;
  /** Milliseconds it lived. */
  uptime: number;
  /** It became ready (its socket accepted) before it went. */
  ready: boolean;
  /** Requests it finished (assigned and released); one it died under is not counted. */
  served: number;
}

export interface WorkerSpec {
  pool: string;
  command: string[];
  socket: 'fd0' | 'argv';
  env: Record<string, string>;
  cwd: string | undefined;
  uid: number | undefined;
  gid: number | undefined;
  /** Private 0700 directory where per-worker sockets live. */
  runtimeDir: string;
  spawnTimeout: number;
  killTimeout: number;
  /**
   * accept: direct: the pool's shared listening socket, given as fd 0 instead of a socket
   * of the worker's own; the worker is ready once it runs (nothing connects to probe it).
   */
  sharedSocket?: { fd: number; address: SocketAddress } | undefined;
  /** Called synchronously once the process exists, before its socket can accept (memory cgroup, oom_score_adj). */
  onStarted?: ((pid: number) => void) | undefined;
}

// ---------------------------------------------------------------------------------
// Additions by the worker owner (backwards compatible): what a pool drives, so pool
// unit tests can inject fake workers through a WorkerFactory.

/** Why a worker never became ready. Emitted at most once, always before `exit`. */
export interface WorkerSpawnFailure extends Error {
  readonly code: ErrorCode; // ErrorCodes.SPAWN_FAILED
  /** 'ENOENT', 'EACCES', ... when the OS refused; 'EXITED' when it exited before ready; 'TIMEOUT'; 'SETUP' (runtime dir, socket). */
  readonly errno: string;
}

/**
 * Events, in the order they can happen:
 *   ready        once, spawning → idle (its socket accepts; the pool may assign)
 *   spawnFailed  at most once, instead of ready (command missing, exited early, timed out)
 *   exit         exactly once, last; also after spawnFailed (then code/signal may be null).
 *                `verdict` = classifyExit(exit, wasBusy): crash? early? restart? The worker has
 *                already logged it at verdict.level; the pool should not log it again.
 */
export interface WorkerEventMap {
  ready: [];
  spawnFailed: [failure: WorkerSpawnFailure];
  exit: [exit: WorkerExit, verdict: ExitVerdict];
}

/** What a pool sees of one worker. src/worker/worker.ts implements it. */
export interface ManagedWorker {
  readonly id: number;
  /** OS pid; undefined only when the process could not be started at all. */
  readonly pid: number | undefined;
  /** Where the upstream connects. */
  readonly address: SocketAddress;
  readonly state: WorkerState;
  readonly retireReason: RetireReason | undefined;
  /** Requests assigned so far. */
  readonly requests: number;
  readonly startedAt: number; // epoch ms
  readonly lastUsedAt: number; // epoch ms (start, assign, release)
  /** URI of the running request and when it was assigned (busy/draining only). */
  readonly current: { uri: string; startedAt: number } | undefined;
  /** idle → busy. Throws (in development) unless idle. */
  assign(uri?: string): void;
  /** busy → idle, or draining → stopping (it is then stopped). No-op once stopping/exited. */
  release(): void;
  /** Graceful: idle/spawning → stopping now; busy → draining (stopped at release). */
  retire(reason: RetireReason): void;
  /** Stop now even if busy: SIGTERM, SIGKILL after killTimeout. Idempotent; resolves with the one exit. */
  stop(reason: RetireReason): Promise<WorkerExit>;
  on<K extends keyof WorkerEventMap>(event: K, listener: (...args: WorkerEventMap[K]) => void): this;
  once<K extends keyof WorkerEventMap>(event: K, listener: (...args: WorkerEventMap[K]) => void): this;
  off<K extends keyof WorkerEventMap>(event: K, listener: (...args: WorkerEventMap[K]) => void): this;
}

/** How a pool creates workers; `Worker.spawn` is the real one. */
export type WorkerFactory = (spec: WorkerSpec, logger: Logger, id: number) => ManagedWorker;
