/**
 * A spawned pool's Supervisor: the policy of its worker processes, as PHP-FPM's
 * fpm_process_ctl.c: how many there are (scaling), readiness, retire, stop, crash
 * back-off and the `failing` breaker, idle stops, recycling, the memory part's
 * decisions, the operator's drain and rolling restart. Birth and burial (making a
 * worker, signalling it, reaping it, the shutdown wait) are children.ts's, as
 * fpm_children.c's. Every worker's state is one cell of supervisor-table.ts, and each
 * cell names the action carried out here (`act`).
 *
 * The Dispatcher (dispatcher.ts) owns the requests: queue, seats (seat-table.ts) and
 * their idle stack, endpoints, request timers. The two meet at SupervisorHooks (what the supervisor asks
 * of the dispatcher) and at the load signal: requests waiting, and each worker's busy
 * seats (`Slot.busy`) out of `slotsPerWorker`. The scaling policy (scaling.ts) counts
 * seats; workers are spawned in whole units of slotsPerWorker.
 *
 * Crash semantics: only an early crash (exit-policy.ts) counts toward crash_limit and
 * backs off restarts; a worker killed from outside (whenever) or after it served is
 * replaced at once; the breaker stops spawning, not serving.
 */
import fs from 'node:fs';
import type { ForkServer } from '../../worker/fork-server.js';
import { ErrorCodes, ProxyError } from '../../errors.js';
import type { Logger } from '../../log/log.js';
import type { PoolConfig } from '../../config/types.js';
import type { MemoryGovernor } from '../../memory/host-governor.js';
import type { Endpoint, UpstreamOutcome } from '../../upstream/types.js';
import type { HandedWorker, RetireReason, WorkerAdopter, WorkerExit, WorkerFactory, WorkerSpec } from '../../worker/types.js';
import type { ExitFacts, ExitVerdict } from './exit-verdict.js';
import { OneTimer, type Clock } from '../../util/clock.js';
import { CrashGuard } from './crash-guard.js';
import { GroupChildren } from './groups.js';
import { childrenOf } from '../../worker/children.js';
import { parseStat } from '../../memory/proc.js';
import { endHanded } from '../../worker/handover.js';
import type { PoolState } from '../pool-base.js';
import { FiguresRevision } from './worker-memory.js';
import { PoolMemory } from './memory.js';
import { initialWorkers, NO_ROUND, planIdleStops, planSpawns, SURPLUS_IDLE_MS, type ScalingConfig, type SpawnRound, type WorkerCounts } from './scaling.js';
import { exitText, type SeatView, type Slot, type SlotView } from './slot.js';
import { Children } from './children.js';
import type { PoolStats } from '../stats.js';
import { EXIT_GRACE_MS, replacesReason, SUPERVISOR_TABLE, type SlotAction, type SlotEvent, type SlotState } from './supervisor-table.js';
import type { PoolActionReport as ActionReport, PoolSnapshot, WarmStart } from '../types.js';

export interface SupervisorDeps {
  logger: Logger;
  clock: Clock;
  spec: WorkerSpec;
  workerFactory: WorkerFactory;
  /** How workers handed on by an exec in place of the daemon are adopted (start's `adopt`). */
  workerAdopter?: WorkerAdopter;
  /** Logger handed to workers (they bind pool and worker id themselves). */
  workerLogger: Logger;
  /** [0, 1), for max_requests_jitter. */
  random: () => number;
  /** The daemon's memory governor; without it no sampling, caps or budget (unit tests). */
  memory?: MemoryGovernor;
  /** SIGKILL now (max_memory_hard); defaults to hard-kill.ts, which signals only our own children. */
  killNow?: (pid: number) => void;
  /** preload: the parent the workers are forked from (its memory is the pool's too). */
  forkServer?: ForkServer;
  /** How the request side knows what a worker served (exit-verdict.ts); default: exactly, and no worker recycles itself. */
  counting?: Pick<ExitFacts, 'served' | 'selfRecycles'>;
  /**
   * Workers accept their connections themselves (accept: direct). Nothing can withdraw a
   * retired one from the socket but its signal, so it gets SIGTERM at once (php-cgi
   * finishes the request it runs, then exits) instead of after its last request; and a
   * process running is not yet one that serves, so a failing pool recovers only when its
   * request side saw a worker at work (`working`).
   */
  acceptsItself?: boolean;
}

/** What the supervisor asks of the dispatcher, which reads a worker's record as a SlotView. */
export interface SupervisorHooks {
  /** Requests waiting in the queue (the load signal; busy seats are on each Slot). */
  waiting(): number;
  poolState(): PoolState;
  /** A new worker's `n` request places (made once, at spawn). */
  seats(slot: SlotView, n: number): readonly SeatView[];
  /** A worker is ready: the endpoint its requests go through (the upstream options are the dispatcher's); none when the workers accept themselves. */
  connect(slot: SlotView): Endpoint | undefined;
  /** A worker is ready, its endpoint made: put its seats on the idle stack. */
  offer(slot: SlotView): void;
  /** Take the worker's idle seats off the idle stack. */
  withdraw(slot: SlotView): void;
  /** Answer the requests the worker runs with `err` (it is being stopped). */
  cut(slot: SlotView, err: ProxyError): void;
  /** The worker exited: its seats get `exit` (seat-table.ts), its endpoint closes. */
  lost(slot: SlotView): void;
  /** The wait for the worker's exit is over and it lives: answer or replace its held failures; false while one held later still waits. */
  unhold(slot: SlotView): boolean;
  /** Answer every waiting request with `err` (counted as refused because failing). */
  refuseQueued(err: ProxyError): void;
  /** Idle workers (every seat idle), longest idle first. */
  idleWorkers(): SlotView[];
  /** Requests put back in the queue go to idle seats. */
  pump(): void;
  /** A request ended or left the queue: stop()'s drain wait may be over. */
  checkDrained(): void;
}

/** What an event carries: the reason and answer for retire/stop/kill, the exit for exit. */
export interface SlotEventContext {
  reason?: RetireReason;
  err?: ProxyError;
  why?: { fields: Record<string, unknown>; msg: string };
  exit?: WorkerExit;
  verdict?: ExitVerdict;
}

/** For events that carry nothing: `idle` fires after most requests, so no object is made for it. */
const NO_CONTEXT: Readonly<SlotEventContext> = Object.freeze({});

/** A paced start (WarmStart.afterServed) goes on after this long when a ready worker got no request: it serves the old generation's overflow only. */
export const PACE_MS = 1000;

