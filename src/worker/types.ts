/**
 * The contract between a pool and the worker processes it spawns.
 * A worker's lifecycle (src/worker/lifecycle.ts owns the table):
 *   spawning → idle ⇄ busy → draining → stopping → exited
 *   spawning → stopping|exited (spawn timeout, spawn failure)
 * `draining` = retired (reason set) but still finishing its request.
 */

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
  | 'scale_down';

export interface WorkerExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the manager asked it to stop; absent means it crashed or exited by itself. */
  reason: RetireReason | undefined;
  /** Milliseconds it lived. */
  uptime: number;
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
}
