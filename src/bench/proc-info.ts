/**
 * What /proc says about processes the bench or tune started: children, memory (PSS,
 * RSS, anonymous RSS), CPU time, and the machine's available memory. Linux only; every
 * reader returns undefined (or nothing) where /proc does not answer.
 */
import { readdirSync, readFileSync } from 'node:fs';

function read(path: string): string | undefined {
  try {
    return readFileSync(path, 'latin1');
  } catch {
    return undefined;
  }
}

/** Fields of /proc/PID/stat after the "(comm)", which may hold spaces. */
function statFields(pid: number): string[] | undefined {
  const s = read(`/proc/${pid}/stat`);
  if (s === undefined) return undefined;
  return s.slice(s.lastIndexOf(')') + 2).split(' ');
}

/** Live (non-zombie) direct children of pid. */
export function childPids(pid: number): number[] {
  const out: number[] = [];
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return out;
  }
  for (const name of names) {
    if (name.charCodeAt(0) > 57) continue;
    const f = statFields(Number(name));
    if (f !== undefined && f[0] !== 'Z' && Number(f[1]) === pid) out.push(Number(name));
  }
  return out.sort((a, b) => a - b);
}

/** pid and all its live descendants. */
export function processTree(pid: number): number[] {
  const out = [pid];
  for (let i = 0; i < out.length; i++) out.push(...childPids(out[i]!));
  return out;
}

function kbField(text: string | undefined, field: string): number | undefined {
  if (text === undefined) return undefined;
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
  return m ? Number(m[1]) * 1024 : undefined;
}

export interface ProcMemory {
  bytes: number;
  /** "pss" from smaps_rollup (shared pages split between their users), else "rss". */
  kind: 'pss' | 'rss';
}

/** Proportional set size of one process, falling back to its resident set size. */
export function processMemory(pid: number): ProcMemory | undefined {
  const pss = kbField(read(`/proc/${pid}/smaps_rollup`), 'Pss');
  if (pss !== undefined) return { bytes: pss, kind: 'pss' };
  const rss = kbField(read(`/proc/${pid}/status`), 'VmRSS');
  return rss === undefined ? undefined : { bytes: rss, kind: 'rss' };
}

/** Memory of a process and its descendants (a worker that forks counts as one). */
export function treeMemory(pid: number): ProcMemory | undefined {
  let total = 0;
  let kind: 'pss' | 'rss' = 'pss';
  let any = false;
  for (const p of processTree(pid)) {
    const m = processMemory(p);
    if (m === undefined) continue;
    any = true;
    total += m.bytes;
    if (m.kind === 'rss') kind = 'rss';
  }
  return any ? { bytes: total, kind } : undefined;
}

/** Anonymous resident memory (heap, stacks; not shared libraries or files): RssAnon. */
export function rssAnon(pid: number): number | undefined {
  return kbField(read(`/proc/${pid}/status`), 'RssAnon');
}

export function rss(pid: number): number | undefined {
  return kbField(read(`/proc/${pid}/status`), 'VmRSS');
}

/** Clock ticks per second of /proc/PID/stat times (USER_HZ, 100 on every Linux ABI Node runs on). */
const USER_HZ = 100;

/** User + system CPU time of a process, in seconds (10 ms resolution). */
export function cpuSeconds(pid: number): number | undefined {
  const f = statFields(pid);
  if (f === undefined) return undefined;
  // After "(comm)": state(0) ppid(1) ... utime(11) stime(12).
  return (Number(f[11]) + Number(f[12])) / USER_HZ;
}

/** MemAvailable from /proc/meminfo, in bytes. */
export function memAvailable(): number | undefined {
  return kbField(read('/proc/meminfo'), 'MemAvailable');
}
