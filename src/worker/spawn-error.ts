/**
 * Why a worker never became ready. One class, stable code SPAWN_FAILED; `errno` says
 * which way: an OS error name (ENOENT, EACCES, …), 'EXITED' (ended before ready),
 * 'TIMEOUT' (not ready within spawn_timeout) or 'SETUP' (our side: runtime dir, socket).
 */
import { ErrorCodes } from '../errors.js';
import type { WorkerSpawnFailure } from './types.js';

export class WorkerSpawnError extends Error implements WorkerSpawnFailure {
  readonly code = ErrorCodes.SPAWN_FAILED;
  readonly errno: string;
  readonly command: string;
  constructor(command: string, errno: string, message: string) {
    super(message);
    this.name = 'WorkerSpawnError';
    this.command = command;
    this.errno = errno;
  }
}
