/**
 * The contract between a pool and the worker processes it spawns. A worker is a process
 * handle (spawn, ready, signal, exit); its state in the pool (idle, busy, retiring) is the
 * pool's table (src/pool/workers/supervisor-table.ts), which the worker reads at its exit
 * through its WorkerOwner.
 */

import type { SocketAddress } from '../protocol/address.js';
import type { ErrorCode } from '../errors.js';
import type { Logger } from '../log/log.js';
import type { Clock } from '../util/clock.js';

/** Why the manager retired a worker; undefined while it is wanted. */
export type RetireReason =
  | 'idle_timeout'
  | 'max_requests'
  | 'max_lifetime'
  | 'memory'
  | 'memory_hard'
  | 'memory_budget'
  /** max_children_total: a pool above its fair share gave a place to one below it. */
  | 'host_share'
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
  /** A request ran on it when it went (its exit may lose it). */
  busy: boolean;
  /** fcgi-pm ended it idle with SIGKILL at once (WorkerSpec.killIdle), not after SIGTERM's grace. */
  killedIdle?: boolean;
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
  /** Nice value set right after spawn (process_priority); undefined = fcgi-pm's own. */
  priority?: number | undefined;
  /**
   * Stopped while it runs no request, it gets SIGKILL at once: php-cgi answers SIGTERM
   * with PHP's module shutdown (each child of a group too: 15–25 ms of CPU each, and the
   * copy-on-write faults of freeing what it inherited), which serves nothing once no
   * script runs (php-cgi has no fastcgi_finish_request: its END_REQUEST comes after the
   * request's own shutdown). On a reload that CPU competes with the new generation's start.
   */
  killIdle?: boolean | undefined;
  /** Called synchronously once the process exists, before its socket can accept (memory cgroup, oom_score_adj). */
  onStarted?: ((pid: number) => void) | undefined;
}

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/** Why a worker never became ready. Emitted at most once, always before `exit`. */
export interface WorkerSpawnFailure extends Error {
  readonly code: ErrorCode; // ErrorCodes.SPAWN_FAILED
  /** 'ENOENT', 'EACCES', ... when the OS refused; 'EXITED' when it exited before ready; 'TIMEOUT'; 'SETUP' (runtime dir, socket). */
  readonly errno: string;
}

/**
 * Events, in the order they can happen:
 *   ready        once (its socket accepts; the pool may send it requests)
 *   spawnFailed  at most once, instead of ready (command missing, exited early, timed out)
 *   exit         exactly once, last; also after spawnFailed (then code/signal may be null).
 *                The pool judges it and logs its one line (src/pool/workers/exit-verdict.ts).
 */
export interface WorkerEventMap {
  ready: [];
  spawnFailed: [failure: WorkerSpawnFailure];
  exit: [exit: WorkerExit];
}

/**
 * What the pool that owns a worker tells it: the pool's clock, and what the pool knows
 * that the worker's exit line and classification need, read when it exits.
 */
export interface WorkerOwner {
  readonly clock: Clock;
  /** A request runs on it now (its exit may lose it). */
  busy(): boolean;
  /** Requests the pool gave it. */
  requests(): number;
  /** Why the pool wants it gone (s6's "want"); undefined while it is wanted. */
  reason(): RetireReason | undefined;
}

/** A worker process as a pool drives it. src/worker/worker.ts implements it. */
export interface ManagedWorker {
  readonly id: number;
  /** OS pid; undefined only when the process could not be started at all. */
  readonly pid: number | undefined;
  /** Where the upstream connects. */
  readonly address: SocketAddress;
  /**
   * SIGTERM now (to a process not started yet: it is not started), SIGKILL after
   * killTimeout; `idle` (it runs no request) and WorkerSpec.killIdle: SIGKILL now.
   * Idempotent; resolves with the one exit. The owner's `reason()` says why.
   */
  stop(idle?: boolean): Promise<WorkerExit>;
  /**
   * An exec in place of the daemon is about to happen: when this worker can go on in the
   * new code (ready, on a Unix socket of its own, pipes the daemon knows), its record;
   * from then on this handle reports nothing. Else undefined (it is stopped as usual).
   */
  handOver?(): HandedWorker | undefined;
  on<K extends keyof WorkerEventMap>(event: K, listener: (...args: WorkerEventMap[K]) => void): this;
  once<K extends keyof WorkerEventMap>(event: K, listener: (...args: WorkerEventMap[K]) => void): this;
  off<K extends keyof WorkerEventMap>(event: K, listener: (...args: WorkerEventMap[K]) => void): this;
}

/** How a pool creates workers; `Worker.spawn` is the real one. */
export type WorkerFactory = (spec: WorkerSpec, logger: Logger, id: number, owner: WorkerOwner) => ManagedWorker;

/**
 * A running worker handed to the new code by an exec in place of the daemon (the same
 * pid: it is still our child): what the new code needs to adopt it, as JSON in the
 * environment (src/daemon/upgrade.ts). Its stdout and stderr pipes are inherited at
 * their numbers.
 */
export interface HandedWorker {
  pid: number;
  /** The Unix socket it accepts on (in the daemon's private runtime dir). */
  socket: string;
  /** The read ends of its stdout and stderr pipes. */
  out: number;
  err: number;
  /** Requests the pool gave it so far. */
  requests: number;
  /** Epoch ms it was spawned and became ready. */
  startedAt: number;
  readyAt: number;
}

/** How a pool adopts a handed worker: `Worker.adopt` is the real one. */
export type WorkerAdopter = (handed: HandedWorker, spec: WorkerSpec, logger: Logger, id: number, owner: WorkerOwner) => ManagedWorker;
