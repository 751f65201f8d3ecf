/**
 * The native addon native/exec-in-place.c (built at install by scripts/build-native.mjs),
 * loaded once: execve for Node 20 (src/daemon/exec-in-place.ts), a worker's spawn without
 * a fork of the daemon (spawn: a vfork-style clone, see spawn.ts), and what a worker needs
 * to outlive an exec in place of the daemon: stdout/stderr pipes whose descriptors the
 * daemon knows (pipeForChild), and a reaper for children libuv did not spawn (reap).
 * Without it (no compiler at install, not Linux) `problem()` says why.
 */
import { nativeAddon } from '../util/native-addon.js';

export interface ExecAddon {
  dupForExec(fd: number): number;
  closeFd(fd: number): void;
  exec(file: string, argv: string[], env: string[], keep: number[]): never;
  pipeForChild(): [number, number];
  reap(pid: number): { code?: number; signal?: number; gone?: true } | undefined;
  /** The child's pid, or -errno when it could not be set up or exec'd (`fds[i]` at i, -1: /dev/null; uid, gid -1: the daemon's). */
  spawn(file: string, argv: string[], env: string[], fds: number[], cwd: string | null, uid: number, gid: number): number;
}

// An addon built by an older fcgi-pm lacks the worker calls: the daemon still execs, its workers are not handed on.
const loader = nativeAddon<ExecAddon>('exec-in-place', 'an exec in place is built for Linux only');

/** The addon, or undefined (then `problem()` says why). */
export function execAddon(): ExecAddon | undefined {
  return loader.get();
}

/** undefined when the addon loaded; else why not. */
export function execAddonProblem(): string | undefined {
  return loader.problem();
}

/** The addon when it spawns workers without a fork (an older build lacks `spawn`); else undefined. */
export function spawnAddon(): ExecAddon | undefined {
  const a = handOverAddon();
  return a !== undefined && typeof a.spawn === 'function' ? a : undefined;
}

/** The addon when it can hand workers on (pipes it made, a reaper); else undefined. */
export function handOverAddon(): ExecAddon | undefined {
  const a = execAddon();
  return a !== undefined && typeof a.pipeForChild === 'function' && typeof a.reap === 'function' ? a : undefined;
}
