/**
 * A spawned pool's workers measured, and its caps applied to what was measured: a
 * sampling round every memory_sample_interval while the pool has any worker (and its
 * preload parent with them), a worker measured again right after a request when it is
 * near a cap or served its first one (which teaches the pool its real worker size), and
 * on each sample max_memory (recycle after the request), max_memory_hard (kill now, 503)
 * and, after each round, memory_limit (idle workers go first when measured use is over it).
 * A quiet worker (idle at its last sample and now, given no request since) is read once
 * in QUIET_ROUNDS rounds: it cannot have grown without running, and at 200 idle sites
 * a read of every worker every round was most of the sampler's cost. Rounds start on a
 * ROUND_GRAIN grid, on the host governor's one timer for every pool's rounds, so the
 * rounds of many pools are one wake-up of the daemon and one timer.
 * What it decides is carried out through the pool's hooks (PoolMemoryHooks).
 */
import { ErrorCodes } from '../../errors.js';
import type { Logger } from '../../log/log.js';
import { formatBytes } from '../../memory/format.js';
import { checkWorker, planRelief, type WorkerCaps } from '../../memory/governor.js';
import type { MemoryGovernor } from '../../memory/host-governor.js';
import { LATER } from '../../memory/sampler.js';
import type { BudgetMember, MemorySample } from '../../memory/types.js';
import type { RetireReason } from '../../worker/types.js';
import type { Clock, SharedTimer, TimedJob } from '../../util/clock.js';
import type { PoolEstimate } from './memory-estimate.js';
import type { PreloadParentMemory } from './memory-parent.js';
import { scriptOf, type SlotView } from './slot.js';

/** What applying the caps asks of its pool. */
export interface MemoryCapsHooks {
  /** Live workers (spawned, not yet exited). */
  slots(): Iterable<SlotView>;
  /** The pool hands each request to its worker (not `accept: direct`): a worker given none since its last sample did not run. */
  readonly handsRequests: boolean;
  /** Retires a worker (busy ones after their request), logging `msg` with `fields` as its one line. */
  retire(slot: SlotView, reason: RetireReason, fields: Record<string, unknown>, msg: string): void;
  /** Stops a worker now with SIGKILL; a request it runs is answered 503 MEMORY_HARD_LIMIT. Logs `msg` at warn. */
  kill(slot: SlotView, fields: Record<string, unknown>, msg: string): void;
  /** Spawns what waiting requests need. */
  scale(): void;
  queued(): number;
}

/** A quiet worker is read in one round of this many. */
export const QUIET_ROUNDS = 5;
/** Rounds start on multiples of this (monotonic ms). */
export const ROUND_GRAIN = 250;

export interface MemoryCapsDeps {
  /** The pool's part in the budget: memory_limit's relief evicts through it. */
  member: BudgetMember;
  host: MemoryGovernor;
  estimate: PoolEstimate;
  parent: PreloadParentMemory;
  hooks: MemoryCapsHooks;
  caps: WorkerCaps;
  /** memory_limit (0 = off). */
  limit: number;
  interval: number;
  clock: Clock;
  log: Logger;
}

export class MemoryCaps {
  private readonly d: MemoryCapsDeps;
  /** The host's one timer for every pool's rounds (on this pool's clock), and this pool's place on it. */
  private readonly rounds: SharedTimer;
  private readonly job: TimedJob = { dueAt: Infinity, run: () => this.round() };
  private sampling = false;
  /** A round's samples by pid (one map, reused: rounds of a pool never overlap). */
  private readonly got = new Map<number, MemorySample>();
  private disposed = false;
  private warnedFresh = false;
  recycled = 0;
  killed = 0;

  constructor(deps: MemoryCapsDeps) {
    this.d = deps;
    this.rounds = deps.host.rounds(deps.clock);
  }

  /** A worker was spawned: sampling runs while the pool has any. */
  spawned(): void {
    if (!this.rounds.scheduled(this.job) && !this.disposed) this.armNext();
  }

  /**
   * The next round, an interval from now, on the ROUND_GRAIN grid (a finer one for a
   * shorter interval): the grid point at or just before, so a round that fired a little
   * late keeps its beat.
   */
  private armNext(): void {
    const grain = Math.min(ROUND_GRAIN, this.d.interval);
    this.rounds.schedule(this.job, Math.floor((this.d.clock.now() + this.d.interval) / grain) * grain);
  }

  /** Passes over a quiet worker in this round, except once in QUIET_ROUNDS. */
  private quiet(slot: SlotView): boolean {
    const m = slot.mem;
    if (m === undefined || !this.d.hooks.handsRequests || !m.idleAtSample || !slot.inIdle || slot.requests !== m.requestsAtSample) return false;
    if (++m.roundsSkipped < QUIET_ROUNDS) return true;
    return false;
  }

