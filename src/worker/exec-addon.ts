/**
 * The native addon native/exec-in-place.c (built at install by scripts/build-native.mjs),
 * loaded once: execve for Node 20 (src/daemon/exec-in-place.ts), and what a worker needs
 * to outlive an exec in place of the daemon: stdout/stderr pipes whose descriptors the
 * daemon knows (pipeForChild), and a reaper for children libuv did not spawn (reap).
 * Without it (no compiler at install, not Linux) `problem()` says why.
 */
import { createRequire } from 'node:module';

export interface ExecAddon {
  dupForExec(fd: number): number;
  closeFd(fd: number): void;
  exec(file: string, argv: string[], env: string[], keep: number[]): never;
  pipeForChild(): [number, number];
  reap(pid: number): { code?: number; signal?: number; gone?: true } | undefined;
}

const ADDON_PATH = new URL('../../../native/build/exec-in-place.node', import.meta.url).pathname;

let addon: ExecAddon | undefined;
let why: string | undefined;

/** The addon, or undefined (then `problem()` says why). */
export function execAddon(): ExecAddon | undefined {
  if (addon !== undefined || why !== undefined) return addon;
  if (process.platform !== 'linux') {
    why = 'an exec in place is built for Linux only';
    return undefined;
  }
  try {
    const a = createRequire(import.meta.url)(ADDON_PATH) as Partial<ExecAddon>;
    // An addon built by an older fcgi-pm lacks the worker calls: the daemon still execs, its workers are not handed on.
    addon = a as ExecAddon;
  } catch (e) {
    why = `the native addon ${ADDON_PATH} is not built (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}); run "node scripts/build-native.mjs" with a C compiler and Node's headers`;
  }
  return addon;
}

/** undefined when the addon loaded; else why not. */
export function execAddonProblem(): string | undefined {
  execAddon();
  return why;
}

/** The addon when it can hand workers on (pipes it made, a reaper); else undefined. */
export function handOverAddon(): ExecAddon | undefined {
  const a = execAddon();
  return a !== undefined && typeof a.pipeForChild === 'function' && typeof a.reap === 'function' ? a : undefined;
}
