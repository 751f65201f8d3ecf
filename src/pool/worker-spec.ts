/**
 * Turns a pool's config into the WorkerSpec every worker of the pool is spawned with:
 * the environment (only inherit_env names from fcgi-pm's own, then `env`), and the
 * user/group as numeric ids (src/worker/identity.ts; looked up once, at pool creation,
 * so a typo fails the start instead of every spawn; ignored when fcgi-pm is not root).
 */
import { join } from 'node:path';
import { ConfigError, ErrorCodes } from '../errors.js';
import { runsPhpCgi, wsgiAdapterIndex } from '../config/schema.js';
import type { PoolConfig } from '../config/types.js';
import type { Logger } from '../log/log.js';
import { resolveIdentity } from '../worker/identity.js';
import { preparePoolCacheDir, RUNTIME_CACHE_SUBDIR, setsOwnOpcache, withFileCache } from '../worker/php-cache.js';
import type { WorkerSpec } from '../worker/types.js';
import { withPhpSettings } from './php-settings.js';

/** The worker's whole environment: inherit_env names from ours, then `env`. */
export function workerEnv(cfg: PoolConfig, parentEnv: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of cfg.inheritEnv) {
    const v = parentEnv[name];
    if (v !== undefined) env[name] = v;
  }
  return Object.assign(env, cfg.env);
}

export function buildWorkerSpec(cfg: PoolConfig, runtimeDir: string, parentEnv: NodeJS.ProcessEnv = process.env): WorkerSpec {
  const env = workerEnv(cfg, parentEnv);
  const k = cfg.groupSize ?? 1;
  if (k > 1 || cfg.residentParent === true) {
    // One php-cgi parent forks k children on the socket and replaces any that exits
    // (resident_parent: a group of one, so that the parent can stay when the child goes).
    env['PHP_FCGI_CHILDREN'] = String(k);
    // php-cgi's children exit after 500 requests by default; max_requests is ours to apply.
    env['PHP_FCGI_MAX_REQUESTS'] ??= '0';
  }
  const who = resolveIdentity(cfg.user, cfg.group);
  if (!who.ok) throw new ConfigError([`pools.${cfg.name}.${who.key}: ${who.message}`]);
  return {
    pool: cfg.name,
    command: withPhpSettings(withPreloadFlag(cfg), cfg),
    socket: cfg.socket,
    env,
    cwd: cfg.cwd,
    uid: who.uid,
    gid: who.gid,
    runtimeDir,
    spawnTimeout: cfg.spawnTimeout,
    killTimeout: cfg.killTimeout,
    priority: cfg.processPriority,
    // Not on the direct path: there an idle worker may be taking a connection.
    killIdle: runsPhpCgi(cfg.command ?? []) && cfg.accept !== 'direct',
  };
}

/** preload: true runs fcgi-pm-wsgi as a fork server, which it is only with --preload: added when missing. */
function withPreloadFlag(cfg: PoolConfig): string[] {
  const cmd = cfg.command ?? [];
  const at = wsgiAdapterIndex(cmd);
  if (cfg.preload !== true || at < 0 || cmd.includes('--preload')) return [...cmd];
  return [...cmd.slice(0, at + 1), '--preload', ...cmd.slice(at + 1)];
}

/**
 * php-cgi: the pool's own opcache file cache (src/worker/php-cache.ts) in the spec's
 * command, unless the pool turned it off or sets opcache itself. `root`: the daemon's
 * cache root; undefined = under the private runtime directory; false = off. A directory
 * that cannot be made is logged and the pool runs without it.
 */
export function addOpcacheFileCache(cfg: PoolConfig, spec: WorkerSpec, root: string | false | undefined, logger: Logger): void {
  if (root === false || cfg.opcacheFileCache === false || !runsPhpCgi(spec.command) || setsOwnOpcache(spec.command)) return;
  const who = resolveIdentity(cfg.user, cfg.group);
  if (!who.ok) return; // buildWorkerSpec threw already
  const cache = preparePoolCacheDir(root ?? join(spec.runtimeDir, RUNTIME_CACHE_SUBDIR), cfg.name, { runsAs: who.runsAs, uid: who.uid, gid: who.gid });
  if (!cache.ok) {
    logger.warn({ code: ErrorCodes.OPCACHE_DIR, dir: cache.dir }, `opcache file cache off for this pool: ${cache.message}; each new worker compiles the application again`);
    return;
  }
  spec.command = withFileCache(spec.command, cache.dir);
}
