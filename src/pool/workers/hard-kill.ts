/**
 * SIGKILL for a worker over max_memory_hard: its memory comes back only when it is gone,
 * and php-cgi answers SIGTERM by finishing the running script first. Only a process that
 * is our own child (or grandchild: a preload worker) is signalled (a pid read from
 * /proc/PID/stat, so a pid reused by an unrelated process, or a test's made-up pid, is
 * left alone), and its whole process group when it leads one (workers are spawned detached).
 */
import fs from 'node:fs';

/** ppid and process group of a live process, from /proc/PID/stat; undefined if unknown. */
function parentAndGroup(pid: number): { ppid: number; pgrp: number } | undefined {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(f[1]), pgrp: Number(f[2]) };
  } catch {
    return undefined;
  }
}

/** True when the signal was sent. */
export function killChildNow(pid: number): boolean {
  const info = parentAndGroup(pid);
  // A preload worker is a child of our fork-server parent.
  if (info === undefined || (info.ppid !== process.pid && parentAndGroup(info.ppid)?.ppid !== process.pid)) return false;
  try {
    process.kill(info.pgrp === pid ? -pid : pid, 'SIGKILL');
    return true;
  } catch {
    return false;
  }
}

/** Signals `pid` only while it is a child of `parent` (a group's php-cgi child); true when sent. */
export function signalChildOf(parent: number, pid: number, sig: NodeJS.Signals): boolean {
  if (parentAndGroup(pid)?.ppid !== parent) return false;
  try {
    process.kill(pid, sig);
    return true;
  } catch {
    return false;
  }
}
