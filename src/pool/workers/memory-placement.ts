/**
 * Where a spawned pool's workers run, as the kernel sees them: the pool's own memory
 * cgroup (with memory_limit, where fcgi-pm may create one; pool-cgroup.ts), its own CPU
 * cgroup weighted by cpu_weight (where the daemon found it may; cpu-cgroup.ts), each
 * worker's oom_score_adj, whether the kernel's OOM killer took one, and how much room the
 * cgroup has left. The memory part (memory.ts) decides; this is its glue to the kernel.
 */
import { ErrorCodes } from '../../errors.js';
import type { Logger } from '../../log/log.js';
import { readCgroupUsed } from '../../memory/cgroup-files.js';
import { formatBytes } from '../../memory/format.js';
import { boxHeadroom } from '../../memory/box-watch.js';
import type { MemoryGovernor } from '../../memory/host-governor.js';
import { setOomScoreAdj } from '../../memory/oom-score.js';
import { PoolCpuCgroup, type CpuPlacementView } from '../../memory/cpu-cgroup.js';
import { setSlice, sliceSupport } from '../../memory/cpu-slice.js';
import { PoolCgroup } from '../../memory/pool-cgroup.js';
import type { WorkerExit } from '../../worker/types.js';

export class WorkerPlacement {
  /** The pool's own memory cgroup, when it has one. */
  readonly cgroup: PoolCgroup | undefined;
  /** The pool's own CPU cgroup, when it has one. */
  readonly cpu: PoolCpuCgroup | undefined;
  private readonly name: string;
  private readonly limit: number;
  private readonly oomScoreAdj: number;
  private readonly host: MemoryGovernor;
  private readonly log: Logger;
  /** Placing a worker in the cgroup or setting its oom_score_adj failed: said once. */
  private warnedPlace = false;
  /** busy_cpu_slice in ns (0: off, or the kernel call is missing), and whether the workers have it now. */
  private readonly busySliceNs: number;
  private sliceOn = false;
  private warnedSlice = false;

  constructor(name: string, limit: number, oomScoreAdj: number, cpuWeight: number, busySliceMs: number, host: MemoryGovernor, log: Logger) {
    this.name = name;
    this.limit = limit;
    this.oomScoreAdj = oomScoreAdj;
    this.host = host;
    this.log = log;
    this.cgroup = this.makeCgroup();
    this.cpu = this.makeCpuCgroup(cpuWeight);
    this.busySliceNs = busySliceMs > 0 && sliceSupported(log) ? busySliceMs * 1e6 : 0;
  }

  /**
   * busy_cpu_slice: the long slice for every worker while the pool's requests wait
   * (busy-slice.ts decides), the kernel's default again after. One line the first time
   * the kernel refuses (a worker of another user without CAP_SYS_NICE).
   */
  setBusySlice(on: boolean, pids: Iterable<number>): void {
    if (this.busySliceNs === 0 || on === this.sliceOn) return;
    this.sliceOn = on;
    this.log.debug({ busyCpuSlice: on ? this.busySliceNs / 1e6 : 0 }, `pool ${this.name}: requests ${on ? 'wait: workers run with the long CPU slice' : 'no longer wait: workers back to the default CPU slice'}`);
    for (const pid of pids) this.applySlice(pid);
  }

  private applySlice(pid: number): void {
    const err = setSlice(pid, this.sliceOn ? this.busySliceNs : 0);
    if (err === undefined || this.warnedSlice) return;
    this.warnedSlice = true;
    this.log.warn({ code: ErrorCodes.CPU_CGROUP, wpid: pid, errno: err }, `pool ${this.name}: cannot set worker ${pid}'s CPU slice (${err}); busy_cpu_slice has no effect on it`);
  }

  /** The pool's own CPU cgroup where the daemon found it may make them (said once at start); one line when this one fails. */
  private makeCpuCgroup(weight: number): PoolCpuCgroup | undefined {
    if (!this.host.cpuCgroups || weight === 0) return undefined;
    try {
      const cg = PoolCpuCgroup.create(this.name, weight);
      this.log.debug({ cgroup: cg.dir, cpuWeight: weight }, `pool ${this.name}: workers run in CPU cgroup ${cg.dir}, cpu_weight ${weight} (${cg.file} ${cg.value})`);
      return cg;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code ?? String(e);
      this.log.warn({ code: ErrorCodes.CPU_CGROUP, errno: code }, `pool ${this.name}: no CPU cgroup of its own (${code}); its workers share the CPU as plain processes`);
      return undefined;
    }
  }

