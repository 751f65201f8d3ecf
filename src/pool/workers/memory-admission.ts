/**
 * Spawn admission for a spawned pool: before every spawn it asks the host governor
 * (memory_limit, the budget, the box), holds spawns back while the pool's worker size is
 * learnt (memory-estimate.ts), keeps inside the pool's own memory cgroup, and says why it
 * refused: one warning per second while queued requests wait (the rest counted into the
 * next), one line per episode for spares.
 *
 * A pool with no worker measured yet plans new ones at expected_worker_memory; when that
 * does not fit, one worker may still start if MIN_WORKER_MEMORY does (the governor's probe).
 */
import { ErrorCodes } from '../../errors.js';
import type { Logger } from '../../log/log.js';
import { formatBytes } from '../../memory/format.js';
import { fitCount } from '../../memory/governor.js';
import type { MemoryGovernor } from '../../memory/host-governor.js';
import type { BudgetMember } from '../../memory/types.js';
import type { Clock } from '../../util/clock.js';
import { LEARN_WORKERS, type PoolEstimate } from './memory-estimate.js';
import type { WorkerPlacement } from './memory-placement.js';
import type { SlotView } from './slot.js';

/** One refused-spawn line per this many ms per pool; the rest are counted into the next. */
const REFUSAL_LOG_INTERVAL_MS = 1000;

/** The smallest plausible worker (a php-cgi worker measures about 8 MiB, a shell loop less). */
export const MIN_WORKER_MEMORY = 4 * 1024 * 1024;

export interface SpawnAdmissionDeps {
  /** The pool's part in the budget, as the governor knows it. */
  member: BudgetMember;
  host: MemoryGovernor;
  estimate: PoolEstimate;
  placement: WorkerPlacement;
  /** memory_limit (0 = off). */
  limit: number;
  /** Live workers (spawned, not yet exited). */
  slots(): Iterable<SlotView>;
  queued(): number;
  clock: Clock;
  log: Logger;
}

export class SpawnAdmission {
  private readonly d: SpawnAdmissionDeps;
  private refusalLog = { at: -Infinity, suppressed: 0 };
  /** Spare (non-demand) spawns are being refused: said once, until a spawn is admitted again. */
  private refusingSpares = false;
  refused = 0;

  constructor(deps: SpawnAdmissionDeps) {
    this.d = deps;
  }

  /** How many of `want` spawns memory allows; `demand` of them are for queued requests. */
  admit(want: number, demand: number): number {
    if (want <= 0) return 0;
    const { member, estimate: est, placement } = this.d;
    const committed = member.committed();
    const probe = est.source === 'configured' ? Math.min(MIN_WORKER_MEMORY, est.bytes) : undefined;
    const d = this.d.host.decide(member, { want, demand, estimate: est.bytes, committed, limit: this.d.limit, probe });
    let admit = d.admit;
    let limitedBy: string | undefined = d.limitedBy;
    let room = d.room;
    // Only where memory is capped can a wrong small estimate overcommit it.
    const capped = d.budget !== undefined || d.room !== undefined || this.d.limit > 0 || placement.cgroup !== undefined;
    let held = 0;
    if (capped && est.learning() && admit > 0) {
      let unproven = 0;
      for (const slot of this.d.slots()) if (slot.requests === 0 || (slot.requests === 1 && slot.workerState === 'busy')) unproven++;
      const learning = Math.max(0, 1 - unproven);
      if (learning < admit) {
        // Not a refusal: the next one starts once this one has shown its size.
        this.logLearning(admit, learning);
        held = admit - learning;
        admit = learning;
      }
    }
    // The kernel charges the pool's cgroup more than the PSS it is planned at (whole shared pages, page tables).
    const cgRoom = placement.room();
    if (cgRoom !== undefined) {
      let fit = fitCount(cgRoom, est.bytes);
      if (fit === 0 && probe !== undefined && member.workerCount() === 0 && cgRoom >= probe) fit = 1;
      if (fit < admit) [admit, limitedBy, room] = [fit, 'pool_cgroup', cgRoom];
    }
    if (admit + held < want) {
      this.refused += want - admit - held;
      this.logRefusal(want, admit, admit < demand, limitedBy, committed, d.evict.length + d.retire.length, d.covered, d.hostCommitted, room);
    } else {
      this.refusingSpares = false;
    }
    return admit;
  }