/** Every view the others hand back is one of the supervisor's own slots: it made them all. */
function own(view: SlotView): Slot {
  return view as Slot;
}

export class Supervisor {
  readonly slotsPerWorker: number;
  private cfg: PoolConfig;
  private readonly name: string;
  private readonly deps: SupervisorDeps;
  private readonly hooks: SupervisorHooks;
  private readonly stats: PoolStats;
  private readonly log: Logger;
  private readonly clock: Clock;
  private scaling: ScalingConfig;
  private readonly procs: Children;
  private readonly inState: Record<SlotState, number> = { starting: 0, up: 0, retiring: 0, stopping: 0, gone: 0 };
  private round: SpawnRound = NO_ROUND;
  private atMaxChildren = false;
  private readonly crashes: CrashGuard;
  private shuttingDown = false;
  /** The start failure reported at error level; repeats of it are logged at debug. */
  private reportedStartError: string | undefined;
  private lastStartError: string | undefined;
  private readonly idleTimer: OneTimer;
  private readonly scaleTimer: OneTimer;
  /** How long after going idle a worker may first be due to stop (Infinity: never). */
  private firstIdleDue: number;
  /** start() is bringing up workers that take no request yet: none of them is idle for the policy. */
  private warming = false;
  /** holdIdle(): the workers are about to be handed on; none is stopped for idleness. */
  private idleHeld = false;
  /** When start() finished: idle time counts from then at the earliest. */
  private inServiceAt = 0;
  readonly mem: PoolMemory | undefined;
  /**
   * resident_parent: the last worker, paused when the pool scaled to zero (its php-cgi
   * parent and the PARKED_CHILDREN children that did the most stopped with SIGSTOP, its
   * other children ended): not a worker for the policy, the seats or the memory part, which
   * counts it as the pool's parent; woken by the next spawn the policy wants (SIGCONT: the
   * kept children accept again at once, and the parent forks the others again, warm).
   */
  private parked: Slot | undefined;
  /** The parked parent's children kept stopped beside it: the next requests', warm, without waiting for a fork. */
  private keptChildren: readonly number[] = [];
  /** A woken parent still stopped until its kept children have taken their requests (wake()). */
  private held: { slot: Slot; kept: number; assigned: number; timer: unknown } | undefined;
  /** Slot events so far: what status shows of the workers moves only with one or with `figures` (SpawnedPool.idleRevision). */
  events = 0;
  /** Samples that changed a worker's shown memory or CPU, and groups whose children changed. */
  readonly figures = new FiguresRevision();
  /** Times the parked parent was woken (status: its "forks"). */
  private wakes = 0;
  private readonly resident: boolean;
  /** A start paced by first requests (WarmStart.afterServed): the workers still to start, a step's size, and the step the next one waits for. */
  private paced: { left: number; step: number; waiting: Slot[] } | undefined;
  private readonly paceTimer: OneTimer;
  /** group_size > 1: each group's children, seen and measured one by one. */
  private readonly groups: GroupChildren | undefined;

  constructor(cfg: PoolConfig, deps: SupervisorDeps, hooks: SupervisorHooks, stats: PoolStats) {
    this.cfg = cfg;
    this.name = cfg.name;
    this.deps = deps;
    this.hooks = hooks;
    this.stats = stats;
    this.log = deps.logger;
    this.clock = deps.clock;
    const k = Math.max(1, cfg.groupSize ?? 1);
    this.slotsPerWorker = k;
    this.scaling = scalingOf(cfg, k);
    const clock = deps.clock;
    this.crashes = new CrashGuard(cfg.name, cfg.crashLimit, cfg.crashWindow, clock, this.log, () => this.onProbe());
    this.idleTimer = new OneTimer(clock, () => this.onIdleTimer());
    this.scaleTimer = new OneTimer(clock, () => this.scale());
    this.paceTimer = new OneTimer(clock, () => this.pace());
    this.firstIdleDue = firstIdleDueOf(cfg);
    this.resident = cfg.residentParent === true && deps.forkServer === undefined;
    this.mem = deps.memory && new PoolMemory(cfg, deps.memory, {
      slots: () => this.workers(),
      handsRequests: (deps.counting?.served ?? 'exact') === 'exact',
      retire: (slot, reason, fields, msg) => this.retire(slot, reason, { fields, msg }),
      kill: (slot, fields, msg) => this.killForMemory(slot, fields, msg),
      scale: () => this.scale(),
      queued: () => hooks.waiting(),
      preloadParent: () => deps.forkServer?.parent?.pid ?? this.parked?.pid,
      preloadSpares: () => (deps.forkServer?.parent?.spare !== undefined ? [deps.forkServer.parent.spare] : this.keptChildren),
      stopPreloadParent: () => deps.forkServer?.stopIdle() ?? this.evictParked(),
    }, clock, this.log, this.figures);
    // The memory part places each worker (cgroup, oom_score_adj) right after spawn.
    const spec = this.mem === undefined ? deps.spec : { ...deps.spec, onStarted: (pid: number) => this.mem!.started(pid) };
    this.procs = new Children(
      { log: this.log, clock, spec, workerFactory: deps.workerFactory, workerAdopter: deps.workerAdopter, workerLogger: deps.workerLogger, killNow: deps.killNow, seats: (slot) => hooks.seats(slot, k), counting: deps.counting ?? { served: 'exact', selfRecycles: false } },
      { ready: (slot) => this.fire(slot, 'ready', NO_CONTEXT), exited: (slot, exit, verdict) => this.fire(slot, verdict.outside ? 'killed' : 'exit', { exit, verdict }) },
    );
    if (k > 1 || this.resident) {
      this.groups = new GroupChildren(cfg, { host: deps.memory, clock, log: this.log, stats, groups: () => this.procs.slots, revision: this.figures });
    }
  }

