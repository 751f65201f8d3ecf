/**
 * A pool's CPU cgroup: its workers share the CPU with other pools' workers by the pool's
 * cpu_weight (v2 cpu.weight; v1 cpu.shares), as uWSGI's cgroup options do. The kernel's
 * scheduler divides the CPU between cgroups first, then between the processes inside
 * each, so a pool running many times its capacity cannot take the CPU a quiet pool's one
 * busy worker needs: with equal weights each busy pool gets at least an equal share.
 *
 * Created under fcgi-pm's own CPU cgroup when fcgi-pm may (root, or a delegated subtree
 * with the cpu controller: v2 also needs +cpu in that cgroup's subtree_control, which the
 * kernel refuses while fcgi-pm's own cgroup holds processes). Where it cannot, pools go
 * without, and the daemon says why once at start (cpuCgroupsAtStart).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cpuWeightFile, DAEMON_LEAF, parseProcCgroup } from './cgroup.js';
import { locateCpuCgroup, type CpuCgroupRoot } from './cgroup-files.js';
import { makePoolCgroupDir, moveIntoCgroup, removeCgroupDir } from './pool-cgroup.js';

/** cpu_weight's default: an equal share (v2's own default cpu.weight). */
export const DEFAULT_CPU_WEIGHT = 100;

let located: { root: CpuCgroupRoot } | { why: string } | undefined;

/** fcgi-pm's own CPU cgroup, found once per process. */
function root(): { root: CpuCgroupRoot } | { why: string } {
  located ??= locateCpuCgroup();
  return located;
}

/** What a pool's CPU placement is, for status. */
export interface CpuPlacementView {
  dir: string;
  weight: number;
  /** v1 cpu.shares or v2 cpu.weight, as the kernel holds it. */
  file: string;
  value: string;
}

export class PoolCpuCgroup {
  readonly dir: string;
  readonly weight: number;
  readonly file: string;
  readonly value: string;

  private constructor(dir: string, weight: number, file: string, value: string) {
    this.dir = dir;
    this.weight = weight;
    this.file = file;
    this.value = value;
  }

  /** Creates `<fcgi-pm's cpu cgroup>/fcgi-pm-<pid>-<pool>-<n>` with the weight; throws with a reason when it cannot. */
  static create(pool: string, weight: number): PoolCpuCgroup {
    const r = root();
    if ('why' in r) throw Object.assign(new Error(r.why), { code: 'ENOCGROUP' });
    const w = cpuWeightFile(r.root.version, weight);
    const dir = makePoolCgroupDir(r.root.dir, r.root.version, 'cpu', pool, w.file, w.value);
    return new PoolCpuCgroup(dir, weight, w.file, w.value);
  }

  /** Moves process `pid` in; the error code when it could not. */
  add(pid: number): string | undefined {
    return moveIntoCgroup(this.dir, pid);
  }

  /** Removes the directory (its processes must be gone); the error code when it could not. */
  remove(): string | undefined {
    return removeCgroupDir(this.dir);
  }

  view(): CpuPlacementView {
    return { dir: this.dir, weight: this.weight, file: this.file, value: this.value };
  }
}

/**
 * The daemon's one start-up word on CPU shares: where pools' CPU cgroups go, or why
 * there are none (then every worker competes for the CPU as a plain process, as under
 * PHP-FPM). A test cgroup is made and removed, so the answer is what the kernel allows.
 */
export function cpuCgroupsAtStart(): { ok: true; dir: string; version: number } | { ok: false; why: string } {
  const r = root();
  if ('why' in r) return { ok: false, why: r.why };
  try {
    const probe = PoolCpuCgroup.create('probe', 100);
    probe.remove();
    return { ok: true, dir: r.root.dir, version: r.root.version };
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? String(e);
    return { ok: false, why: `cannot create a cgroup under ${r.root.dir} (${code}): run as root, or delegate a cgroup subtree with the cpu controller` };
  }
}

/** daemon_cpu_weight's default: three pools' worth (the daemon relays every pool's requests and uses only what it needs). */
export const DEFAULT_DAEMON_CPU_WEIGHT = 300;

/** The nice value whose weight is nearest `weight` on cpu_weight's scale (100 = nice 0; the kernel's table steps by about 1.25×). */
export function niceForWeight(weight: number): number {
  return Math.max(-20, Math.min(19, Math.round(-Math.log(weight / 100) / Math.log(1.25))));
}

/**
 * daemon_cpu_weight: fcgi-pm's own share beside its pools' CPU cgroups, so the process
 * every request passes through does not wait behind busy workers. Under v2 the weight of
 * its leaf (DAEMON_LEAF, beside the pools' cgroups); under v1 the pools' cgroups are
 * siblings of the daemon's autogroup (the kernel's one entity per session in the root
 * cgroup), whose nice it sets when the session is the daemon's own (a service's; in a
 * terminal's session it would raise the shell's too). Returns what was done, or why not.
 */
export function raiseDaemonShare(weight: number, proc = '/proc/self'): { done: string } | { why: string } {
  const r = root();
  if ('why' in r) return { why: r.why };
  try {
    if (r.root.version === 2) {
      const leaf = join(r.root.dir, DAEMON_LEAF);
      writeFileSync(join(leaf, 'cpu.weight'), String(weight));
      return { done: `cpu.weight ${weight} on ${leaf}` };
    }
    const at = parseProcCgroup(readFileSync(`${proc}/cgroup`, 'latin1')).v1Cpu;
    if (at !== '/') return { why: `the daemon runs in CPU cgroup ${at}, where autogroups do not apply` };
    const auto = readFileSync(`${proc}/autogroup`, 'latin1');
    const stat = readFileSync(`${proc}/stat`, 'latin1');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const pid = Number(stat.slice(0, stat.indexOf(' ')));
    // An empty file: the session is init's, whose tasks stay in the root task group.
    if (Number(fields[3]) !== pid) return { why: `the daemon shares its session's autogroup (${auto.trim() || 'the root one'}); run it as a service or under setsid` };
    const nice = niceForWeight(weight);
    writeFileSync(`${proc}/autogroup`, String(nice));
    return { done: `nice ${nice} on its autogroup (${auto.split(' ')[0]})` };
  } catch (e) {
    return { why: `${(e as NodeJS.ErrnoException).code ?? (e as Error).message}` };
  }
}
