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
import { cpuWeightFile } from './cgroup.js';
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
