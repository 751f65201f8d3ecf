/**
 * CPU time of a process and of everything under it, from /proc (clock ticks: USER_HZ is
 * 100 on Linux): the process's own, and its workers' — live descendants' own and reaped
 * children's (cutime/cstime, which a parent inherits when it waits for a child). Two
 * readings apart give the CPU the workers spent between them, including workers that
 * came and went meanwhile (a reload's generations), which sampling live pids misses.
 */
import { readdirSync, readFileSync } from 'node:fs';

const TICK_MS = 10;

interface Stat {
  ppid: number;
  own: number;
  reaped: number;
}

function statOf(pid: number): Stat | undefined {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    // After the comm: state ppid ... utime(14th field) stime cutime cstime, 1-based from pid.
    return { ppid: Number(f[1]), own: Number(f[11]) + Number(f[12]), reaped: Number(f[13]) + Number(f[14]) };
  } catch {
    return undefined;
  }
}

export interface TreeCpu {
  /** ms of CPU the process itself used. */
  self: number;
  /** ms of CPU its descendants used (live ones, and reaped ones through their parents). */
  workers: number;
}

/** Reads the tree under `root` now. */
export function treeCpu(root: number): TreeCpu {
  const stats = new Map<number, Stat>();
  for (const e of readdirSync('/proc')) {
    const pid = Number(e);
    if (!Number.isInteger(pid)) continue;
    const st = statOf(pid);
    if (st !== undefined) stats.set(pid, st);
  }
  const children = new Map<number, number[]>();
  for (const [pid, st] of stats) {
    const list = children.get(st.ppid);
    if (list === undefined) children.set(st.ppid, [pid]);
    else list.push(pid);
  }
  const top = stats.get(root);
  if (top === undefined) return { self: 0, workers: 0 };
  let workers = top.reaped;
  const todo = [...(children.get(root) ?? [])];
  for (let pid = todo.pop(); pid !== undefined; pid = todo.pop()) {
    const st = stats.get(pid)!;
    workers += st.own + st.reaped;
    todo.push(...(children.get(pid) ?? []));
  }
  return { self: top.own * TICK_MS, workers: workers * TICK_MS };
}
