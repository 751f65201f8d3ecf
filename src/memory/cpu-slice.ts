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
import { getPriority } from 'node:os';
import type { Logger } from '../log/log.js';
import { nativeAddon } from '../util/native-addon.js';

interface Addon {
  /** resetOnFork: the thread's children start with the kernel's default slice. */
  setSlice(tid: number, ns: number, resetOnFork?: boolean): number;
}

/** daemon_short_slice: the shortest slice the kernel takes, ns. */
export const DAEMON_SLICE_NS = 100_000;

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

/**
 * daemon_short_slice: this process's event-loop thread (its main thread) gets the
 * shortest slice, so that when it wakes on a CPU another task holds with a longer one, it
 * runs at once (EEVDF lets a waking task with a shorter slice take the CPU). The workers
 * it spawns from that thread start with the kernel's default (reset on fork, which would
 * also take a negative nice from them: a daemon that runs at one keeps the default
 * slice). Said once at start, at info.
 */
export function applyDaemonSlice(log: Logger): void {
  const a = sched.get();
  // Reset on fork also gives children of a negative nice nice 0, and workers take fcgi-pm's own nice.
  const nice = getPriority();
  const why = a === undefined ? sched.problem() : nice < 0 ? `it runs at nice ${nice}, which its workers would lose` : errnoOf(a.setSlice(process.pid, DAEMON_SLICE_NS, true));
  if (why === undefined && readSlice(process.pid) === DAEMON_SLICE_NS) log.info({ kind: 'cpu', daemonSliceNs: DAEMON_SLICE_NS }, `cpu: fcgi-pm's event loop runs with a ${DAEMON_SLICE_NS / 1e6} ms CPU slice (daemon_short_slice): it takes the CPU at once when it wakes`);
  else log.info({ kind: 'cpu', daemonSliceNs: 0 }, `cpu: fcgi-pm keeps the kernel's CPU slice (${why ?? 'this kernel has no custom CPU slices (Linux 6.12+)'}); daemon_short_slice has no effect`);
}

function errnoOf(err: number): string | undefined {
  return err === 0 ? undefined : `sched_setattr: ${errnoName(err)}`;
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