  /**
   * Starts the mode's initial workers, or `seats` when more (a reload's new generation
   * takes over the width the old one had ready); resolves when each is ready or gone.
   * Beyond the initial ones they start in steps of `step` workers, each step once the
   * last is ready, so a pool that is replaced under load does not exec them all at once
   * on the cores that serve its requests.
   */
  async start(opts: Partial<WarmStart> = {}): Promise<void> {
    this.warming = true;
    // Workers the code before an exec in place handed on come first: they serve at once.
    const adopted = this.adopt(opts.adopt ?? []);
    const initial = Math.max(0, Math.ceil(initialWorkers(this.scaling) / this.slotsPerWorker) - adopted.length);
    const wanted = Math.max(initial, Math.ceil(Math.min(opts.seats ?? 0, this.scaling.maxChildren) / this.slotsPerWorker) - adopted.length);
    const n = this.mem ? this.mem.admit(wanted, 0) : wanted;
    const group = this.slotsPerWorker > 1 ? ` (groups of ${this.slotsPerWorker})` : '';
    this.log.info(
      { pm: this.cfg.pm, command: this.cfg.command, maxChildren: this.scaling.maxChildren, starting: n, adopted: adopted.length, slotsPerWorker: this.slotsPerWorker },
      `pool ${this.name} (${this.cfg.pm}) starting ${n} worker(s)${group}${n < wanted ? ` of ${wanted} (memory)` : ''}${adopted.length > 0 ? `, ${adopted.length} adopted from before the upgrade` : ''}`,
    );
    const step = Math.max(1, opts.step ?? n);
    // The adopted ones are waited for with the first step (spawned in the same tick, so the policy counts them as starting).
    let waits: Array<Promise<void>> = adopted.map((slot) => new Promise<void>((resolve) => (slot.settle = resolve)));
    let started = 0;
    let last: Slot[] = [];
    try {
      for (; started < n && !this.shuttingDown; waits = []) {
        const now = started < initial ? Math.min(n, initial) - started : Math.min(step, n - started);
        last = [];
        for (let i = 0; i < now; i++) {
          const slot = this.spawn();
          last.push(slot);
          waits.push(new Promise<void>((resolve) => (slot.settle = resolve)));
        }
        started += now;
        await Promise.all(waits);
        // Paced by first requests: the rest start after the commit (pace()).
        if (opts.afterServed === true && started >= initial) break;
      }
      if (waits.length > 0) await Promise.all(waits);
    } finally {
      this.warming = false;
      this.inServiceAt = this.clock.now();
      if (this.firstIdleDue !== Infinity) this.idleTimer.armAt(this.inServiceAt + this.firstIdleDue);
    }
    if (started < n && !this.shuttingDown) {
      this.paced = { left: n - started, step, waiting: last };
      this.log.info({ kind: 'paced_start', left: n - started, step }, `pool ${this.name}: ${n - started} more worker(s) to start, ${step} at a time, each step once the last has served a request (or after ${PACE_MS} ms without one)`);
      this.pace();
    }
  }

  // ---- a start paced by first requests (WarmStart.afterServed) -----------------------------

  /** Starts the next step of a paced start when the step it waits for has served (each worker: a request finished, or gone, or ready PACE_MS without one). */
  private pace(): void {
    const p = this.paced;
    if (p === undefined) return;
    if (this.shuttingDown || p.left <= 0) return this.stopPacing();
    const now = this.clock.now();
    for (const s of p.waiting) {
      if (s.state !== 'up' && s.state !== 'starting') continue;
      if (s.requests - s.busy > 0) continue;
      // Not ready yet: its settle calls again.
      if (s.state === 'starting' || s.readyAt === undefined) return;
      if (now < s.readyAt + PACE_MS) return this.paceTimer.armAt(s.readyAt + PACE_MS);
    }
    // The policy may have started workers on demand meanwhile: never past max_children.
    const room = Math.floor(this.growableSeats() / this.slotsPerWorker);
    const wanted = Math.min(p.step, p.left, room);
    const k = this.mem ? this.mem.admit(wanted, 0) : wanted;
    if (k <= 0) return this.stopPacing();
    p.left -= k;
    p.waiting = [];
    for (let i = 0; i < k; i++) {
      const slot = this.spawn();
      slot.settle = () => this.pace();
      p.waiting.push(slot);
    }
  }

  private stopPacing(): void {
    this.paced = undefined;
    this.paceTimer.cancel();
  }

  /** Workers still to come: starting, or not yet started by a paced start (Pool.warmth). */
  pendingWorkers(): number {
    return this.inState.starting + (this.paced?.left ?? 0);
  }

  /** Slots for workers handed on by an exec in place (Worker.adopt), counted as starting until their ready on the next tick. */
  private adopt(handed: readonly HandedWorker[]): Slot[] {
    const out: Slot[] = [];
    for (const [i, h] of handed.entries()) {
      const slot = this.procs.adopt(h, this.maxRequestsOfNew());
      if (slot === undefined) {
        // A pool that cannot adopt (no adopter: a preload pool) still must not leave them running.
        endHanded(handed.slice(i), this.log);
        break;
      }
      this.inState.starting++;
      slot.mem = this.mem?.spawned();
      if (this.groups !== undefined) slot.children = new Map();
      out.push(slot);
    }
    return out;
  }

  /** Live workers (not yet exited), as the others read them; a parked parent too (parkedParent()). */
  get slots(): ReadonlySet<SlotView> {
    return this.procs.slots;
  }

  /**
   * The live workers without the parked parent: the set itself when none is parked (the
   * memory part and status walk it for every pool each round and snapshot, and a
   * generator allocates a result per worker).
   */
  private workers(): Iterable<Slot> {
    return this.parked === undefined ? this.procs.slots : this.unparked();
  }

  private *unparked(): Iterable<Slot> {
    for (const s of this.procs.slots) if (s !== this.parked) yield s;
  }

  /** resident_parent: the parked parent for status (pid, times woken), while the pool is at warm zero. */
  parkedParent(): { slot: SlotView; wakes: number } | undefined {
    return this.parked === undefined ? undefined : { slot: this.parked, wakes: this.wakes };
  }

  get failing(): boolean {
    return this.crashes.failing;
  }

  /**
   * The pool cannot serve what waits: failing, or requests or connections wait while no
   * worker is serving (up, and seen at work by its request side) and either none is
   * alive or starting, or workers crashed lately (a crash back-off, workers that die at
   * once, memory holding spawns back). A cold start with no crash is not an outage.
   * Status, readiness and fcgipm_pool_failing say so.
   */
  cannotServe(): boolean {
    if (this.crashes.failing) return true;
    if (this.hooks.waiting() === 0) return false;
    for (const s of this.procs.slots) if (s.state === 'up' && s.seats.some((seat) => seat.busy || seat.idleSince > 0)) return false;
    return this.procs.slots.size === 0 || this.crashes.recent > 0;
  }

  failingError(): ProxyError {
    return this.crashes.error(this.reportedStartError !== undefined ? this.lastStartError : undefined);
  }

  /** Seats being started: each will take a waiting request. */
  startingSeats(): number {
    return this.inState.starting * this.slotsPerWorker;
  }

