/**
 * A pool's own memory cgroup, under fcgi-pm's: created when the pool has memory_limit
 * and fcgi-pm may create cgroups (root, or a delegated subtree), its kernel limit set to
 * memory_limit, each worker moved into it right after it was started (before its socket
 * accepts), and removed when the pool stops. The kernel then enforces the cap inside the
 * pool: a worker that allocates past it is killed by the OOM killer there, not fcgi-pm
 * or another pool's worker; the kill counter tells the pool it happened.
 *
 * v2 has "no processes in inner cgroups": the memory controller can only be enabled for
 * children of a cgroup that holds no process, so under v2 fcgi-pm must run in a leaf of
 * a delegated subtree whose parent has +memory in cgroup.subtree_control; when that
 * cannot be arranged, the pool goes without a cgroup (one line says why).
 */
import fs from 'node:fs';
import path from 'node:path';
import { memoryFiles } from './cgroup.js';
import { readOomKills, type MemoryCgroup } from './cgroup-files.js';

let serial = 0;

export class PoolCgroup {
  readonly cg: MemoryCgroup;
  readonly limit: number;
  readonly oom: OomCounter;

  private constructor(cg: MemoryCgroup, limit: number) {
    this.cg = cg;
    this.limit = limit;
    this.oom = new OomCounter(cg);
  }

  /** Creates `<parent>/fcgi-pm-<pid>-<pool>-<n>` with `limit`; throws with a reason when it cannot. */
  static create(parent: MemoryCgroup, pool: string, limit: number): PoolCgroup {
    if (parent.version === 2) enableMemoryController(parent.dir);
    removeStale(parent.dir);
    const name = `fcgi-pm-${process.pid}-${pool.replace(/[^A-Za-z0-9_.-]/g, '_')}-${++serial}`;
    const dir = path.join(parent.dir, name);
    fs.mkdirSync(dir);
    try {
      fs.writeFileSync(path.join(dir, memoryFiles(parent.version).limit), String(limit));
    } catch (e) {
      fs.rmdirSync(dir);
      throw e;
    }
    return new PoolCgroup({ version: parent.version, dir, mount: parent.mount }, limit);
  }

  /** Moves process `pid` in; the error code when it could not. */
  add(pid: number): string | undefined {
    try {
      fs.writeFileSync(path.join(this.cg.dir, 'cgroup.procs'), String(pid));
      return undefined;
    } catch (e) {
      return (e as NodeJS.ErrnoException).code ?? String(e);
    }
  }

  /** Removes the directory (its processes must be gone); the error code when it could not. */
  remove(): string | undefined {
    try {
      fs.rmdirSync(this.cg.dir);
      return undefined;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      return code === 'ENOENT' ? undefined : (code ?? String(e));
    }
  }
}

/** Pool cgroups (memory or CPU) of an fcgi-pm that died without removing them (SIGKILL): empty once its workers died with it. */
export function removeStale(dir: string): void {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return;
  }
  for (const n of names) {
    const m = /^fcgi-pm-(\d+)-/.exec(n);
    if (m === null || Number(m[1]) === process.pid || alive(Number(m[1]))) continue;
    try {
      fs.rmdirSync(path.join(dir, n));
    } catch {
      // still holds a process (EBUSY), or not ours to remove
    }
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** v2: children of `dir` get the memory controller (fails with EBUSY when `dir` holds processes). */
function enableMemoryController(dir: string): void {
  const file = path.join(dir, 'cgroup.subtree_control');
  if (fs.readFileSync(file, 'latin1').split(/\s+/).includes('memory')) return;
  fs.writeFileSync(file, '+memory');
}

/**
 * The OOM kills of one cgroup, handed out one per dead worker: two workers killed at
 * once raise the counter by two before either exit is seen, and each exit takes one.
 */
export class OomCounter {
  private seen: number;
  private unclaimed = 0;
  constructor(private readonly cg: MemoryCgroup) {
    this.seen = readOomKills(cg) ?? 0;
  }

  /** True when a kill not yet claimed by another worker is on the counter. */
  claim(): boolean {
    const now = readOomKills(this.cg);
    if (now !== undefined && now > this.seen) {
      this.unclaimed += now - this.seen;
      this.seen = now;
    }
    if (this.unclaimed === 0) return false;
    this.unclaimed--;
    return true;
  }
}
