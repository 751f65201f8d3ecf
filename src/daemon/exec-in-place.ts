/**
 * execve(2) for Node 20 (which has no process.execve) through the small addon
 * native/exec-in-place.c, built at install by scripts/build-native.mjs. Without it (no
 * compiler at install, not Linux) `execSupport()` says why, and an upgrade starts the new
 * code with a new pid instead (upgrade.ts), saying so in the log.
 */
import { createRequire } from 'node:module';
import type { ExecPlan } from './upgrade.js';

interface Addon {
  dupForExec(fd: number): number;
  closeFd(fd: number): void;
  exec(file: string, argv: string[], env: string[], keep: number[]): never;
}

const ADDON_PATH = new URL('../../../native/build/exec-in-place.node', import.meta.url).pathname;

let addon: Addon | undefined;
let problem: string | undefined;

function load(): Addon | undefined {
  if (addon !== undefined || problem !== undefined) return addon;
  if (process.platform !== 'linux') {
    problem = 'an exec in place is built for Linux only';
    return undefined;
  }
  try {
    addon = createRequire(import.meta.url)(ADDON_PATH) as Addon;
  } catch (e) {
    problem = `the native addon ${ADDON_PATH} is not built (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}); run "node scripts/build-native.mjs" with a C compiler and Node's headers`;
  }
  return addon;
}

/** undefined when this process can exec in place; else why not. */
export function execSupport(): string | undefined {
  load();
  return problem;
}

/** A second close-on-exec descriptor for the socket at `fd`: it outlives the server that closes `fd`. */
export function dupForExec(fd: number): number {
  const a = load();
  if (a === undefined) throw new Error(problem);
  return a.dupForExec(fd);
}

/** Closes descriptors dupForExec made (a plan given up). */
export function closeDuplicates(fds: readonly number[]): void {
  const a = load();
  for (const fd of fds) a?.closeFd(fd);
}

/** Replaces this process by the plan's program; returns only by throwing (the process is unchanged). */
export function execInPlace(plan: ExecPlan): never {
  const a = load();
  if (a === undefined) throw new Error(problem);
  const env = Object.entries(plan.env).filter((e): e is [string, string] => e[1] !== undefined).map(([k, v]) => `${k}=${v}`);
  return a.exec(plan.argv[0]!, plan.argv, env, plan.sockets.map((s) => s.fd));
}