  /** Seats that may still be started for waiting requests (room under max_children). */
  growableSeats(): number {
    // Live processes, retiring ones included: they hold their place under max_children.
    return this.crashes.failing ? 0 : Math.max(0, this.scaling.maxChildren - this.procs.slots.size * this.slotsPerWorker);
  }

  /** A seat went idle: the idle timer may have a worker to stop later. */
  wentIdle(now: number): void {
    if (this.firstIdleDue !== Infinity) this.idleTimer.armAt(now + this.firstIdleDue);
    this.mem?.wentIdle();
  }

  /** A group runs no request now: its children over max_memory may go. */
  groupIdle(slot: SlotView): void {
    this.groups?.idle(slot);
  }

  /** The request side saw a worker that accepts itself at work (in accept(), or on a connection): a failing pool recovers. */
  working(slot: SlotView): void {
    if (slot.state === 'up') this.crashes.ready(slot.pid);
  }

  /** A request starts on one of the worker's seats: counted (max_requests, status, its exit line). */
  assigned(slot: SlotView): void {
    own(slot).requests++;
    const h = this.held;
    if (h !== undefined && h.slot === slot && ++h.assigned > h.kept) this.continueHeld();
  }

  /** A worker is alive and idle after a request: recycle it (true) or let it serve on (false). */
  recycleAfterRequest(slot: SlotView, o: UpstreamOutcome): boolean {
    if (o.kind === 'failed' && o.error.code === ErrorCodes.BACKEND_TIMEOUT) {
      // No byte for read_timeout: the script still runs and would hold the next request.
      this.retire(slot, 'request_timeout');
    } else if (o.kind === 'aborted' && o.backendBusy === true) {
      // The client went away and the request could not be cancelled (SCGI, or the
      // cancelled FastCGI request never ended): the script may still run and would hold
      // the next request, so the worker goes instead of back to the idle list.
      this.retire(slot, 'client_abort');
    } else if (slot.requests >= slot.maxRequests) {
      this.retire(slot, 'max_requests');
    } else if (this.pastLifetime(slot)) {
      this.retire(slot, 'max_lifetime');
    } else if (this.mem === undefined || slot.busy > 0 || !this.mem.afterRequest(slot)) {
      return false;
    }
    return true;
  }

  pastLifetime(slot: SlotView): boolean {
    return this.cfg.maxLifetime > 0 && this.clock.now() - slot.spawnedAt >= this.cfg.maxLifetime;
  }

  // ---- the events ---------------------------------------------------------------------

  /** Retires a worker (its running requests finish first). `why`: the memory governor's line instead of the usual one. */
  retire(slot: SlotView, reason: RetireReason, why?: { fields: Record<string, unknown>; msg: string }): void {
    this.fire(slot, 'retire', { reason, why });
  }

  /** A request of the worker failed in a way that may mean it is dying: wait for its exit before answering. */
  suspect(slot: SlotView): void {
    this.fire(slot, 'suspect', NO_CONTEXT);
  }

  /** Stops a worker now; the requests it runs are answered with `err`. */
  stop(slot: SlotView, reason: RetireReason, err: ProxyError): void {
    this.fire(slot, 'stop', { reason, err });
  }

  /** Stops a worker with SIGKILL now (request_timeout on the direct path, where no request of it is ours to answer). */
  kill(slot: SlotView, reason: RetireReason, err: ProxyError): void {
    this.fire(slot, 'kill', { reason, err });
  }

  /** max_memory_hard (memory-caps.ts decided and wrote the message): SIGKILL now, its requests get 503. */
  private killForMemory(slot: SlotView, fields: Record<string, unknown>, msg: string): void {
    slot.log.warn({ code: ErrorCodes.MEMORY_HARD_LIMIT, ...fields }, msg);
    const hard = this.cfg.maxMemoryHard ?? 0;
    this.fire(slot, 'kill', {
      reason: 'memory_hard',
      err: new ProxyError(ErrorCodes.MEMORY_HARD_LIMIT, 503, `the worker of pool ${this.name} went over max_memory_hard (${hard} bytes) and was stopped`),
    });
  }

  /** The last request running on the worker ended: a retired worker may go now. */
  released(slot: SlotView): void {
    if (slot.busy === 0) this.fire(slot, 'idle', NO_CONTEXT);
    // A paced start's next step may wait for this worker's first request.
    if (this.paced?.waiting.includes(own(slot)) === true) this.pace();
  }

  /** @internal The one entry for events: the worker's (ready, exit), the dispatcher's and the memory part's. */
  fire(view: SlotView, event: SlotEvent, ctx: Readonly<SlotEventContext>): void {
    this.events++;
    const slot = own(view);
    const cell = SUPERVISOR_TABLE[slot.state][event];
    if (ctx.reason !== undefined && replacesReason(slot.state, slot.reason, event, slot.busy)) slot.reason = ctx.reason;
    this.inState[slot.state]--;
    this.inState[cell.next]++;
    slot.state = cell.next;
    // A parked parent that is retired, stopped or gone is no longer the pool's resident.
    const unparked = slot === this.parked && cell.next !== 'up';
    const kept = unparked ? this.keptChildren : [];
    if (unparked) this.unpark();
    if (slot === this.held?.slot && cell.next !== 'up') this.continueHeld();
    this.act(cell.action, slot, ctx);
    // Stopped (SIGSTOP), it would hold the signal it was just sent until kill_timeout; the
    // kept children would hold their parent's SIGTERM for ever.
    if (unparked && slot.pid !== undefined && cell.next !== 'gone') continueProcess(slot.pid);
    for (const c of kept) continueProcess(c);
  }

  private act(action: SlotAction, slot: Slot, ctx: Readonly<SlotEventContext>): void {
    switch (action) {
      case 'offer':
        return this.offer(slot);
      case 'retire':
        return this.doRetire(slot, ctx.reason!, ctx.why);
      case 'stop':
        return this.doStop(slot, ctx.reason!, ctx.err!);
      case 'drained':
        // Its kept-alive connection closes first, or php-cgi waiting on it would sit out SIGTERM until kill_timeout.
        slot.endpoint?.closeIdle();
        this.procs.signal(slot, this.idle(slot));
        return;
      case 'kill':
        this.doStop(slot, ctx.reason!, ctx.err!);
        // The kernel frees its memory only when it is gone: no SIGTERM grace.
        this.procs.killNow(slot);
        return;
      case 'start_failed':
      case 'bury':
        return this.bury(slot, ctx.exit!, ctx.verdict!, action === 'start_failed');
      case 'hold':
        // One timer per worker: the exit usually comes within milliseconds.
        slot.graceTimer ??= this.clock.setTimer(() => {
          slot.graceTimer = undefined;
          this.fire(slot, 'grace', NO_CONTEXT);
        }, EXIT_GRACE_MS);
        return;
      case 'unhold':
        if (!this.hooks.unhold(slot)) this.fire(slot, 'suspect', NO_CONTEXT);
        return;
      case 'shut':
        slot.endpoint?.closeIdle();
        this.procs.signal(slot, this.idle(slot));
        return;
      case 'hand_on':
        this.hooks.withdraw(slot);
        slot.endpoint?.closeIdle();
        this.mem?.exited(slot);
        this.procs.release(slot);
        return;
      case 'none':
        return;
    }
  }

