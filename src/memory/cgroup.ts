/**
 * Memory (and CPU) cgroups, as text: which cgroup a process is in (/proc/PID/cgroup), where
 * the hierarchies are mounted (/proc/self/mountinfo), and the few files fcgi-pm reads (limit,
 * anonymous memory, OOM kills) and writes (a pool's CPU weight: cpuWeightFile). Pure: cgroup-files.ts does the reading, pool-cgroup.ts
 * the writing.
 *
 *   v2 (unified): "0::/path"; memory.max ("max" or bytes), memory.current, memory.stat
 *                 (active_file, inactive_file), memory.events.local "oom_kill" (kills of
 *                 this cgroup's own processes; memory.events adds the children's)
 *   v1:           "N:memory:/path" (the controller list may hold others: "4:cpu,memory:/");
 *                 memory.limit_in_bytes ("unlimited" is PAGE_COUNTER_MAX pages, about
 *                 2^63), memory.usage_in_bytes, memory.stat (total_active_file,
 *                 total_inactive_file: this cgroup and its children), memory.oom_control
 *                 "oom_kill"
 */

export type CgroupVersion = 1 | 2;

/** The cgroup paths of one process, relative to each hierarchy's root. */
export interface ProcCgroups {
  /** The v1 hierarchy with the memory controller. */
  v1Memory: string | undefined;
  /** The v1 hierarchy with the cpu controller (often "cpu,cpuacct"). */
  v1Cpu: string | undefined;
  /** The unified (v2) hierarchy. */
  v2: string | undefined;
}

export function parseProcCgroup(text: string): ProcCgroups {
  let v1Memory: string | undefined;
  let v1Cpu: string | undefined;
  let v2: string | undefined;
  for (const line of text.split('\n')) {
    // hierarchy-ID:controller-list:path; the path may itself hold ':'.
    const a = line.indexOf(':');
    const b = a < 0 ? -1 : line.indexOf(':', a + 1);
    if (b < 0) continue;
    const id = line.slice(0, a);
    const controllers = line.slice(a + 1, b);
    const path = line.slice(b + 1);
    if (id === '0' && controllers === '') {
      v2 = path;
      continue;
    }
    const list = controllers.split(',');
    if (list.includes('memory')) v1Memory = path;
    if (list.includes('cpu')) v1Cpu = path;
  }
  return { v1Memory, v1Cpu, v2 };
}

/** Where a hierarchy is mounted: `root` is the cgroup path the mount shows at `mount`. */
export interface CgroupMount {
  root: string;
  mount: string;
}

export interface CgroupMounts {
  v1Memory: CgroupMount | undefined;
  v1Cpu: CgroupMount | undefined;
  v2: CgroupMount | undefined;
}

/** Mount points are octal-escaped in mountinfo ("\040" for a space). */
function unescapeMount(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
}

/** "36 35 98:0 /root /mount opts shared:1 - cgroup cgroup rw,memory" lines. The first mount of each kind wins. */
export function parseMountinfo(text: string): CgroupMounts {
  let v1Memory: CgroupMount | undefined;
  let v1Cpu: CgroupMount | undefined;
  let v2: CgroupMount | undefined;
  for (const line of text.split('\n')) {
    const dash = line.indexOf(' - ');
    if (dash < 0) continue;
    const f = line.slice(0, dash).split(' ');
    const tail = line.slice(dash + 3).split(' ');
    const fstype = tail[0];
    const superOpts = (tail[2] ?? '').split(',');
    const m = { root: unescapeMount(f[3] ?? '/'), mount: unescapeMount(f[4] ?? '') };
    if (m.mount === '') continue;
    if (fstype === 'cgroup2' && v2 === undefined) v2 = m;
    else if (fstype === 'cgroup') {
      if (superOpts.includes('memory') && v1Memory === undefined) v1Memory = m;
      if (superOpts.includes('cpu') && v1Cpu === undefined) v1Cpu = m;
    }
  }
  return { v1Memory, v1Cpu, v2 };
}

/**
 * The directory of cgroup `path` under mount `m`, or undefined when the mount does not
 * show it (a container that sees only its own subtree shows its root as "/").
 */
export function cgroupDir(m: CgroupMount, path: string): string | undefined {
  let rel: string;
  if (m.root === '/') rel = path;
  else if (path === m.root) rel = '/';
  else if (path.startsWith(m.root + '/')) rel = path.slice(m.root.length);
  else return undefined;
  const base = m.mount.endsWith('/') ? m.mount.slice(0, -1) : m.mount;
  return rel === '/' ? base : base + rel;
}