  /** One debug line per learning spawn held back. */
  private logLearning(wanted: number, admitted: number): void {
    const est = this.d.estimate;
    this.d.log.debug({ wanted, admitted, learnedFrom: est.learnedFrom, estimate: est.bytes },
      `pool ${this.d.member.name}: starting ${admitted} of ${wanted} worker(s) while its worker size is learnt (${est.learnedFrom} of ${LEARN_WORKERS} measured)`);
  }

  private logRefusal(
    want: number, admitted: number, demandRefused: boolean, limitedBy: string | undefined, committed: number, evicting: number, covered: number, hostCommitted: number | undefined, room: number | undefined,
  ): void {
    const now = this.d.clock.now();
    const r = this.refusalLog;
    if (!demandRefused) {
      // Spares for dynamic/static modes: nobody waits for them; one line per episode.
      if (this.refusingSpares) return;
      this.refusingSpares = true;
    } else if (now - r.at < REFUSAL_LOG_INTERVAL_MS && evicting === 0) {
      r.suppressed++;
      return;
    }
    const suppressed = r.suppressed;
    this.refusalLog = { at: now, suppressed: 0 };
    const name = this.d.member.name;
    const limit = this.d.limit;
    const est = this.d.estimate.bytes;
    const source = this.d.estimate.source;
    const budget = this.d.host.budget;
    const fields = {
      want, admitted, limitedBy, estimate: est, estimateSource: source, committed, memoryLimit: limit > 0 ? limit : undefined,
      budget, hostCommitted, room, evicting, covered, queued: this.d.queued(), ...(suppressed > 0 ? { suppressedSinceLastLine: suppressed } : {}),
    };
    const n = want - admitted;
    const then = evicting > 0 ? `evicting ${evicting} worker(s) of other pools` : covered > 0 ? 'waiting for retiring workers to exit' : 'waiting for memory to come free';
    const needs = `a worker needs ${formatBytes(est)} (${source === 'measured' ? 'measured' : 'expected_worker_memory, not measured yet'})`;
    let why: string;
    if (limitedBy === 'max_children_total') {
      const then2 = evicting > 0 ? `taking ${evicting} place(s) from pools above their share` : 'waiting for a place to come free';
      const why2 = `max_children_total ${this.d.host.processMax} workers are alive across all pools; ${then2}`;
      if (demandRefused) this.d.log.warn({ code: ErrorCodes.MAX_CHILDREN_TOTAL, ...fields }, `pool ${name}: not spawning ${n} worker(s): ${why2}; requests wait in the queue`);
      else this.d.log.info(fields, `pool ${name}: not spawning ${n} spare worker(s): ${why2}`);
      return;
    }
    if (limitedBy === 'memory_limit') {
      why = `${formatBytes(committed)} committed + ${formatBytes(est)} per worker would pass memory_limit ${formatBytes(limit)}`;
    } else if (limitedBy === 'cgroup_limit' || limitedBy === 'pool_cgroup') {
      const which = limitedBy === 'pool_cgroup' ? `the pool's memory cgroup (kernel limit ${formatBytes(limit)})` : "fcgi-pm's memory cgroup";
      why = `${which} has ${formatBytes(Math.max(0, room ?? 0))} left above its headroom and ${needs}; ${then}`;
    } else {
      why = `the memory budget ${formatBytes(budget ?? 0)} has ${formatBytes(Math.max(0, (budget ?? 0) - (hostCommitted ?? 0)))} uncommitted and ${needs}; ${then}`;
    }
    if (demandRefused) this.d.log.warn({ code: ErrorCodes.MEMORY_BUDGET, ...fields }, `pool ${name}: not spawning ${n} worker(s): ${why}; requests wait in the queue`);
    else this.d.log.info(fields, `pool ${name}: not spawning ${n} spare worker(s): ${why}`);
  }
}