  private offer(slot: Slot): void {
    const w = slot.worker;
    slot.log = this.log.child({ wpid: w.pid });
    if (slot.adopted) {
      slot.log.info({ kind: 'adopted', requests: slot.requests, uptimeMs: Math.round(this.clock.now() - slot.spawnedAt), workers: this.procs.slots.size }, `worker ${w.pid} adopted from before the upgrade, serving on`);
    } else {
      const spawnMs = Math.round(this.clock.now() - slot.spawnedAt);
      this.stats.spawned(spawnMs);
      slot.log.info({ spawnMs, workers: this.procs.slots.size }, `worker ${w.pid} ready after ${spawnMs} ms`);
    }
    this.reportedStartError = undefined;
    slot.readyAt = this.clock.now();
    if (this.deps.acceptsItself !== true) this.crashes.ready(w.pid);
    this.mem?.ready(slot);
    const settle = slot.settle;
    slot.settle = undefined;
    if (!this.shuttingDown) {
      slot.endpoint = this.hooks.connect(slot);
      this.hooks.offer(slot);
    }
    this.groups?.started();
    this.scale();
    settle?.();
  }

  private doRetire(slot: Slot, reason: RetireReason, why: { fields: Record<string, unknown>; msg: string } | undefined): void {
    const w = slot.worker;
    this.hooks.withdraw(slot);
    this.stats.recycled(reason);
    const fields = { reason, requests: slot.requests, uptimeMs: Math.round(this.clock.now() - slot.spawnedAt), workers: this.procs.slots.size };
    if (why !== undefined) slot.log.info({ ...fields, ...why.fields }, why.msg);
    else slot.log.info(fields, `retiring worker ${w.pid}: ${reason}`);
    slot.endpoint?.closeIdle();
    // A worker running requests finishes them first (`idle`: drained).
    if (slot.busy === 0 || this.deps.acceptsItself === true) this.procs.signal(slot, this.idle(slot));
  }

  /** It runs no request we know of (a worker that accepts itself may be taking one). */
  private idle(slot: Slot): boolean {
    return slot.busy === 0 && this.deps.acceptsItself !== true;
  }

  private doStop(slot: Slot, reason: RetireReason, err: ProxyError): void {
    this.hooks.cut(slot, err);
    this.hooks.withdraw(slot);
    this.stats.recycled(reason);
    this.procs.signal(slot);
    this.scale();
  }

  private bury(slot: Slot, exit: WorkerExit, verdict: ExitVerdict, beforeReady: boolean): void {
    this.procs.reap(slot, exit);
    if (slot.graceTimer !== undefined) this.clock.clearTimer(slot.graceTimer);
    slot.graceTimer = undefined;
    this.hooks.withdraw(slot);
    this.mem?.exited(slot);
    // Counted before its requests are answered: answering may spawn a replacement, which
    // must see this crash's back-off.
    const nowFailing = this.countExit(slot, exit, verdict);
    this.hooks.lost(slot);
    if (beforeReady) this.onStartFailure(slot, exit);
    if (nowFailing) {
      this.scaleTimer.cancel();
      this.hooks.refuseQueued(this.failingError());
    }
    const settle = slot.settle;
    slot.settle = undefined;
    settle?.();
    this.hooks.pump();
    this.scale();
    this.hooks.checkDrained();
  }

  // ---- workers ----------------------------------------------------------------------

  private maxRequestsOfNew(): number {
    const cfg = this.cfg;
    return cfg.maxRequests > 0 ? cfg.maxRequests + Math.floor(this.deps.random() * (Math.max(0, cfg.maxRequestsJitter) + 1)) : Infinity;
  }

  private spawn(): Slot {
    const slot = this.procs.birth(this.maxRequestsOfNew());
    this.inState.starting++;
    slot.mem = this.mem?.spawned();
    // A group's children, found and measured by groups.ts.
    if (this.groups !== undefined) slot.children = new Map();
    return slot;
  }

  /**
   * Only an early crash (exit-policy.ts) counts toward crash_limit and backs off restarts;
   * a worker killed from outside or after it served is replaced at once (a failing pool's
   * probe killed from outside: by the next probe). True when the pool became failing.
   */
  private countExit(slot: Slot, exit: WorkerExit, verdict: ExitVerdict): boolean {
    if (verdict.crash) this.stats.crashes++;
    // It recycled itself (php-cgi after PHP_FCGI_MAX_REQUESTS): counted as the recycle it is.
    if (verdict.rule === 'recycled') this.stats.recycled('max_requests');
    // An OOM kill says the page wanted too much, not that the worker cannot start.
    if (verdict.early && slot.mem?.oomKilled !== true) {
      const why = slot.spawnFailure?.message ?? `worker ${slot.pid ?? '?'} ${exitText(exit)}`;
      return this.crashes.crashed(slot.spawnedAt, slot.probe, why, this.hooks.waiting());
    }
    if (slot.probe) {
      this.crashes.probeGone();
      if (verdict.outside) this.crashes.probeAgain();
    }
    return false;
  }

  private onStartFailure(slot: Slot, exit: WorkerExit): void {
    const message = slot.spawnFailure?.message ?? `worker ${exitText(exit)} before it was ready`;
    this.lastStartError = message;
    if (exit.reason === 'shutdown' || this.shuttingDown) return;
    if (this.reportedStartError !== message) {
      this.reportedStartError = message;
      this.log.error(
        {
          code: ErrorCodes.SPAWN_FAILED,
          errno: slot.spawnFailure?.errno,
          command: this.cfg.command,
          crashes: this.crashes.recent,
          crashLimit: this.cfg.crashLimit,
          queued: this.hooks.waiting(),
        },
        `pool ${this.name} cannot start workers: ${message}`,
      );
    } else {
      this.log.debug({ errno: slot.spawnFailure?.errno }, `pool ${this.name}: worker start failed again: ${message}`);
    }
    // Waiting requests get 503 now unless some worker may still take them.
    let serving = 0;
    for (const s of this.procs.slots) if (s.ready || s.spawnFailure === undefined) serving++;
    if (serving === 0 && this.hooks.waiting() > 0) {
      this.hooks.refuseQueued(new ProxyError(ErrorCodes.POOL_FAILING, 503, `pool ${this.name} cannot start workers: ${message}`, 1));
    }
  }

