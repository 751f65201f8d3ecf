/**
 * Turns a pool's config into the WorkerSpec every worker of the pool is spawned with:
 * the environment (only inherit_env names from fcgi-pm's own, then `env`), and the
 * user/group as numeric ids (src/worker/identity.ts; looked up once, at pool creation,
 * so a typo fails the start instead of every spawn; ignored when fcgi-pm is not root).
 */
import { ConfigError } from '../errors.js';
import type { PoolConfig } from '../config/types.js';
import { resolveIdentity } from '../worker/identity.js';
import type { WorkerSpec } from '../worker/types.js';

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
  if (k > 1) {
    // One php-cgi parent forks k children on the socket and replaces any that exits.
    env['PHP_FCGI_CHILDREN'] = String(k);
    // php-cgi's children exit after 500 requests by default; max_requests is ours to apply.
    env['PHP_FCGI_MAX_REQUESTS'] ??= '0';
  }
  const who = resolveIdentity(cfg.user, cfg.group);
  if (!who.ok) throw new ConfigError([`pools.${cfg.name}.${who.key}: ${who.message}`]);
  return {
    pool: cfg.name,
    command: cfg.command ?? [],
    socket: cfg.socket,
    env,
    cwd: cfg.cwd,
    uid: who.uid,
    gid: who.gid,
    runtimeDir,
    spawnTimeout: cfg.spawnTimeout,
    killTimeout: cfg.killTimeout,
  };
}
