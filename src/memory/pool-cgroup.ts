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
 * cannot be arranged, the pool goes without a cgroup (one line says why). The directory
 * helpers (make, move into, remove) serve the pool's CPU cgroup too (cpu-cgroup.ts).
 */
import fs from 'node:fs';
import path from 'node:path';
import { memoryFiles, type CgroupVersion } from './cgroup.js';
import { readOomKills, type MemoryCgroup } from './cgroup-files.js';

let serial = 0;

/**
 * Makes `<parent>/fcgi-pm-<pid>-<pool>-<n>` with `file` set to `value` (a memory limit, a
 * CPU weight), after sweeping stale ones; under v2 the parent first gives `controller` to
 * its children. Returns the directory; throws with a reason when it cannot.
 */
export function makePoolCgroupDir(parent: string, version: CgroupVersion, controller: 'memory' | 'cpu', pool: string, file: string, value: string): string {
  if (version === 2) enableController(parent, controller);
  removeStale(parent);
  const dir = path.join(parent, `fcgi-pm-${process.pid}-${pool.replace(/[^A-Za-z0-9_.-]/g, '_')}-${++serial}`);
  let made = true;
  try {
    fs.mkdirSync(dir);
  } catch (e) {
    // Ours already: the code before an exec in place of this process left it for the workers it handed on.
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    made = false;
  }
  try {
    fs.writeFileSync(path.join(dir, file), value);
  } catch (e) {
    if (made) fs.rmdirSync(dir);
    throw e;
  }
  return dir;
}

/** Moves process `pid` into cgroup `dir`; the error code when it could not. */
export function moveIntoCgroup(dir: string, pid: number): string | undefined {
  try {
    fs.writeFileSync(path.join(dir, 'cgroup.procs'), String(pid));
    return undefined;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code ?? String(e);
  }
}

/** Removes cgroup `dir` (its processes must be gone); the error code when it could not. */
export function removeCgroupDir(dir: string): string | undefined {
  try {
    fs.rmdirSync(dir);
    return undefined;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return code === 'ENOENT' ? undefined : (code ?? String(e));
  }
}

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
    const dir = makePoolCgroupDir(parent.dir, parent.version, 'memory', pool, memoryFiles(parent.version).limit, String(limit));
    return new PoolCgroup({ version: parent.version, dir, mount: parent.mount }, limit);
  }

  /** Moves process `pid` in; the error code when it could not. */
  add(pid: number): string | undefined {
    return moveIntoCgroup(this.cg.dir, pid);
  }

  /** Removes the directory (its processes must be gone); the error code when it could not. */
  remove(): string | undefined {
    return removeCgroupDir(this.cg.dir);
  }
}

/** Pool cgroups (memory or CPU) of an fcgi-pm that died without removing them (SIGKILL): empty once its workers died with it. */
function removeStale(dir: string): void {
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

/** v2: children of `dir` get `controller` (fails with EBUSY when `dir` holds processes). */
function enableController(dir: string, controller: 'memory' | 'cpu'): void {
  const file = path.join(dir, 'cgroup.subtree_control');
  if (fs.readFileSync(file, 'latin1').split(/\s+/).includes(controller)) return;
  fs.writeFileSync(file, `+${controller}`);
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