  /** The pool's CPU cgroup and weight, for status. */
  cpuView(): CpuPlacementView | undefined {
    return this.cpu?.view();
  }

  /** The pool's own memory cgroup when it has memory_limit and fcgi-pm may create one; one line either way. */
  private makeCgroup(): PoolCgroup | undefined {
    const parent = this.host.cgroup;
    if (this.limit <= 0 || parent === undefined) return undefined;
    try {
      const cg = PoolCgroup.create(parent, this.name, this.limit);
      this.log.info({ cgroup: cg.cg.dir, memoryLimit: this.limit, version: cg.cg.version }, `pool ${this.name}: workers run in memory cgroup ${cg.cg.dir}, kernel limit ${formatBytes(this.limit)} (memory_limit)`);
      return cg;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code ?? String(e);
      this.log.info({ parent: parent.dir, errno: code }, `pool ${this.name}: no memory cgroup of its own (cannot create one under ${parent.dir}: ${code}); memory_limit is enforced by sampling only`);
      return undefined;
    }
  }

  /** A process that started (not yet ready): into the pool's cgroup, and its oom_score_adj, before it can serve. */
  place(pid: number): void {
    const errs: string[] = [];
    const inCg = this.cgroup?.add(pid);
    if (inCg !== undefined) errs.push(`cannot move it into ${this.cgroup!.cg.dir}: ${inCg}`);
    const inCpu = this.cpu?.add(pid);
    if (inCpu !== undefined) errs.push(`cannot move it into ${this.cpu!.dir}: ${inCpu}`);
    if (this.sliceOn) this.applySlice(pid);
    const adj = setOomScoreAdj(pid, this.oomScoreAdj);
    if (adj !== undefined) errs.push(`cannot set its oom_score_adj to ${this.oomScoreAdj}: ${adj}`);
    if (errs.length === 0 || this.warnedPlace) return;
    this.warnedPlace = true;
    this.log.warn({ code: ErrorCodes.MEMORY_CGROUP, wpid: pid }, `pool ${this.name}: worker ${pid}: ${errs.join('; ')}`);
  }

  /** Removes the pool's cgroups once its workers are gone. */
  remove(): void {
    const cpuErr = this.cpu?.remove();
    if (cpuErr !== undefined) this.log.warn({ code: ErrorCodes.CPU_CGROUP, cgroup: this.cpu!.dir, errno: cpuErr }, `pool ${this.name}: cannot remove CPU cgroup ${this.cpu!.dir}: ${cpuErr}`);
    const cg = this.cgroup;
    if (cg === undefined) return;
    const err = cg.remove();
    if (err !== undefined) this.log.warn({ code: ErrorCodes.MEMORY_CGROUP, cgroup: cg.cg.dir, errno: err }, `pool ${this.name}: cannot remove memory cgroup ${cg.cg.dir}: ${err}`);
  }

  /**
   * Whether the kernel's OOM killer killed this worker: SIGKILL that fcgi-pm did not
   * send (max_memory_hard, request_timeout escalations name a reason) while the pool's
   * cgroup, or fcgi-pm's own, counted a new OOM kill.
   */
  oomKilled(exit: WorkerExit | undefined): boolean {
    if (exit === undefined || exit.signal !== 'SIGKILL' || exit.reason === 'memory_hard') return false;
    // The pool's limit, or fcgi-pm's cgroup's (a kill there may take a pool cgroup's worker).
    return this.cgroup?.oom.claim() === true || this.host.oomKilledHere();
  }

  /** What the pool's cgroup can still take above its headroom, read now; undefined without one. */
  room(): number | undefined {
    const cg = this.cgroup;
    const used = cg && readCgroupUsed(cg.cg);
    return used === undefined ? undefined : cg!.limit - boxHeadroom(cg!.limit) - used;
  }
}

/** Whether this process can set slices; the reason why not said once (info: nothing fails, busy pools keep the kernel's slice). */
let saidNoSlice = false;
function sliceSupported(log: Logger): boolean {
  const why = sliceSupport();
  if (why !== undefined && !saidNoSlice) {
    saidNoSlice = true;
    log.info(`busy_cpu_slice: workers keep the kernel's CPU slice (${why})`);
  }
  return why === undefined;
}
