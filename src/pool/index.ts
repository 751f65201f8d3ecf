/**
 * Builds a pool from its config: external backends when `command` is unset, else
 * spawned workers. Dependencies are injectable (undici style) so unit tests run pools
 * on fake endpoints, fake workers and a fake clock.
 */
import type { Logger } from '../log/log.js';
import type { PoolConfig } from '../config/types.js';
import { createEndpoint } from '../upstream/endpoint.js';
import type { WorkerFactory } from '../worker/types.js';
import { spawnWorker } from '../worker/worker.js';
import { systemClock, type Clock } from './clock.js';
import { ExternalPool, type EndpointFactory } from './external-pool.js';
import { SpawnedPool } from './spawned-pool.js';
import type { Pool } from './types.js';
import { buildWorkerSpec } from './worker-spec.js';

export interface PoolDeps {
  logger: Logger;
  /** Private 0700 directory for this daemon's worker sockets. */
  runtimeDir: string;
  /** Defaults to src/upstream's createEndpoint. */
  endpointFactory?: EndpointFactory;
  /** Defaults to src/worker's spawnWorker. */
  workerFactory?: WorkerFactory;
  /** Defaults to performance.now() and unref'd timers. */
  clock?: Clock;
  /** [0, 1) for max_requests_jitter; defaults to Math.random. */
  random?: () => number;
}

export type { Pool, PoolSnapshot, WorkerSnapshot } from './types.js';
export type { Clock } from './clock.js';
export type { EndpointFactory } from './external-pool.js';

export function createPool(cfg: PoolConfig, deps: PoolDeps): Pool {
  // The daemon hands a logger already bound to {pool}; bind it here when it is not.
  const bound = deps.logger.bindings() as { pool?: unknown };
  const logger = bound.pool === cfg.name ? deps.logger : deps.logger.child({ pool: cfg.name });
  const clock = deps.clock ?? systemClock;
  const endpointFactory = deps.endpointFactory ?? createEndpoint;
  if (cfg.command === undefined || cfg.command.length === 0) {
    return new ExternalPool(cfg, logger, clock, endpointFactory);
  }
  return new SpawnedPool(cfg, {
    logger,
    clock,
    spec: buildWorkerSpec(cfg, deps.runtimeDir),
    workerFactory: deps.workerFactory ?? spawnWorker,
    workerLogger: deps.logger,
    endpointFactory,
    random: deps.random ?? Math.random,
  });
}
