/**
 * Builds a pool from its config. STUB signature; the pool owner implements.
 */
import type { Logger } from '../log/log.js';
import type { PoolConfig } from '../config/types.js';
import type { Pool } from './types.js';

export interface PoolDeps {
  logger: Logger;
  /** Private 0700 directory for this daemon's worker sockets. */
  runtimeDir: string;
}

export declare function createPool(cfg: PoolConfig, deps: PoolDeps): Pool;