  private onProbe(): void {
    if (this.shuttingDown || this.hooks.poolState() === 'stopped') {
      this.crashes.probeGone();
      return;
    }
    this.spawn().probe = true;
  }

  // ---- scaling ----------------------------------------------------------------------

  /** Live workers' seats by state, and the queue length, for the scaling policy. */
  counts(): WorkerCounts {
    const k = this.slotsPerWorker;
    const c: WorkerCounts = { idle: 0, busy: 0, spawning: 0, retiring: 0, queued: this.hooks.waiting() };
    // A plain walk, not workers(): scale() runs for every request that queues, and a generator allocates per worker.
    for (const s of this.procs.slots) {
      if (s === this.parked) continue;
      if (s.state === 'starting') c.spawning += k;
      else if (s.state === 'up') {
        c.busy += s.busy;
        c.idle += k - s.busy;
      } else c.retiring += k;
    }
    return c;
  }

  /** Spawns what the mode wants now; re-arms itself for rate rounds and crash back-off. */
  scale(): void {
    const poolState = this.hooks.poolState();
    if (this.crashes.failing || this.shuttingDown || poolState === 'stopped') return;
    if (poolState === 'running' && this.scaling.pm === 'static' && this.parked === undefined && this.growableSeats() === 0) {
      // Every worker of a static pool lives: none to spawn, none wanted beyond max_children
      // (the plan below would say so). Known without walking the workers, which this runs
      // for every request that queues.
      this.atMaxChildren = false;
      return;
    }
    const now = this.clock.now();
    const k = this.slotsPerWorker;
    const c = this.counts();
    // While stopping, only waiting requests justify a new worker.
    const scaling: ScalingConfig = poolState === 'running' ? this.scaling : { ...this.scaling, pm: 'ondemand' };
    const plan = planSpawns(scaling, c, now, this.round);
    if (plan.spawn === 0) {
      this.noteMaxChildren(plan.atMaxChildren, c);
      this.round = plan.round;
      if (plan.recheckAt !== undefined) this.scaleTimer.armAt(plan.recheckAt);
      return;
    }
    if (now < this.crashes.respawnAt) {
      // Crash back-off: ask again when it ends (the rate round is not used up).
      this.scaleTimer.armAt(this.crashes.respawnAt);
      return;
    }
    this.round = plan.round;
    // Whole workers: a group of k seats for any part of k wanted.
    const workers = Math.ceil(plan.spawn / k);
    const forDemand = Math.ceil(Math.min(plan.spawn, c.queued - c.idle - c.spawning) / k);
    // A parked parent comes back first: its children fork warm, and it is counted already.
    const woken = this.wake();
    // Memory may allow fewer; those for waiting requests are retried when memory comes back.
    const n = workers - woken <= 0 ? 0 : this.mem ? this.mem.admit(workers - woken, Math.max(0, forDemand - woken)) : workers - woken;
    // Memory refusing the spawns logged its own reason: max_children holds back only once it is reached.
    this.noteMaxChildren(plan.atMaxChildren && (this.procs.slots.size + n) * k >= this.scaling.maxChildren, c);
    if (n > 0) {
      this.log.info(
        { spawn: n, idle: c.idle, busy: c.busy, spawning: c.spawning, retiring: c.retiring, queued: c.queued, maxChildren: this.scaling.maxChildren },
        `pool ${this.name}: spawning ${n} worker(s)`,
      );
      for (let i = 0; i < n; i++) this.spawn();
    }
    if (plan.recheckAt !== undefined) this.scaleTimer.armAt(plan.recheckAt);
  }

  /** One line when requests start waiting because max_children workers live. */
  private noteMaxChildren(at: boolean, c: ReturnType<Supervisor['counts']>): void {
    if (at && !this.atMaxChildren) {
      this.stats.maxChildrenReached++;
      this.log.warn(
        { code: ErrorCodes.MAX_CHILDREN, maxChildren: this.scaling.maxChildren, busy: c.busy, spawning: c.spawning, retiring: c.retiring, queued: c.queued, times: this.stats.maxChildrenReached },
        `pool ${this.name} reached max_children (${this.scaling.maxChildren}); requests wait in the queue`,
      );
    }
    this.atMaxChildren = at;
  }

  /** An exec in place is coming: no idle stop from now on (the upgrade's bridge sends requests to these workers); `false`: again. */
  holdIdle(hold: boolean): void {
    this.idleHeld = hold;
    if (hold) this.idleTimer.cancel();
    else if (this.firstIdleDue !== Infinity) this.idleTimer.armAt(this.clock.now());
  }

  private onIdleTimer(): void {
    if (this.shuttingDown || this.warming || this.idleHeld) return; // start() arms it again when done
    const now = this.clock.now();
    const k = this.slotsPerWorker;
    const idle = this.hooks.idleWorkers();
    // The policy counts seats: each idle worker is k idle seats, all idle since its last.
    const since: number[] = [];
    for (const s of idle) for (let i = 0; i < k; i++) since.push(Math.max(s.idleSince, this.inServiceAt));
    const plan = planIdleStops(this.scaling, since, now);
    const stop = Math.floor(plan.stop / k);
    if (stop > 0) {
      const idleTimeout = this.cfg.idleTimeout > 0 ? this.cfg.idleTimeout : Infinity;
      const going = idle.slice(0, stop);
      // resident_parent: the last worker of a pool going to zero parks instead.
      let up = 0;
      for (const s of this.workers()) if (s.state === 'up' || s.state === 'starting') up++;
      const park = this.resident && this.parked === undefined && up === going.length && !this.shuttingDown && this.hooks.poolState() === 'running' ? going.pop() : undefined;
      for (const slot of going) {
        this.retire(slot, now - slot.idleSince >= idleTimeout ? 'idle_timeout' : 'scale_down');
      }
      if (park !== undefined) this.park(own(park));
    }
    if (plan.recheckAt !== undefined) this.idleTimer.armAt(plan.recheckAt);
  }

  // ---- warm zero (resident_parent) --------------------------------------------------------

