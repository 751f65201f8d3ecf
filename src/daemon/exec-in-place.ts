/**
 * execve(2) for Node 20 (which has no process.execve) through the small addon
 * native/exec-in-place.c, built at install by scripts/build-native.mjs. Without it (no
 * compiler at install, not Linux) `execSupport()` says why, and an upgrade starts the new
 * code with a new pid instead (upgrade.ts), saying so in the log.
 */
import type { ExecPlan } from './upgrade.js';
import { execAddon, execAddonProblem } from '../worker/exec-addon.js';

/** undefined when this process can exec in place; else why not. */
export function execSupport(): string | undefined {
  return execAddonProblem();
}

/** A second close-on-exec descriptor for the socket at `fd`: it outlives the server that closes `fd`. */
export function dupForExec(fd: number): number {
  const a = execAddon();
  if (a === undefined) throw new Error(execAddonProblem());
  return a.dupForExec(fd);
}

/** Closes descriptors dupForExec made (a plan given up). */
export function closeDuplicates(fds: readonly number[]): void {
  const a = execAddon();
  for (const fd of fds) a?.closeFd(fd);
}

/** Replaces this process by the plan's program; returns only by throwing (the process is unchanged). */
export function execInPlace(plan: ExecPlan): never {
  const a = execAddon();
  if (a === undefined) throw new Error(execAddonProblem());
  const env = Object.entries(plan.env).filter((e): e is [string, string] => e[1] !== undefined).map(([k, v]) => `${k}=${v}`);
  return a.exec(plan.argv[0]!, plan.argv, env, [...plan.sockets.map((s) => s.fd), ...(plan.keep ?? [])]);
}
