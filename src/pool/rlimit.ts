/**
 * Resource limits on spawned workers: rlimit_as (an address-space limit, for hosts that
 * want the kernel itself to refuse allocations past a size), rlimit_files and rlimit_core
 * (PHP-FPM's). The worker command is prefixed with `prlimit --as=BYTES --nofile=N:N
 * --core=B:B --` (util-linux), which sets the limits on itself and execs the command, so
 * the worker keeps the pid the pool spawned. Without prlimit, `/bin/sh -c 'ulimit -v KIB
 * && exec "$0" "$@"'` does the same. prlimit runs as the workers' user already: it may
 * lower a hard limit, not raise it above fcgi-pm's own.
 *
 * The limit is on virtual size, not on memory used: php-cgi maps ~200 MiB (opcache's
 * shared memory among it), Node and Go reserve gigabytes they never touch. Set it well
 * above what max_memory_hard would catch; it is the kernel's backstop, not a budget.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../errors.js';
import { DEFAULT_PATH, resolveCommand } from '../worker/spawn.js';
import type { WorkerSpec } from '../worker/types.js';

const PRLIMIT_CANDIDATES = ['/usr/bin/prlimit', '/bin/prlimit', '/usr/sbin/prlimit', '/sbin/prlimit'];

function executable(p: string): boolean {
  try {
    fs.accessSync(p, fs.constants.X_OK);
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

/** Where prlimit is (the usual places, then PATH), or undefined. */
export function findPrlimit(envPath = process.env['PATH'] ?? DEFAULT_PATH): string | undefined {
  for (const p of PRLIMIT_CANDIDATES) if (executable(p)) return p;
  for (const dir of envPath.split(':')) {
    if (dir === '' || !path.isAbsolute(dir)) continue;
    const p = path.join(dir, 'prlimit');
    if (executable(p)) return p;
  }
  return undefined;
}

export interface WorkerLimits {
  /** RLIMIT_AS, bytes (rlimit_as). */
  as?: number | undefined;
  /** RLIMIT_NOFILE (rlimit_files). */
  nofile?: number | undefined;
  /** RLIMIT_CORE, bytes (rlimit_core). */
  core?: number | undefined;
}

/** The pool's limits, or undefined when it sets none. */
export function limitsOf(cfg: { rlimitAs?: number | undefined; rlimitFiles?: number | undefined; rlimitCore?: number | undefined }): WorkerLimits | undefined {
  const as = (cfg.rlimitAs ?? 0) > 0 ? cfg.rlimitAs : undefined;
  if (as === undefined && cfg.rlimitFiles === undefined && cfg.rlimitCore === undefined) return undefined;
  return { as, nofile: cfg.rlimitFiles, core: cfg.rlimitCore };
}

/**
 * The worker command with the limits applied (soft and hard alike, as PHP-FPM sets them).
 * The real program is resolved now (as the worker would), so "not found" still names it
 * rather than prlimit.
 */
export function withLimits(spec: WorkerSpec, limits: WorkerLimits, prlimit = findPrlimit()): string[] {
  const [cmd, ...args] = spec.command;
  if (cmd === undefined) return spec.command;
  const resolved = resolveCommand(cmd, spec.env, spec.cwd);
  const file = resolved.ok ? resolved.file : cmd;
  const flags: string[] = [];
  if (limits.as !== undefined) flags.push(`--as=${limits.as}`);
  if (limits.nofile !== undefined) flags.push(`--nofile=${limits.nofile}:${limits.nofile}`);
  if (limits.core !== undefined) flags.push(`--core=${limits.core}:${limits.core}`);
  if (prlimit !== undefined) return [prlimit, ...flags, '--', file, ...args];
  const ulimit: string[] = [];
  if (limits.as !== undefined) ulimit.push(`ulimit -v ${Math.max(1, Math.floor(limits.as / 1024))}`);
  if (limits.nofile !== undefined) ulimit.push(`ulimit -n ${limits.nofile}`);
  if (limits.core !== undefined) ulimit.push(`ulimit -c ${Math.floor(limits.core / 512)}`);
  if (executable('/bin/sh')) return ['/bin/sh', '-c', `${ulimit.join(' && ')} && exec "$0" "$@"`, file, ...args];
  throw new ConfigError([`pools.${spec.pool}: rlimit_as, rlimit_files and rlimit_core need prlimit (util-linux) or /bin/sh to set the limit; neither was found`]);
}