  /**
   * The pool's last worker stays as a paused parent: its seats withdrawn, the parent and
   * the PARKED_CHILDREN children that did the most (warmestFirst) stopped, its other
   * children ended. A kept child takes the next request as soon as it runs again: woken, a
   * group's parent forks all its children at once, and on two busy cores the first of k new
   * children reaches accept() k times later than one. The second is a warm spare: a request
   * that comes while the first is busy finds a child that served before (its copy-on-write
   * faults and opcache's per-process work done), not a new fork's first request.
   */
  private park(slot: Slot): void {
    const pid = slot.pid;
    if (pid === undefined) return;
    this.hooks.withdraw(slot);
    slot.endpoint?.closeIdle();
    const children = childrenOf(pid);
    try {
      process.kill(pid, 'SIGSTOP');
    } catch {
      return; // gone: its exit comes as an event
    }
    const ordered = warmestFirst(children);
    const kept = ordered.slice(0, PARKED_CHILDREN).filter((c) => signal(c, 'SIGSTOP')); // not those gone meanwhile
    const ended = ordered.slice(PARKED_CHILDREN);
    // Idle (their seats are withdrawn and their connections closed): SIGKILL spares each the
    // PHP shutdown SIGTERM would run, tens of ms of CPU the next wake would compete with.
    for (const c of ended) signal(c, 'SIGKILL');
    this.parked = slot;
    this.keptChildren = kept;
    slot.log.info({ kind: 'park', kept, ended },
      `pool ${this.name} at warm zero: worker ${pid}'s php-cgi parent stays, paused, with PHP and its opcache loaded` +
      (kept.length > 0 ? `, and its child(ren) ${kept.join(', ')} paused beside it` : '') + (ended.length > 0 ? `; its child(ren) ${ended.join(', ')} stopped` : ''));
  }

  /** Wakes the parked parent, if any: 1 when one was woken. Its seats take requests at once (they queue in its socket until the child accepts). */
  private wake(): number {
    const slot = this.parked;
    if (slot === undefined || slot.pid === undefined) return 0;
    const kept = this.keptChildren;
    this.unpark();
    // The kept children only: a child the parent forks on waking, running into accept()
    // as a request's connection arrives, takes it ahead of the kept ones still being
    // woken. The parent runs once more requests came than they can take.
    for (const c of kept) continueProcess(c);
    if (kept.length === 0) continueProcess(slot.pid);
    else this.held = { slot, kept: kept.length, assigned: 0, timer: this.clock.setTimer(() => this.continueHeld(), WAKE_HOLD_MS) };
    this.wakes++;
    slot.log.info({ kind: 'wake', wakes: this.wakes }, `pool ${this.name}: waking the parked php-cgi parent ${slot.pid}`);
    this.hooks.offer(slot);
    this.hooks.pump();
    return 1;
  }

  /** The woken parent runs again: it reaps the children ended at park and forks the group anew. */
  private continueHeld(): void {
    const h = this.held;
    if (h === undefined) return;
    this.held = undefined;
    this.clock.clearTimer(h.timer);
    if (h.slot.pid !== undefined) continueProcess(h.slot.pid);
  }

  private unpark(): void {
    this.parked = undefined;
    this.keptChildren = [];
  }

  /** Memory pressure: the parked parent goes (the next start is cold); resolves once it exited. */
  private evictParked(): Promise<void> | undefined {
    const slot = this.parked;
    if (slot === undefined) return undefined;
    const exited = new Promise<void>((resolve) => slot.worker.once('exit', () => resolve()));
    this.retire(slot, 'memory');
    return exited;
  }

  // ---- a reload that changed only the scaling policy ---------------------------------------

  /**
   * Takes `next`, which differs from the running config only in the scaling keys
   * (reload.ts POOL_KEYS_IN_PLACE), with the running workers: the idle timer counts by the
   * new idle_timeout, a lower max_children retires the surplus (idle workers first, busy
   * ones once their request ends), and the mode starts what it wants now (a higher static
   * size, a higher min_spare).
   */
  retune(next: PoolConfig): void {
    this.cfg = next;
    this.scaling = scalingOf(next, this.slotsPerWorker);
    this.firstIdleDue = firstIdleDueOf(next);
    this.mem?.retune(next);
    // Idle ones first, then the least busy.
    const live = [...this.workers()].filter((s) => s.state === 'up').sort((a, b) => a.busy - b.busy);
    const surplus = live.length - this.scaling.maxChildren / this.slotsPerWorker;
    for (const slot of live.slice(0, Math.max(0, surplus))) this.retire(slot, 'scale_down');
    this.idleTimer.cancel();
    if (this.firstIdleDue !== Infinity && !this.shuttingDown) this.idleTimer.armAt(this.clock.now());
    this.scale();
  }

  // ---- operator actions (fcgi-pm drain, fcgi-pm restart --rolling) ----------------------

  /**
   * Retires every worker: idle ones now, busy ones after their request; what waits in the
   * queue stays there for the workers the mode starts next (ondemand: on demand, dynamic:
   * its spare workers). A static pool never stops serving: its drain is a rolling restart.
   */
  async drain(): Promise<ActionReport> {
    this.stopPacing();
    if (this.cfg.pm === 'static') return this.rollingRestart();
    const retired: number[] = [];
    for (const slot of [...this.procs.slots]) {
      if (slot.state !== 'up') continue;
      retired.push(slot.pid ?? 0);
      this.retire(slot, 'drain');
    }
    this.log.info({ kind: 'drain', retired: retired.length }, `pool ${this.name} drained: ${retired.length} worker(s) retired`);
    this.scale();
    return { pool: this.name, action: 'drain', retired, started: [] };
  }

  private rolling: Promise<ActionReport> | undefined;

  /**
   * Replaces the workers one at a time: a replacement is started (first, when max_children
   * leaves room; else once the old worker has exited) and the next old worker goes only
   * once it is ready, so at most one worker's capacity is missing. A replacement that
   * fails to start ends the restart with the remaining old workers still serving.
   */
  rollingRestart(): Promise<ActionReport> {
    this.stopPacing();
    this.rolling ??= this.roll().finally(() => (this.rolling = undefined));
    return this.rolling;
  }

