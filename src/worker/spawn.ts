/**
 * Starting the OS process: resolve the command (so a missing or non-executable program is
 * reported by name and errno before anything is forked, instead of as setpriv's exit 127),
 * then spawn it detached (its own process group, so a SIGKILL escalation reaches its
 * children too) through the death guard, with ONLY spec.env, spec.cwd and uid/gid.
 *
 * A worker whose output goes to pipes the daemon made is spawned by the addon
 * (spawnUnforked: a vfork-style clone, which copies none of the daemon's page tables; the
 * main thread waits only for the exec) and reaped by reaper.ts; anything else, and every
 * worker where the addon is missing, by Node's child_process.spawn, whose libuv forks the
 * whole daemon first (docs/BENCHMARKS.md "A spawn that does not fork the daemon").
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { constants } from 'node:os';
import path from 'node:path';
import type { DeathGuard } from './death-guard.js';
import { spawnAddon } from './exec-addon.js';
import type { WorkerSpec } from './types.js';

/** execvp's fallback when PATH is unset. */
export const DEFAULT_PATH = '/usr/local/bin:/usr/bin:/bin';

export type Resolved = { ok: true; file: string } | { ok: false; errno: string; message: string };

function executable(p: string): 'ok' | 'ENOENT' | 'EACCES' {
  let st: fs.Stats;
  try {
    st = fs.statSync(p);
  } catch {
    return 'ENOENT';
  }
  if (!st.isFile()) return 'EACCES';
  try {
    fs.accessSync(p, fs.constants.X_OK);
    return 'ok';
  } catch {
    return 'EACCES';
  }
}

/** Finds argv[0] the way execvp would, with the worker's PATH and cwd. */
export function resolveCommand(cmd: string, env: Record<string, string>, cwd: string | undefined): Resolved {
  if (cmd === '') return { ok: false, errno: 'ENOENT', message: 'empty command' };
  if (cmd.includes('/')) {
    const file = path.resolve(cwd ?? process.cwd(), cmd);
    const r = executable(file);
    if (r === 'ok') return { ok: true, file };
    return { ok: false, errno: r, message: `cannot execute ${file}: ${r === 'ENOENT' ? 'ENOENT (no such file)' : 'EACCES (not an executable file)'}` };
  }
  let sawEacces = false;
  const dirs = (env['PATH'] ?? DEFAULT_PATH).split(':');
  for (const d of dirs) {
    const file = path.resolve(cwd ?? process.cwd(), d === '' ? '.' : d, cmd);
    const r = executable(file);
    if (r === 'ok') return { ok: true, file };
    if (r === 'EACCES') sawEacces = true;
  }
  const errno = sawEacces ? 'EACCES' : 'ENOENT';
  return { ok: false, errno, message: `cannot execute "${cmd}": ${errno} (${sawEacces ? 'found but not executable' : 'not found'} in PATH=${env['PATH'] ?? DEFAULT_PATH})` };
}

/** A reason cwd is unusable, or undefined. */
export function checkCwd(cwd: string | undefined): string | undefined {
  if (cwd === undefined) return undefined;
  try {
    if (!fs.statSync(cwd).isDirectory()) return `cwd ${cwd}: ENOTDIR`;
  } catch (e) {
    return `cwd ${cwd}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`;
  }
  return undefined;
}

export interface StartOptions {
  spec: WorkerSpec;
  file: string;
  args: string[];
  /** The listening socket for fd 0, or undefined (stdin = /dev/null). */
  fd0: number | undefined;
  guard: DeathGuard;
  /**
   * A preload fork server: its commands on fd 0 and replies on fd 3 (pipes, JSON lines),
   * the directory its workers' sockets are bound in as fd 4, and an `accept: direct`
   * pool's shared socket as fd 5 (FCGI_PM_PRELOAD_FDS).
   */
  preload?: { dirFd: number; sharedFd?: number | undefined };
  /** The write ends of pipes the daemon made for stdout and stderr (exec-addon.ts pipeForChild); else Node's own. */
  output?: [number, number] | undefined;
}

/** May throw synchronously (EAGAIN, EPERM for uid/gid …); otherwise errors come as 'error'. */
export function startProcess(o: StartOptions): ChildProcess {
  const w = o.guard.wrap(o.file, o.args);
  return spawn(w.file, w.args, {
    stdio: o.preload === undefined
      ? [o.fd0 ?? 'ignore', o.output?.[0] ?? 'pipe', o.output?.[1] ?? 'pipe']
      : ['pipe', 'pipe', 'pipe', 'pipe', o.preload.dirFd, ...(o.preload.sharedFd === undefined ? [] : [o.preload.sharedFd])],
    env: o.preload !== undefined ? { ...o.spec.env, FCGI_PM_PRELOAD_FDS: o.preload.sharedFd === undefined ? '0,3,4' : '0,3,4,5' } : o.spec.env,
    cwd: o.spec.cwd,
    uid: o.spec.uid,
    gid: o.spec.gid,
    detached: true,
    windowsHide: true,
  });
}

const ERRNO_NAMES = new Map<number, string>(Object.entries(constants.errno).map(([name, n]) => [n, name]));

/**
 * What startProcess does for a worker with daemon-made output pipes (its own socket or an
 * `accept: direct` pool's), through the addon: its pid, or undefined where the addon cannot
 * or for a preload parent (then startProcess). Throws as Node's spawn
 * reports a failure (`code` the errno's name, "spawn FILE CODE").
 */
export function spawnUnforked(o: StartOptions & { output: [number, number] }): number | undefined {
  const a = spawnAddon();
  if (a === undefined || o.preload !== undefined) return undefined;
  const w = o.guard.wrap(o.file, o.args);
  const env: string[] = [];
  for (const [k, v] of Object.entries(o.spec.env)) if (v !== undefined) env.push(`${k}=${v}`);
  const pid = a.spawn(w.file, [w.file, ...w.args], env, [o.fd0 ?? -1, o.output[0], o.output[1]], o.spec.cwd ?? null, o.spec.uid ?? -1, o.spec.gid ?? -1);
  if (pid > 0) return pid;
  const code = ERRNO_NAMES.get(-pid) ?? `E${-pid}`;
  throw Object.assign(new Error(`spawn ${w.file} ${code}`), { code, errno: pid, syscall: 'spawn' });
}
