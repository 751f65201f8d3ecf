/**
 * The one place that reads cgroup files (parsing is in cgroup.ts): which memory cgroup
 * fcgi-pm runs in, the tightest limit on it (its own or a parent's), and the small
 * files read while running (anonymous memory, OOM kills). Every read returns undefined
 * instead of throwing: no cgroup, no such file, not Linux.
 */
import fs from 'node:fs';
import path from 'node:path';
import {
  aboveLeaf,
  ancestors,
  DAEMON_LEAF,
  cgroupDir,
  memoryFiles,
  oomKillsFrom,
  parseLimit,
  parseMountinfo,
  parseProcCgroup,
  tightest,
  unreclaimable,
  type CgroupVersion,
  type LimitAt,
} from './cgroup.js';

/** A memory cgroup directory (the daemon's own, or one of a pool). */
export interface MemoryCgroup {
  version: CgroupVersion;
  dir: string;
  /** The hierarchy's mount point: the walk up for limits stops there. */
  mount: string;
}

/** The box fcgi-pm runs in: the tightest memory limit on its cgroup or a parent. */
export interface MemoryBox {
  cgroup: MemoryCgroup;
  limit: number;
  /** Where that limit is set. */
  limitDir: string;
}

function readText(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'latin1');
  } catch {
    return undefined;
  }
}

/** fcgi-pm's own memory cgroup: the v1 memory hierarchy when mounted, else the unified one. */
export function locateMemoryCgroup(proc = '/proc/self'): MemoryCgroup | undefined {
  const cg = readText(`${proc}/cgroup`);
  const mi = readText(`${proc}/mountinfo`);
  if (cg === undefined || mi === undefined) return undefined;
  const paths = parseProcCgroup(cg);
  const mounts = parseMountinfo(mi);
  if (paths.v1Memory !== undefined && mounts.v1Memory !== undefined) {
    const dir = cgroupDir(mounts.v1Memory, paths.v1Memory);
    if (dir !== undefined) return { version: 1, dir, mount: mounts.v1Memory.mount };
  }
  if (paths.v2 !== undefined && mounts.v2 !== undefined) {
    const dir = cgroupDir(mounts.v2, paths.v2);
    if (dir !== undefined) return { version: 2, dir: aboveLeaf(dir), mount: mounts.v2.mount };
  }
  return undefined;
}

/**
 * Under cgroup v2, moves the daemon into DAEMON_LEAF below its cgroup when that cgroup was
 * delegated to it (it has the memory or cpu controller and the daemon may write there)
 * and holds no other process: the pools' cgroups can then be made beside the leaf (a
 * systemd unit with Delegate=yes puts the daemon in such a cgroup). Called once at start,
 * before any worker. undefined: nothing to do (v1, already in the leaf, no controller);
 * else where it moved, or why it did not.
 */
export function settleInLeaf(proc = '/proc/self', pid = process.pid): { moved: string } | { why: string } | undefined {
  const cg = readText(`${proc}/cgroup`);
  const mi = readText(`${proc}/mountinfo`);
  if (cg === undefined || mi === undefined) return undefined;
  const paths = parseProcCgroup(cg);
  const mounts = parseMountinfo(mi);
  // v1 hierarchies have no rule against processes in inner cgroups.
  if (paths.v1Memory !== undefined && paths.v1Cpu !== undefined) return undefined;
  if (paths.v2 === undefined || mounts.v2 === undefined) return undefined;
  const dir = cgroupDir(mounts.v2, paths.v2);
  if (dir === undefined || dir === mounts.v2.mount.replace(/\/$/, '') || path.basename(dir) === DAEMON_LEAF) return undefined;
  const controllers = readText(`${dir}/cgroup.controllers`)?.split(/\s+/) ?? [];
  if (!controllers.includes('memory') && !controllers.includes('cpu')) return undefined;
  const procs = (readText(`${dir}/cgroup.procs`) ?? '').split('\n').filter((l) => l !== '');
  if (procs.length !== 1 || Number(procs[0]) !== pid) return { why: `${dir} holds other processes (${procs.length}), so its controllers cannot be given to pools' cgroups` };
  const leaf = path.join(dir, DAEMON_LEAF);
  try {
    fs.mkdirSync(leaf, { recursive: true });
    fs.writeFileSync(path.join(leaf, 'cgroup.procs'), String(pid));
  } catch (e) {
    return { why: `cannot move into ${leaf}: ${(e as NodeJS.ErrnoException).code ?? String(e)}` };
  }
  return { moved: leaf };
}

