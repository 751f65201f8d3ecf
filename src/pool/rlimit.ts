/**
 * rlimit_as: an address-space limit (RLIMIT_AS) on spawned workers, for hosts that want
 * the kernel itself to refuse allocations past a size. The worker command is prefixed
 * with `prlimit --as=BYTES --` (util-linux), which sets the limit on itself and execs the
 * command, so the worker keeps the pid the pool spawned. Without prlimit, `/bin/sh -c
 * 'ulimit -v KIB && exec "$0" "$@"'` does the same (KiB granularity).
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

/**
 * The worker command with the address-space limit applied. The real program is resolved
 * now (as the worker would), so "not found" still names it rather than prlimit.
 */
export function limitAddressSpace(spec: WorkerSpec, bytes: number, prlimit = findPrlimit()): string[] {
  const [cmd, ...args] = spec.command;
  if (cmd === undefined) return spec.command;
  const resolved = resolveCommand(cmd, spec.env, spec.cwd);
  const file = resolved.ok ? resolved.file : cmd;
  if (prlimit !== undefined) return [prlimit, `--as=${bytes}`, '--', file, ...args];
  if (executable('/bin/sh')) return ['/bin/sh', '-c', `ulimit -v ${Math.max(1, Math.floor(bytes / 1024))} && exec "$0" "$@"`, file, ...args];
  throw new ConfigError([`pools.${spec.pool}.rlimit_as: needs prlimit (util-linux) or /bin/sh to set the limit; neither was found`]);
}