  /** Ready: measured at once, so its charge is what it is rather than the guess. */
  ready(slot: SlotView): void {
    const pid = slot.pid;
    const sampler = this.d.host.sampler;
    if (pid === undefined || slot.mem === undefined || !sampler.sync) return;
    const s = sampler.readNow(pid, this.d.clock.now(), true);
    if (s === undefined) return;
    slot.mem.recordFresh(s);
    slot.mem.sampledWhen(slot.requests, slot.inIdle);
  }

  /**
   * After a request: a worker near a cap, or after its first request, is measured again
   * now (the first one teaches the pool its real worker size). True when it was
   * recycled or killed.
   */
  afterRequest(slot: SlotView): boolean {
    const m = slot.mem;
    const pid = slot.pid;
    const first = slot.requests === 1;
    const { host, estimate: est, hooks } = this.d;
    if (m === undefined || (!m.near && !first) || pid === undefined || !host.sampler.sync) return false;
    const s = host.sampler.readNow(pid, this.d.clock.now(), true);
    if (s === undefined) return false;
    this.record(slot, s);
    if (first) {
      const before = est.bytes;
      const learning = est.learning() || est.source === 'configured';
      est.update(hooks.slots());
      // Smaller than planned, or one more learnt: spawns that waited may start now (not from inside the pool's handler).
      if (est.bytes < before) host.released();
      if (learning && hooks.queued() > 0) this.d.clock.setTimer(() => hooks.scale(), 0);
    }
    return this.enforce(slot, s);
  }

  /** A fast tick of the cgroup watch: busy workers measured now (a request's peak falls between two rounds). */
  measureBusy(): void {
    const sampler = this.d.host.sampler;
    if (!sampler.sync) return;
    const now = this.d.clock.now();
    for (const slot of this.d.hooks.slots()) {
      if (slot.workerState !== 'busy' || slot.pid === undefined) continue;
      const s = sampler.readNow(slot.pid, now);
      if (s !== undefined) this.apply(slot, s);
    }
    this.d.estimate.update(this.d.hooks.slots());
  }

  dispose(): void {
    this.disposed = true;
    this.rounds.cancel(this.job);
  }

  private round(): void {
    if (this.disposed || this.sampling) return;
    const now = this.d.clock.now();
    const sampler = this.d.host.sampler;
    // A loop, not a spread and a filter: at 200 idle sites this runs 100 times a second.
    const slots: SlotView[] = [];
    for (const s of this.d.hooks.slots()) if (s.pid !== undefined && s.state !== 'gone' && !this.quiet(s)) slots.push(s);
    const parent = this.d.parent.pid();
    const spare = parent === undefined ? undefined : this.d.parent.sparePid();
    if (slots.length === 0 && parent === undefined) {
      // Every worker quiet: nothing new to estimate from or to hold against memory_limit.
      this.d.parent.keep(undefined, undefined, undefined);
      this.afterRound(false);
      return;
    }
    if (sampler.syncRounds === true) {
      for (const slot of slots) {
        const s = sampler.readNow(slot.pid!, now);
        if (s !== undefined) this.apply(slot, s);
      }
      this.d.parent.keep(parent, parent === undefined ? undefined : sampler.readNow(parent, now), spare === undefined ? undefined : sampler.readNow(spare, now));
      this.afterRound();
      return;
    }
    // Counters are read now, in place; only processes whose PSS is due wait for a read off
    // the event loop. Most rounds of idle sites read counters only and end here, with no promise.
    this.got.clear();
    let later: number[] | undefined;
    for (const slot of slots) later = this.readCounters(slot.pid!, now, later);
    if (parent !== undefined) later = this.readCounters(parent, now, later);
    if (spare !== undefined) later = this.readCounters(spare, now, later);
    if (later === undefined) {
      this.finishRound(slots, parent, spare);
      this.afterRound();
      return;
    }
    this.sampling = true;
    void sampler
      .read(later, now)
      .then((read) => {
        for (const [pid, s] of read) this.got.set(pid, s);
        this.finishRound(slots, parent, spare);
      })
      .catch((err: unknown) => this.d.log.debug({ err }, 'memory sampling failed'))
      .finally(() => {
        this.sampling = false;
        this.afterRound();
      });
  }

  /** A round's read of one process: into this.got, or onto `later` (returned) when it must wait for its PSS. */
  private readCounters(pid: number, now: number, later: number[] | undefined): number[] | undefined {
    const sampler = this.d.host.sampler;
    const r = sampler.readCounters === undefined ? LATER : sampler.readCounters(pid, now);
    if (r === LATER) (later ??= []).push(pid);
    else if (r !== undefined) this.got.set(pid, r);
    return later;
  }