/** The tightest limit on `cg` and its parents (a v2 cgroup without the memory controller has no memory.max). */
export function readMemoryBox(cg: MemoryCgroup): MemoryBox | undefined {
  const file = memoryFiles(cg.version).limit;
  const limits: LimitAt[] = [];
  for (const dir of ancestors(cg.dir, cg.mount)) {
    const text = readText(`${dir}/${file}`);
    const limit = text === undefined ? undefined : parseLimit(text);
    if (limit !== undefined) limits.push({ dir, limit });
  }
  const t = tightest(limits);
  return t === undefined ? undefined : { cgroup: cg, limit: t.limit, limitDir: t.dir };
}

/** The box fcgi-pm runs in now, or undefined when no memory limit applies. */
export function findMemoryBox(): MemoryBox | undefined {
  const cg = locateMemoryCgroup();
  return cg === undefined ? undefined : readMemoryBox(cg);
}

/** Memory of `cg` and its children that the kernel cannot reclaim (cgroup.ts unreclaimable). */
export function readCgroupUsed(cg: MemoryCgroup): number | undefined {
  const f = memoryFiles(cg.version);
  const usage = readText(`${cg.dir}/${f.usage}`);
  const stat = usage === undefined ? undefined : readText(`${cg.dir}/${f.stat}`);
  return stat === undefined ? undefined : unreclaimable(usage!, stat, cg.version);
}

/** How many processes the kernel's OOM killer killed in `cg`. */
export function readOomKills(cg: MemoryCgroup): number | undefined {
  const text = readText(`${cg.dir}/${memoryFiles(cg.version).oom}`);
  return text === undefined ? undefined : oomKillsFrom(text);
}

/** fcgi-pm's own CPU cgroup, where pools' CPU cgroups go: the v1 cpu hierarchy when mounted, else the unified one. */
export interface CpuCgroupRoot {
  version: CgroupVersion;
  dir: string;
}

/**
 * Where pools' CPU cgroups can go, or why none can: the v1 cpu hierarchy, or a v2
 * cgroup whose controllers include cpu. Whether fcgi-pm may write there is known only
 * by trying (cpu-cgroup.ts).
 */
export function locateCpuCgroup(proc = '/proc/self'): { root: CpuCgroupRoot } | { why: string } {
  const cg = readText(`${proc}/cgroup`);
  const mi = readText(`${proc}/mountinfo`);
  if (cg === undefined || mi === undefined) return { why: 'no /proc cgroup information' };
  const paths = parseProcCgroup(cg);
  const mounts = parseMountinfo(mi);
  if (paths.v1Cpu !== undefined && mounts.v1Cpu !== undefined) {
    const dir = cgroupDir(mounts.v1Cpu, paths.v1Cpu);
    if (dir !== undefined) return { root: { version: 1, dir } };
  }
  if (paths.v2 !== undefined && mounts.v2 !== undefined) {
    const at = cgroupDir(mounts.v2, paths.v2);
    if (at === undefined) return { why: `cgroup ${paths.v2} is not visible under ${mounts.v2.mount}` };
    const dir = aboveLeaf(at);
    const controllers = readText(`${dir}/cgroup.controllers`)?.split(/\s+/) ?? [];
    if (!controllers.includes('cpu')) return { why: `the cpu controller is not delegated to ${dir}` };
    return { root: { version: 2, dir } };
  }
  return { why: 'no cpu cgroup hierarchy mounted' };
}