/**
 * The leaf fcgi-pm moves itself into under cgroup v2 (settleInLeaf): a cgroup that holds
 * processes cannot give controllers to its children, so the daemon leaves its delegated
 * cgroup (a systemd service's, with Delegate=yes) to a child of its own and the pools'
 * cgroups go beside that child.
 */
export const DAEMON_LEAF = 'fcgi-pm.daemon';

/** fcgi-pm's cgroup under v2: the one above its leaf when it runs in DAEMON_LEAF. */
export function aboveLeaf(dir: string): string {
  return dir.endsWith(`/${DAEMON_LEAF}`) ? dir.slice(0, -DAEMON_LEAF.length - 1) : dir;
}

/** The directories from `dir` up to the mount point `top`, nearest first. */
export function ancestors(dir: string, top: string): string[] {
  const out: string[] = [];
  let d = dir;
  for (;;) {
    out.push(d);
    if (d === top || d.length <= top.length) return out;
    const i = d.lastIndexOf('/');
    if (i <= 0) return out;
    d = d.slice(0, i);
  }
}

/** Limits at or above this mean "no limit": v1 prints PAGE_COUNTER_MAX pages (9223372036854771712 with 4 KiB pages). */
export const UNLIMITED_FROM = 2 ** 62;

/** memory.max / memory.limit_in_bytes: bytes, or Infinity for none; undefined when not a limit. */
export function parseLimit(text: string): number | undefined {
  const t = text.trim();
  if (t === 'max') return Infinity;
  if (!/^\d+$/.test(t)) return undefined;
  const n = Number(t);
  return n >= UNLIMITED_FROM ? Infinity : n;
}

/** "key value" lines (memory.stat, memory.events, memory.oom_control). */
export function parseKeyValues(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const sp = line.indexOf(' ');
    if (sp <= 0) continue;
    const v = Number(line.slice(sp + 1));
    if (Number.isFinite(v)) out.set(line.slice(0, sp), v);
  }
  return out;
}

/**
 * What the cgroup (with its children) holds that the kernel cannot reclaim without swap:
 * usage minus file pages (memory.stat active_file + inactive_file; v1's total_ figures
 * include the children). Anonymous memory, shared memory and kernel memory (page
 * tables, sockets) remain: what the OOM killer sees coming.
 */
export function unreclaimable(usageText: string, statText: string, version: CgroupVersion): number | undefined {
  const usage = parseLimit(usageText);
  if (usage === undefined || !Number.isFinite(usage)) return undefined;
  const kv = parseKeyValues(statText);
  const p = version === 2 ? '' : 'total_';
  const file = (kv.get(`${p}active_file`) ?? 0) + (kv.get(`${p}inactive_file`) ?? 0);
  return Math.max(0, usage - file);
}

/** The OOM-kill counter (of the killed process's own cgroup): v2 memory.events(.local), v1 memory.oom_control. */
export function oomKillsFrom(text: string): number | undefined {
  return parseKeyValues(text).get('oom_kill');
}

/** File names per version. */
export function memoryFiles(version: CgroupVersion): { limit: string; usage: string; stat: string; oom: string } {
  return version === 2
    ? { limit: 'memory.max', usage: 'memory.current', stat: 'memory.stat', oom: 'memory.events.local' }
    : { limit: 'memory.limit_in_bytes', usage: 'memory.usage_in_bytes', stat: 'memory.stat', oom: 'memory.oom_control' };
}

/** A limit found on `dir` (the daemon's own cgroup or one of its parents). */
export interface LimitAt {
  dir: string;
  limit: number;
}

/** The tightest finite limit of a chain, or undefined. */
export function tightest(limits: readonly LimitAt[]): LimitAt | undefined {
  let best: LimitAt | undefined;
  for (const l of limits) if (Number.isFinite(l.limit) && (best === undefined || l.limit < best.limit)) best = l;
  return best;
}

/** cpu_weight (1-10000, 100 = an equal share, as v2's cpu.weight) in the file each version has: v1's cpu.shares is 1024 for an equal share. */
export function cpuWeightFile(version: CgroupVersion, weight: number): { file: string; value: string } {
  return version === 2 ? { file: 'cpu.weight', value: String(weight) } : { file: 'cpu.shares', value: String(Math.max(2, Math.round((weight * 1024) / 100))) };
}