  private async roll(): Promise<ActionReport> {
    const old = [...this.procs.slots].filter((s) => s.state === 'up');
    const report: ActionReport = { pool: this.name, action: 'restart', retired: [], started: [] };
    this.log.info({ kind: 'restart', workers: old.length }, `pool ${this.name}: rolling restart of ${old.length} worker(s)`);
    const fresh = new Set<Slot>();
    for (const slot of old) {
      if (this.shuttingDown || this.hooks.poolState() !== 'running') break;
      if (slot.state !== 'up') continue; // gone meanwhile (idle stop, recycling)
      const room = this.growableSeats() >= this.slotsPerWorker && (this.mem?.admit(1, 0) ?? 1) > 0;
      let next = room ? this.spawn() : undefined;
      if (next === undefined) {
        report.retired.push(slot.pid ?? 0);
        this.retire(slot, 'restart');
        await this.settled(slot);
        // The mode may have started the replacement itself when the old one exited (static).
        next = [...this.procs.slots].find((s) => s.state === 'starting' && !fresh.has(s)) ?? (this.growableSeats() >= this.slotsPerWorker ? this.spawn() : undefined);
      }
      if (next === undefined) continue;
      fresh.add(next);
      if (next.state === 'starting') await this.settled(next);
      if (this.shuttingDown) break; // a reload or stop replaced the pool meanwhile
      if (next.state === 'gone') {
        const why = this.lastStartError ?? 'it exited before it was ready';
        this.log.warn({ code: ErrorCodes.RESTART_ABORTED, kind: 'restart', replaced: report.started.length }, `pool ${this.name}: rolling restart stopped, a replacement worker did not start: ${why}`);
        throw new ProxyError(ErrorCodes.RESTART_ABORTED, 503, `rolling restart of pool ${this.name} stopped after ${report.started.length} worker(s): a replacement did not start (${why})`);
      }
      report.started.push(next.pid ?? 0);
      if (room && slot.state === 'up') {
        report.retired.push(slot.pid ?? 0);
        this.retire(slot, 'restart');
      }
    }
    this.log.info({ kind: 'restart', retired: report.retired.length, started: report.started.length }, `pool ${this.name}: rolling restart done, ${report.started.length} worker(s) replaced`);
    return report;
  }

  /** Resolves when the worker is ready or gone (Slot.settle, chained with a wait already there). */
  private settled(slot: Slot): Promise<void> {
    return new Promise<void>((resolve) => {
      const before = slot.settle;
      slot.settle = () => {
        before?.();
        resolve();
      };
    });
  }

  // ---- shutdown and status ----------------------------------------------------------

  /**
   * Stops every worker (the dispatcher has answered what still runs); resolves when all
   * exited. `handOn` (an exec in place of the daemon follows): each idle worker that is up
   * and can go on in the new code is handed on instead (hand_on), and its record returned.
   */
  async shutdown(reason: 'shutdown' | 'reload', handOn = false): Promise<HandedWorker[]> {
    this.shuttingDown = true;
    this.idleTimer.cancel();
    this.scaleTimer.cancel();
    this.stopPacing();
    this.crashes.dispose();
    this.groups?.dispose();
    const handed: HandedWorker[] = [];
    for (const slot of [...this.procs.slots]) {
      const h = handOn && slot.state === 'up' && slot.busy === 0 ? this.handOver(slot) : undefined;
      if (h !== undefined) handed.push(h);
      else this.fire(slot, 'shutdown', { reason });
    }
    this.mem?.dispose();
    // The one wait: every worker's exit, reaped through the table (bury).
    await this.procs.reaped();
    // A handed worker stays in the pool's cgroup: it is the new code's to remove.
    if (handed.length === 0) this.mem?.removeCgroup();
    return handed;
  }

  /** Its record when the worker can go on in the new code (a parked parent runs again first). */
  private handOver(slot: Slot): HandedWorker | undefined {
    if (slot === this.parked && slot.pid !== undefined) continueProcess(slot.pid);
    const h = slot.worker.handOver?.();
    if (h === undefined) return undefined;
    h.requests = slot.requests;
    this.fire(slot, 'handover', NO_CONTEXT);
    return h;
  }

  /** Groups' children as /proc has them now (for status). */
  refreshChildren(): void {
    if (this.groups !== undefined) for (const slot of this.procs.slots) this.groups.refresh(slot);
  }

  fill(s: PoolSnapshot): void {
    this.mem?.fill(s);
  }
}

/**
 * The children a parked php-cgi parent keeps paused beside it: one for the next request,
 * and a warm spare for a request that comes while that one is busy (docs/memory.md "Warm
 * zero and cold zero": the spare's pages count with the parent's).
 */
export const PARKED_CHILDREN = 2;
/** The longest a woken parent stays stopped while its kept children serve (it must run to replace one that exits). */
const WAKE_HOLD_MS = 1000;

/**
 * Children ordered by the page faults they took, most first: a child that served has
 * faulted in its copy-on-write pages and the application's (hundreds on its first request),
 * one that never served has not. A child /proc no longer has goes last.
 */
function warmestFirst(pids: readonly number[]): number[] {
  const faults = new Map<number, number>();
  for (const pid of pids) {
    let f = -1;
    try {
      f = parseStat(fs.readFileSync(`/proc/${pid}/stat`))?.faults ?? -1;
    } catch {
      // gone meanwhile
    }
    faults.set(pid, f);
  }
  return [...pids].sort((a, b) => faults.get(b)! - faults.get(a)! || a - b);
}

/** SIGCONT: a parked parent runs again (and receives what it was sent meanwhile). */
function continueProcess(pid: number): void {
  signal(pid, 'SIGCONT');
}

/** False when the process is gone (its exit comes as an event, or its parent reaps it). */
function signal(pid: number, sig: NodeJS.Signals): boolean {
  try {
    process.kill(pid, sig);
    return true;
  } catch {
    return false;
  }
}

/** The policy counts seats (with group_size, php processes), max_children rounded up to whole groups. */
function scalingOf(cfg: PoolConfig, k: number): ScalingConfig {
  return {
    pm: cfg.pm,
    maxChildren: Math.ceil(Math.max(1, cfg.maxChildren) / k) * k,
    startChildren: cfg.startChildren,
    minSpare: cfg.minSpare,
    maxSpare: cfg.maxSpare,
    maxSpawnRate: cfg.maxSpawnRate,
    idleTimeout: cfg.idleTimeout,
  };
}

/** How long after going idle a worker may first be due to stop (Infinity: never). */
function firstIdleDueOf(cfg: PoolConfig): number {
  const idleTimeout = cfg.idleTimeout > 0 ? cfg.idleTimeout : Infinity;
  return cfg.pm === 'static' ? Infinity : cfg.pm === 'dynamic' ? Math.min(SURPLUS_IDLE_MS, idleTimeout) : idleTimeout;
}
