/**
 * Builds a pool from its config: external backends when `command` is unset, else
 * spawned workers. Dependencies are injectable (undici style) so unit tests run pools
 * on fake endpoints, fake workers and a fake clock.
 */
import { childLogger, type Logger } from '../log/log.js';
import type { PoolConfig } from '../config/types.js';
import { DEFAULT_SAMPLE_INTERVAL, HostGovernor, type MemoryGovernor } from '../memory/host-governor.js';
import { createEndpoint } from '../upstream/endpoint.js';
import type { WorkerAdopter, WorkerFactory } from '../worker/types.js';
import { processGroupDeathGuard } from '../worker/death-guard.js';
import { ForkServer } from '../worker/fork-server.js';
import { adoptWorker, spawnWorker, Worker } from '../worker/worker.js';
import { systemClock, type Clock } from '../util/clock.js';
import { ExternalPool } from './external/external-pool.js';
import { SpawnedPool } from './spawned/dispatcher.js';
import { DirectPool } from './direct/direct-pool.js';
import { directSocketSupport } from '../worker/shared-socket.js';
import { ErrorCodes } from '../errors.js';
import type { DirectFallback, EndpointFactory, Pool } from './types.js';
import { limitsOf, withLimits } from './rlimit.js';
import { addOpcacheFileCache, buildWorkerSpec } from './worker-spec.js';
import { residentConfig } from './resident.js';

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
  /**
   * The daemon's memory governor, shared by all pools (memory_budget). Without one a
   * spawned pool gets its own, with no budget: its workers are still sampled and
   * max_memory, max_memory_hard and memory_limit still apply.
   */
  memory?: MemoryGovernor;
  /** Root of php-cgi pools' opcache file caches (src/config/opcache-path.ts); undefined = under runtimeDir; false = off. */
  opcacheRoot?: string | false | undefined;
}

export type { Pool, PoolSnapshot, WorkerSnapshot } from './types.js';
export type { Clock } from '../util/clock.js';
export type { MemoryGovernor } from '../memory/host-governor.js';
export type { EndpointFactory } from './types.js';

export function createPool(cfg: PoolConfig, deps: PoolDeps): Pool {
  // The daemon hands a logger already bound to {pool}; bind it here when it is not.
  const logger = childLogger(deps.logger, { pool: cfg.name });
  const clock = deps.clock ?? systemClock;
  const endpointFactory = deps.endpointFactory ?? createEndpoint;
  if (cfg.command === undefined || cfg.command.length === 0) {
    return new ExternalPool(cfg, logger, clock, endpointFactory);
  }
  const memory = deps.memory ?? new HostGovernor({ logger, sampleInterval: cfg.memorySampleInterval ?? DEFAULT_SAMPLE_INTERVAL, clock, disposeWhenEmpty: true });
  cfg = residentConfig(cfg, memory.budget);
  const spec = buildWorkerSpec(cfg, deps.runtimeDir);
  addOpcacheFileCache(cfg, spec, deps.opcacheRoot, logger);
  const limits = limitsOf(cfg);
  if (limits !== undefined) spec.command = withLimits(spec, limits);
  let directFallback: DirectFallback | undefined;
  if (cfg.accept === 'direct') {
    const unsupported = directSocketSupport();
    if (unsupported === undefined) {
      const forks = cfg.preload === true ? new ForkServer(spec, deps.logger, { idleTimeout: cfg.preloadIdleTimeout ?? 300_000 }) : undefined;
      return new DirectPool(cfg, {
        logger,
        clock,
        spec,
        forkServer: forks,
        workerFactory: deps.workerFactory ?? (forks !== undefined ? workerFactoryFor(cfg, forks) : spawnWorker),
        workerLogger: deps.logger,
        endpointFactory,
        random: deps.random ?? Math.random,
        memory,
      });
    }
    // php-cgi's own default is 500 requests; through the proxy, max_requests is ours to apply.
    if ('PHP_FCGI_CHILDREN' in spec.env) spec.env['PHP_FCGI_MAX_REQUESTS'] ??= '0';
    logger.error({ code: ErrorCodes.DIRECT_SOCKET, address: cfg.directListen?.text }, `pool ${cfg.name}: accept: direct is not available (${unsupported}); in fallback, the pool serves through its proxy listeners (and one on ${cfg.directListen?.text} that the daemon opens)`);
    directFallback = { address: cfg.directListen?.text ?? '', reason: unsupported };
  }
  const forks = cfg.preload === true ? new ForkServer(spec, deps.logger, { idleTimeout: cfg.preloadIdleTimeout ?? 300_000 }) : undefined;
  return new SpawnedPool(cfg, {
    logger,
    clock,
    spec,
    workerFactory: deps.workerFactory ?? workerFactoryFor(cfg, forks),
    // Only exec'd workers go on across an exec in place of the daemon (a preload parent's forks are its children).
    workerAdopter: forks === undefined && deps.workerFactory === undefined ? workerAdopterFor(cfg) : undefined,
    forkServer: forks,
    workerLogger: deps.logger,
    endpointFactory,
    random: deps.random ?? Math.random,
    memory,
    directFallback,
    resolveConfig: (next) => residentConfig(next, memory.budget),
  });
}

/** Exec'd workers; forks of the preload parent; php-cgi groups, whose children must die with the daemon too. */
function workerFactoryFor(cfg: PoolConfig, forks: ForkServer | undefined): WorkerFactory {
  if (forks !== undefined) return (s, l, id, owner) => Worker.spawn(s, l, id, owner, { forkServer: forks });
  if ((cfg.groupSize ?? 1) > 1) return (s, l, id, owner) => Worker.spawn(s, l, id, owner, { deathGuard: processGroupDeathGuard() });
  return spawnWorker;
}

/** Workers an exec in place of the daemon handed on, guarded as the factory above guards its own. */
function workerAdopterFor(cfg: PoolConfig): WorkerAdopter {
  if ((cfg.groupSize ?? 1) > 1) return (h, s, l, id, owner) => Worker.adopt(h, s, l, id, owner, { deathGuard: processGroupDeathGuard() });
  return adoptWorker;
}