  /** Applies a round's samples (this.got) to its workers and the preload parent. */
  private finishRound(slots: readonly SlotView[], parent: number | undefined, spare: number | undefined): void {
    const got = this.got;
    for (const slot of slots) {
      const s = got.get(slot.pid!);
      if (s !== undefined && slot.exit === undefined) this.apply(slot, s);
    }
    this.d.parent.keep(parent, parent === undefined ? undefined : got.get(parent), spare === undefined ? undefined : got.get(spare));
    got.clear();
  }

  /** `measured`: the round read something (else the pool's estimate and memory_limit have nothing new to go by). */
  private afterRound(measured = true): void {
    if (this.disposed) return;
    if (measured) {
      this.d.estimate.update(this.d.hooks.slots());
      this.checkLimit();
    }
    this.d.host.roundDone();
    let live = false;
    for (const _ of this.d.hooks.slots()) {
      live = true;
      break;
    }
    // No workers, no sampling: the next spawn starts it again.
    if (live) this.armNext();
  }

  private apply(slot: SlotView, s: MemorySample): void {
    this.record(slot, s);
    this.enforce(slot, s);
  }

  /**
   * Records a sample, and the worker's peak since it started as the kernel's RSS
   * high-water mark (VmHWM) less its shared part now (RSS - PSS): a request's peak that
   * fell between two samples still counts in the estimate.
   */
  private record(slot: SlotView, s: MemorySample): void {
    const m = slot.mem;
    if (m === undefined) return;
    m.record(s);
    m.sampledWhen(slot.requests, slot.inIdle);
    const hwm = this.d.host.sampler.hwm?.(s.pid);
    if (hwm !== undefined) m.raisePeak(hwm - (s.rss - s.value));
  }

  /** Applies max_memory / max_memory_hard to one fresh sample. True when the worker was recycled or killed. */
  private enforce(slot: SlotView, s: MemorySample): boolean {
    const m = slot.mem!;
    const caps = this.d.caps;
    const name = this.d.member.name;
    const st = slot.workerState;
    const verdict = checkWorker(s.value, caps);
    m.near = verdict === 'near';
    if (st === 'stopping' || st === 'exited') return false;
    const base = { wpid: slot.pid, value: s.value, measure: s.measure, rss: s.rss, pss: s.pss, requests: slot.requests };
    if (verdict === 'hard') {
      this.killed++;
      const ex = slot.current;
      const what = ex !== undefined ? `; its request to ${scriptOf(ex)} gets 503 MEMORY_HARD_LIMIT` : '';
      this.d.hooks.kill(slot, { ...base, maxMemoryHard: caps.hard, uri: ex?.params.get('REQUEST_URI') },
        `worker ${slot.pid} of pool ${name} uses ${formatBytes(s.value)} (${s.measure}), over max_memory_hard ${formatBytes(caps.hard)}: killing it now${what}`);
      return true;
    }
    if (verdict !== 'soft' || st === 'draining') return false;
    if (slot.requests === 0) {
      // Recycling a worker that is this big before serving anything would only loop.
      if (!this.warnedFresh) {
        this.warnedFresh = true;
        this.d.log.warn({ code: ErrorCodes.MAX_MEMORY_TOO_LOW, ...base, maxMemory: caps.soft }, `worker ${slot.pid} of pool ${name} uses ${formatBytes(s.value)} (${s.measure}) before serving any request, over max_memory ${formatBytes(caps.soft)}: max_memory is too low for this application; not recycling fresh workers`);
      }
      return false;
    }
    this.recycled++;
    this.d.hooks.retire(slot, 'memory', { ...base, maxMemory: caps.soft },
      `worker ${slot.pid} of pool ${name} uses ${formatBytes(s.value)} (${s.measure}), over max_memory ${formatBytes(caps.soft)}: recycling it ${st === 'busy' ? 'after its current request' : 'now'}`);
    return true;
  }

  /** memory_limit: measured use over it retires idle workers first, then busy ones after their request. */
  private checkLimit(): void {
    const { member, limit } = this.d;
    if (limit <= 0) return;
    const measured = member.measured();
    const freeing = member.freeingMeasured();
    const excess = measured - freeing - limit;
    if (excess <= 0) return;
    const busy = member.busyWorkers();
    for (const v of planRelief(excess, member.idleWorkers(), busy)) {
      const busyOne = busy.includes(v);
      member.evict(v, 'memory_budget', { memoryLimit: limit, measured, freeing, excess, victimPid: v.pid, value: v.value, busy: busyOne },
        `pool ${member.name} uses ${formatBytes(measured)}, over its memory_limit ${formatBytes(limit)}: retiring ${busyOne ? 'busy worker (after its request)' : 'idle worker'} ${v.pid} (${formatBytes(v.value ?? v.charge)})`);
    }
  }
}
