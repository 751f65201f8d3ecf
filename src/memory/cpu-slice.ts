/**
 * A worker's CPU time slice (Linux 6.12 EEVDF's custom slice: sched_setattr's
 * sched_runtime), through the small addon native/sched-slice.c built at install (Node has
 * no such call). The kernel lets a task that wakes take the CPU from a running one with
 * a longer slice at once; a running task with the default slice is protected until that
 * slice is used, and with HZ=250 the next chance comes at the next tick, up to 4 ms later.
 * Giving a pool's workers a long slice while its requests wait (busy_cpu_slice) lets every
 * other task that wakes (the daemon, the web server, a quiet pool's worker) run first,
 * without changing the pool's share of the CPU (its weight). Without the addon or on an
 * older kernel nothing changes: the slice read back from /proc says so.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { nativeAddon } from '../util/native-addon.js';

interface Addon {
  setSlice(tid: number, ns: number): number;
}

const sched = nativeAddon<Addon>('sched-slice', 'CPU slices are a Linux scheduler setting');

/** undefined when slices can be set from this process; else why not. */
export function sliceSupport(): string | undefined {
  return sched.problem();
}

/**
 * Sets the slice of every thread of `pid` and of its children (a php-cgi group's parent
 * forks them; 0 ns: the kernel's default again). Returns undefined, or the first errno
 * name (a process gone meanwhile is not an error).
 */
export function setSlice(pid: number, ns: number): string | undefined {
  const a = sched.get();
  if (a === undefined) return 'ENOADDON';
  let failed: string | undefined;
  for (const p of [pid, ...childrenOf(pid)]) {
    for (const tid of threadsOf(p)) {
      const err = a.setSlice(tid, Math.round(ns));
      // ESRCH: the thread ended meanwhile.
      if (err !== 0 && err !== 3) failed ??= errnoName(err);
    }
  }
  return failed;
}

function threadsOf(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).map(Number);
  } catch {
    return [];
  }
}

function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const tid of threadsOf(pid)) {
    try {
      for (const c of readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').split(' ')) if (c.trim() !== '') out.push(Number(c));
    } catch {
      // gone
    }
  }
  return out;
}

function errnoName(n: number): string {
  return n === 1 ? 'EPERM' : n === 22 ? 'EINVAL' : n === 38 ? 'ENOSYS' : `errno ${n}`;
}

/** A thread's slice as the kernel holds it (ns), from /proc/PID/sched; undefined on kernels that do not show one. */
export function readSlice(pid: number): number | undefined {
  try {
    const m = /^se\.slice\s*:\s*(\d+)/m.exec(readFileSync(`/proc/${pid}/sched`, 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}
