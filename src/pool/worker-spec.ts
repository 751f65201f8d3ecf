/**
 * Turns a pool's config into the WorkerSpec every worker of the pool is spawned with:
 * the environment (only inherit_env names from fcgi-pm's own, then `env`), and the
 * user/group as numeric ids (names looked up in /etc/passwd and /etc/group once, at pool
 * creation, so a typo fails the config load instead of every spawn).
 */
import { readFileSync } from 'node:fs';
import { ConfigError } from '../errors.js';
import type { PoolConfig } from '../config/types.js';
import type { WorkerSpec } from '../worker/types.js';

export function buildWorkerSpec(cfg: PoolConfig, runtimeDir: string, parentEnv: NodeJS.ProcessEnv = process.env): WorkerSpec {
  const env: Record<string, string> = {};
  for (const name of cfg.inheritEnv) {
    const v = parentEnv[name];
    if (v !== undefined) env[name] = v;
  }
  Object.assign(env, cfg.env);
  const { uid, gid } = resolveIds(cfg);
  return {
    pool: cfg.name,
    command: cfg.command ?? [],
    socket: cfg.socket,
    env,
    cwd: cfg.cwd,
    uid,
    gid,
    runtimeDir,
    spawnTimeout: cfg.spawnTimeout,
    killTimeout: cfg.killTimeout,
  };
}

function resolveIds(cfg: PoolConfig): { uid: number | undefined; gid: number | undefined } {
  let uid: number | undefined;
  let gid: number | undefined;
  if (cfg.user !== undefined) {
    const u = lookup('/etc/passwd', cfg.user);
    if (u === undefined) throw new ConfigError([`pools.${cfg.name}.user: no such user "${cfg.user}"`]);
    uid = u.id;
    gid = u.gid;
  }
  if (cfg.group !== undefined) {
    const g = lookup('/etc/group', cfg.group);
    if (g === undefined) throw new ConfigError([`pools.${cfg.name}.group: no such group "${cfg.group}"`]);
    gid = g.id;
  }
  return { uid, gid };
}

/** A name or numeric id in a passwd/group-format file. Numbers are taken as they are. */
function lookup(file: string, nameOrId: string): { id: number; gid: number | undefined } | undefined {
  let lines: string[] = [];
  try {
    lines = readFileSync(file, 'utf8').split('\n');
  } catch {
    // No such file (not Linux?): numeric ids still work.
  }
  const numeric = /^\d+$/.test(nameOrId) ? Number(nameOrId) : undefined;
  for (const line of lines) {
    const f = line.split(':');
    if (f.length < 3) continue;
    const id = Number(f[2]);
    if (f[0] === nameOrId || (numeric !== undefined && id === numeric)) {
      return { id, gid: file.endsWith('passwd') && f[3] !== undefined ? Number(f[3]) : undefined };
    }
  }
  return numeric !== undefined ? { id: numeric, gid: undefined } : undefined;
}
