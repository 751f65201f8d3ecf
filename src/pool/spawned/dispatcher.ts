/**
 * A pool of worker processes fcgi-pm spawns itself, PHP-FPM style: static / dynamic /
 * ondemand (scaling.ts decides how many). This file is the pool's Dispatcher: the
 * queue, the seats (seats.ts) and their most-recently-used idle stack, the endpoints,
 * the request timers. Each seat's state is one cell of seat-table.ts, whose cells name
 * the action carried out here (`act`), among them the handling of a worker that dies
 * under a request. The worker processes belong to its Supervisor (supervisor.ts); the
 * two meet at SupervisorHooks and the load signal (waiting requests, busy seats per worker).
 *
 * A worker offers one seat, or k (group_size: one php-cgi parent whose k children
 * accept on one socket); each seat runs one request on its own connection of the
 * worker's endpoint. Dispatch takes the most recently used idle seat (LIFO), so surplus
 * workers really go idle and the idle timer can stop them, longest idle first. A
 * request running longer than request_timeout gets 504 and its worker is stopped.
 *
 * Timers: one for the queue, one each for request timeouts and slow requests
 * (request-timer.ts), a seat's exit grace (seat-table.ts `ending`); the supervisor's for
 * idle stops, spawn rounds and back-off, the failing probe, and the wait for a dying
 * worker's exit. Nothing scans once a second.
 */
import { ErrorCodes, ProxyError } from '../../errors.js';
import type { PoolConfig } from '../../config/types.js';
import { retunesInPlace } from '../retune.js';
import type { Exchange } from '../../protocol/exchange.js';
import type { FailedOutcome } from '../../upstream/failures.js';
import { mayRetryElsewhere } from '../../upstream/retry.js';
import type { UpstreamOptions, UpstreamOutcome } from '../../upstream/types.js';
import type { HandedWorker, WorkerExit } from '../../worker/types.js';
import type { ForkServer } from '../../worker/fork-server.js';
import { PoolBase } from '../pool-base.js';
import { RequestTimer } from './request-timer.js';
import { formatBacktrace, requestBacktrace } from '../../worker/php-backtrace.js';
import { runsPhpCgi } from '../../config/schema.js';
import { exitText, scriptOf, workerSnapshot, type SlotView } from '../workers/slot.js';
import { Seat } from './seats.js';
import { EXIT_GRACE_MS, SEAT_TABLE, type SeatAction, type SeatEvent } from './seat-table.js';
import { Supervisor, type SupervisorDeps, type SupervisorHooks } from '../workers/supervisor.js';
import { BusySlice, DEFAULT_BUSY_CPU_SLICE_MS } from '../workers/busy-slice.js';
import type { DirectFallback, EndpointFactory, PoolActionReport, PoolSnapshot, StopReason, WarmStart, Warmth } from '../types.js';

export { EXIT_GRACE_MS } from './seat-table.js';

export interface SpawnedPoolDeps extends SupervisorDeps {
  endpointFactory: EndpointFactory;
  /** preload: the parent that forks the workers; started with the pool, stopped after it. */
  forkServer?: ForkServer;
  /** accept: direct without the native addon: this pool stands in, proxied. */
  directFallback?: DirectFallback;
  /** What createPool makes of a config (resident_parent decided): retune compares that with the running one. */
  resolveConfig?: (cfg: PoolConfig) => PoolConfig;
}

export class SpawnedPool extends PoolBase {
  private readonly deps: SpawnedPoolDeps;
  private readonly upstreamOpts: UpstreamOptions;
  /** Idle seats; the end is the most recently used (taken first), index 0 the longest idle. */
  private readonly idle: Seat[] = [];
  private readonly requestTimer: RequestTimer<Seat>;
  /** Its workers run php-cgi: the slow log reads their PHP stack. */
  private readonly phpCgi: boolean;
  /** @internal The worker processes (exposed for tests that look at them). */
  readonly supervisor: Supervisor;
  /** Each worker's seats, made when it is spawned. */
  private readonly seatsOf = new WeakMap<SlotView, readonly Seat[]>();
  private readonly outcome = (seat: Seat, o: UpstreamOutcome): void => this.onOutcome(seat, o);
  /** busy_cpu_slice: the workers' long CPU slice while requests wait (with a memory part, which places workers). */
  private readonly busySlice: BusySlice | undefined;

  constructor(cfg: PoolConfig, deps: SpawnedPoolDeps) {
    super(cfg, deps.logger, deps.clock);
    this.phpCgi = cfg.command !== undefined && runsPhpCgi(cfg.command);
    this.deps = deps;
    const clock = deps.clock;
    const hooks: SupervisorHooks = {
      waiting: () => this.queue.length,
      poolState: () => this.state,
      seats: (slot, n) => this.makeSeats(slot, n),
      connect: (slot) => this.deps.endpointFactory(slot.worker.address, this.upstreamOpts, slot.log),
      offer: (slot) => this.offer(slot),
      withdraw: (slot) => this.withdraw(slot),
      cut: (slot, err) => this.cut(slot, err),
      lost: (slot) => this.lost(slot),
      unhold: (slot) => this.graceOver(slot),
      refuseQueued: (err) => this.rejectQueued('failing', err),
      idleWorkers: () => this.idleWorkers(),
      pump: () => this.pump(),
      checkDrained: () => this.checkDrained(),
    };
    this.supervisor = new Supervisor(cfg, deps, hooks, this.stats);
    const mem = this.supervisor.mem;
    if (mem !== undefined && (cfg.busyCpuSlice ?? DEFAULT_BUSY_CPU_SLICE_MS) > 0) this.busySlice = new BusySlice(clock, (on) => mem.busySlice(on));
    const k = this.supervisor.slotsPerWorker;
    this.queue.setSeats(cfg.maxChildren * k);
    this.upstreamOpts = {
      protocol: cfg.backend,
      connectTimeout: cfg.connectTimeout,
      readTimeout: cfg.readTimeout,
      keepAlive: cfg.keepAlive && cfg.backend === 'fastcgi',
      authorizerRole: cfg.authorizerRole ?? 'native',
      // One connection per seat: a group's k children each take one.
      maxIdle: k,
      // One request per seat: after a client abort it stays busy until its script ends.
      drainOnAbort: true,
    };
    this.requestTimer = new RequestTimer<Seat>(
      clock,
      cfg.requestTimeout,
      cfg.slowRequest,
      (s) => this.onRequestTimeout(s),
      (s) => this.onSlowRequest(s),
    );
  }

  async start(warm?: WarmStart): Promise<void> {
    // preload: the parent imports the application now, so the first worker is a fork.
    // A parent that cannot start is reported by the first worker that needs it.
    if (this.deps.forkServer !== undefined) await this.deps.forkServer.renew();
    await this.supervisor.start(warm);
  }

  drain(): Promise<PoolActionReport> {
    return this.supervisor.drain();
  }

  rollingRestart(): Promise<PoolActionReport> {
    return this.supervisor.rollingRestart();
  }

  // ---- PoolBase hooks ---------------------------------------------------------------

  protected startNow(ex: Exchange): boolean {
    const idle = this.idle;
    for (let seat = idle.at(-1); seat !== undefined; seat = idle.at(-1)) {
      const slot = seat.slot;
      if (slot.busy === 0 && this.supervisor.pastLifetime(slot)) {
        this.supervisor.retire(slot, 'max_lifetime'); // withdraws its seats
        this.fire(seat, 'withdraw');
        continue;
      }
      this.fire(seat, 'assign', ex);
      if (this.cfg.pm === 'dynamic' && idle.length < this.cfg.minSpare) this.supervisor.scale();
      return true;
    }
    return false;
  }

  protected onQueued(): void {
    this.busySlice?.queued();
    this.supervisor.scale();
  }

  protected refusal(): ProxyError | undefined {
    // The breaker stops spawning, not serving: a worker still alive takes what it can.
    return this.supervisor.failing && this.idle.length === 0 ? this.supervisor.failingError() : undefined;
  }

  protected override starting(): number {
    return this.supervisor.startingSeats();
  }

  protected override growable(): number {
    return this.supervisor.growableSeats();
  }

  protected override spawning(): { seats: number; waitMs: number } | undefined {
    const seats = this.supervisor.startingSeats();
    return seats > 0 ? { seats, waitMs: this.cfg.spawnTimeout } : undefined;
  }

  protected override targetNoun(): string {
    return 'worker';
  }

  warmth(): Warmth | undefined {
    if (this.state !== 'running') return undefined;
    // Warm: the worker has finished a request. For a php-cgi group that holds for all of its
    // seats: its first request filled the opcache memory every child shares, so the others'
    // first requests find the application loaded (until then they are cold, like it).
    const served = (s: SlotView): number => s.requests - s.busy;
    let firstRunning = 0;
    let unserved = 0;
    for (const s of this.supervisor.slots) {
      if (s.state !== 'up') continue;
      if (s.requests === 0) unserved++;
      else if (served(s) === 0) firstRunning++;
    }
    const top = this.idle.at(-1);
    return { next: top === undefined ? 'wait' : served(top.slot) > 0 ? 'warm' : 'cold', firstRunning, unserved, pending: this.supervisor.pendingWorkers() };
  }

  /** Retunes applied in place: they change what status shows without an event. */
  private retunes = 0;

  /**
   * A number that grows with every event that changes what status shows of the pool while
   * it is idle (a request's arrival, a worker's event, a retune, a sample that changed a
   * worker's memory or CPU); undefined while requests run or wait, or the pool is not
   * running, when its status moves with time as well.
   */
  idleRevision(): number | undefined {
    if (this.state !== 'running' || this.stats.active > 0 || this.queue.length > 0) return undefined;
    return this.stats.accepted + this.supervisor.events + this.supervisor.figures.n + this.retunes;
  }

  retune(next: PoolConfig): (() => void) | undefined {
    // As createPool made the running settings (resident_parent decided); a preload pool is renewed, not retuned.
    const cfg = this.deps.resolveConfig?.(next) ?? next;
    if (this.deps.forkServer !== undefined || this.state !== 'running' || !retunesInPlace(this.cfg, cfg)) return undefined;
    return () => {
      this.retunes++;
      this.cfg = cfg;
      this.queue.setSeats(cfg.maxChildren * this.supervisor.slotsPerWorker);
      this.supervisor.retune(cfg);
    };
  }

  /** The workers handed on by a stop for 'upgrade'. */
  private handed: readonly HandedWorker[] = [];

  handedOn(): readonly HandedWorker[] {
    return this.handed;
  }

  holdForHandover(hold = true): string[] {
    if (this.deps.workerAdopter === undefined || this.deps.directFallback !== undefined) return [];
    this.supervisor.holdIdle(hold);
    if (!hold) return [];
    const parked = this.supervisor.parkedParent()?.slot;
    const out: string[] = [];
    for (const s of this.supervisor.slots) if (s.state === 'up' && s !== parked && s.worker.address.kind === 'unix') out.push(s.worker.address.text);
    return out;
  }

  protected async shutdown(reason: StopReason = 'shutdown'): Promise<void> {
    this.requestTimer.dispose();
    this.busySlice?.dispose();
    // stop() ran out of time with these requests still running.
    const err = new ProxyError(ErrorCodes.SHUTTING_DOWN, 503, `pool ${this.name} is shutting down`, 1);
    for (const slot of this.supervisor.slots) this.cut(slot, err);
    this.handed = await this.supervisor.shutdown(reason === 'upgrade' ? 'shutdown' : reason, reason === 'upgrade');
    await this.deps.forkServer?.stop();
  }

  protected fillSnapshot(s: PoolSnapshot): void {
    s.kind = 'spawned';
    if (this.deps.directFallback !== undefined) s.directFallback = { ...this.deps.directFallback };
    s.pm = this.cfg.pm;
    s.maxChildren = this.cfg.maxChildren;
    s.capacity = this.cfg.maxChildren * this.supervisor.slotsPerWorker;
    if (this.state === 'running' && this.supervisor.cannotServe()) s.state = 'failing';
    const k = this.supervisor.slotsPerWorker;
    if (k > 1) {
      s.slotsPerWorker = k;
      this.supervisor.refreshChildren();
    }
    const parked = this.supervisor.parkedParent();
    for (const slot of this.supervisor.slots) if (slot !== parked?.slot) s.workers.push(workerSnapshot(slot, this.wall));
    this.supervisor.fill(s);
    const parent = this.deps.forkServer?.parent ?? (parked !== undefined ? { pid: parked.slot.pid!, ready: true, forks: parked.wakes, kind: 'php-cgi' as const } : undefined);
    if (parent !== undefined) {
      const m = this.supervisor.mem?.preloadParent();
      s.preload = { ...parent, memory: m?.pid === parent.pid ? m.memory : undefined, measure: m?.pid === parent.pid ? m.measure : undefined };
    }
  }

  // ---- what the supervisor asks -----------------------------------------------------

  private makeSeats(slot: SlotView, n: number): readonly Seat[] {
    const seats: Seat[] = [];
    for (let i = 0; i < n; i++) seats.push(new Seat(slot, this.outcome));
    this.seatsOf.set(slot, seats);
    return seats;
  }

  private seats(slot: SlotView): readonly Seat[] {
    return this.seatsOf.get(slot)!;
  }

  /** A worker is ready (its endpoint made through `connect`): its seats on top of the idle stack. */
  private offer(slot: SlotView): void {
    for (const seat of this.seats(slot)) this.free(seat);
  }

  private withdraw(slot: SlotView): void {
    for (const seat of this.seats(slot)) this.fire(seat, 'withdraw');
  }

  /** Answers the worker's running requests with `err`. */
  private cut(slot: SlotView, err: ProxyError): void {
    for (const seat of this.seats(slot)) this.fire(seat, 'cut', err);
  }

  /** The worker exited: each running request ends with its held failure or after the exit grace. */
  private lost(slot: SlotView): void {
    for (const seat of this.seats(slot)) this.fire(seat, 'exit');
    if (slot.busy === 0) slot.endpoint?.destroy();
  }

  /**
   * The supervisor's wait for the worker's exit is over and it lives: each failure held
   * that long is answered or its request replaced. False when one held later still waits.
   */
  private graceOver(slot: SlotView): boolean {
    let waiting = false;
    const now = this.clock.now();
    for (const seat of this.seats(slot)) {
      if (seat.state !== 'held') continue;
      if (now - seat.heldAt >= EXIT_GRACE_MS) this.fire(seat, 'grace');
      else waiting = true;
    }
    return !waiting;
  }

  private idleWorkers(): SlotView[] {
    const out: SlotView[] = [];
    for (const seat of this.idle) {
      const slot = seat.slot;
      if (slot.busy === 0 && slot.state === 'up' && !out.includes(slot)) out.push(slot);
    }
    return out.sort((a, b) => a.idleSince - b.idleSince);
  }

  // ---- the seat table -----------------------------------------------------------------

  /** @internal The one entry for a seat's events: the endpoint's reports, the supervisor's hooks, the queue, its timer. */
  fire(seat: Seat, event: 'assign', ex: Exchange): void;
  fire(seat: Seat, event: 'outcome' | 'suspect', o: UpstreamOutcome): void;
  fire(seat: Seat, event: 'cut', err: ProxyError): void;
  fire(seat: Seat, event: 'free' | 'withdraw' | 'exit' | 'grace' | 'exit_grace'): void;
  fire(seat: Seat, event: SeatEvent, arg?: Exchange | UpstreamOutcome | ProxyError): void {
    const cell = SEAT_TABLE[seat.state][event];
    seat.state = cell.next;
    this.act(cell.action, seat, arg);
  }

  private act(action: SeatAction, seat: Seat, arg: Exchange | UpstreamOutcome | ProxyError | undefined): void {
    switch (action) {
      case 'list':
        return this.list(seat);
      case 'unlist':
        return this.unlist(seat);
      case 'take':
        this.unlist(seat);
        return this.assign(seat, arg as Exchange);
      case 'run':
        return this.assign(seat, arg as Exchange);
      case 'end':
        return this.endRequest(seat, seat.current!, arg as UpstreamOutcome);
      case 'hold':
        seat.held = arg as FailedOutcome;
        seat.heldAt = this.clock.now();
        return this.supervisor.suspect(seat.slot);
      case 'answer_held':
        return this.endRequest(seat, seat.current!, seat.held!);
      case 'give_up':
        return this.giveUp(seat, seat.current!, seat.held!);
      case 'await_report':
        seat.exitTimer = this.clock.setTimer(() => {
          seat.exitTimer = undefined;
          this.fire(seat, 'exit_grace');
        }, EXIT_GRACE_MS);
        return;
      case 'close':
        return this.closeExited(seat);
      case 'cut': {
        const ex = seat.current!;
        this.detach(seat);
        this.fail(ex, arg as ProxyError);
        this.requestEnded();
        return;
      }
      case 'none':
        return;
    }
  }

  private list(seat: Seat): void {
    const now = this.clock.now();
    seat.idleSince = now;
    this.idle.push(seat);
    this.supervisor.wentIdle(now);
  }

  private unlist(seat: Seat): void {
    const idle = this.idle;
    // Taken from the top (most recently used) but for a worker that stops.
    if (idle[idle.length - 1] === seat) idle.pop();
    else {
      const i = idle.indexOf(seat);
      if (i >= 0) idle.splice(i, 1);
    }
  }

  // ---- requests ---------------------------------------------------------------------

  private assign(seat: Seat, ex: Exchange): void {
    const slot = seat.slot;
    this.supervisor.assigned(slot);
    seat.current = ex;
    seat.busySince = this.clock.now();
    ex.workerPid = slot.worker.pid;
    ex.backend = slot.worker.address.text;
    this.stats.started();
    this.requestTimer.start(seat.timerNodes);
    slot.endpoint!.run(ex, seat.done);
  }

  /** The endpoint finished a request on this seat; a failure that may mean the worker is dying is suspect. */
  private onOutcome(seat: Seat, o: UpstreamOutcome): void {
    const suspect = o.kind === 'failed' && !this.forced && (o.retryable || o.error.code === ErrorCodes.BACKEND_CLOSED);
    this.fire(seat, suspect ? 'suspect' : 'outcome', o);
  }

  private endRequest(seat: Seat, ex: Exchange, o: UpstreamOutcome): void {
    const slot = seat.slot;
    if (o.kind === 'done') this.queue.served(this.clock.now() - seat.busySince);
    this.detach(seat);
    if (o.kind === 'done') this.stats.completed++;
    else if (o.kind === 'aborted') this.stats.aborted++;
    else if (this.forced) this.fail(ex, new ProxyError(ErrorCodes.SHUTTING_DOWN, 503, `pool ${this.name} is shutting down`, 1));
    else if (slot.exit !== undefined) {
      const err = this.lostAnswer(seat, ex, o, slot.exit);
      if (err === undefined) this.queue.unshift(ex);
      else this.fail(ex, err);
    } else this.fail(ex, o.error);
    this.requestEnded();
    if (slot.exit === undefined) {
      this.afterRequest(seat, o);
      return;
    }
    // The worker is gone: its endpoint too, once no seat waits for a report. A request
    // put back in the queue needs a worker.
    if (slot.busy === 0) slot.endpoint?.destroy();
    if (this.queue.length > 0) {
      this.pump();
      this.supervisor.scale();
    }
  }

  /** Clears the seat's request: timers, held failure, exit grace. */
  private detach(seat: Seat): void {
    seat.current = undefined;
    seat.held = undefined;
    if (seat.exitTimer !== undefined) {
      this.clock.clearTimer(seat.exitTimer);
      seat.exitTimer = undefined;
    }
    this.requestTimer.stop(seat.timerNodes);
  }

  /** The worker is alive after a request ended on this seat: recycle it, or give the seat the next request. */
  private afterRequest(seat: Seat, o: UpstreamOutcome): void {
    const slot = seat.slot;
    this.supervisor.released(slot);
    // Retiring or stopping (request_timeout, shutdown): the seat stays out.
    if (slot.state !== 'up') return;
    if (slot.busy === 0) this.supervisor.groupIdle(slot);
    if (this.supervisor.recycleAfterRequest(slot, o)) {
      this.supervisor.scale();
      return;
    }
    this.free(seat);
  }

  /** An idle seat takes the oldest waiting request, or goes on top of the idle stack. */
  private free(seat: Seat): void {
    const ex = this.queue.shift();
    if (ex !== undefined) this.fire(seat, 'assign', ex);
    else this.fire(seat, 'free');
  }

  /** Gives requests put back at the head of the queue to idle seats. */
  private pump(): void {
    while (this.queue.length > 0 && this.idle.length > 0) {
      const ex = this.queue.shift()!;
      if (!this.startNow(ex)) {
        this.queue.unshift(ex);
        return;
      }
    }
  }

  /**
   * The worker did not exit within the grace after a held failure: a plain failure is
   * answered; a worker alive but unreachable cannot serve, its request goes to another one.
   */
  private giveUp(seat: Seat, ex: Exchange, o: FailedOutcome): void {
    if (!o.retryable) {
      this.endRequest(seat, ex, o);
      return;
    }
    seat.log.warn({ code: o.error.code }, `worker is alive but unreachable (${o.error.message}); replacing it`);
    this.replaceUnreachable(seat, ex, o.error);
  }

  /** A worker alive but unreachable: its request goes to another worker, and it is replaced. */
  private replaceUnreachable(seat: Seat, ex: Exchange, err: ProxyError): void {
    // Its request is over: released first (a retired worker then goes), else the retire
    // below would leave it draining for a release that never comes, holding a max_children slot.
    this.detach(seat);
    this.supervisor.released(seat.slot);
    this.requestEnded();
    if (ex.rewind()) this.queue.unshift(ex);
    else this.fail(ex, err);
    this.supervisor.retire(seat.slot, 'scale_down');
    this.pump();
    this.supervisor.scale();
  }

  /**
   * The endpoint did not report within the exit grace: closing it makes it report (at
   * once); without a report the request ends as closed before any response byte.
   */
  private closeExited(seat: Seat): void {
    seat.slot.endpoint?.destroy();
    if (seat.state !== 'ending') return;
    this.fire(seat, 'outcome', {
      kind: 'failed',
      error: new ProxyError(ErrorCodes.BACKEND_CLOSED, 502, 'worker exited'),
      retryable: false,
      backendDown: true,
      // The endpoint saw no response byte by now: only a clean exit makes it safe elsewhere.
      facts: { failure: 'closed', headSent: true, responseBytes: false, reused: false, reset: false, idempotent: false },
    });
  }

  /**
   * The worker died while running `ex`. Undefined: `ex` never reached the application
   * and was rewound, to go first in the queue. Otherwise the error to answer.
   */
  private lostAnswer(seat: Seat, ex: Exchange, o: FailedOutcome, exit: WorkerExit): ProxyError | undefined {
    // A worker that exits cleanly by itself (php-cgi after PHP_FCGI_MAX_REQUESTS) does so
    // between requests: retry.ts takes that as proof (cleanExit). A crash is different: a
    // reset of a kept-alive connection proves nothing then (the application may have run
    // the request and crashed on it), nor does the failure of the endpoint's replay after
    // one, so only what holds whatever the process did counts (never connected, our head
    // never left us): a crashing page must not run twice, and a request handed to a worker
    // killed before the pool heard of it must not be lost.
    const cleanSelfExit = exit.code === 0 && exit.signal === null && exit.reason === undefined;
    const f = o.facts;
    const neverRead = f !== undefined && (cleanSelfExit ? mayRetryElsewhere({ ...f, cleanExit: true }).retry : f.replayed !== true && mayRetryElsewhere({ ...f, reused: false }).retry);
    if (neverRead && ex.rewind()) {
      seat.log.info({ exchange: ex.id, code: exit.code, signal: exit.signal }, 'worker went away before taking the request; giving it to another worker');
      return undefined;
    }
    if (seat.slot.mem?.oomKilled === true) {
      return new ProxyError(ErrorCodes.WORKER_OOM_KILLED, 503, `worker ${seat.pid ?? '?'} of pool ${this.name} was killed by the kernel's OOM killer while serving ${scriptOf(ex)}`);
    }
    return new ProxyError(ErrorCodes.WORKER_CRASHED, 502, `worker ${seat.pid ?? '?'} of pool ${this.name} ${exitText(exit)} while serving ${scriptOf(ex)}`);
  }

  private onRequestTimeout(seat: Seat): void {
    const ex = seat.current;
    if (ex === undefined) return;
    const duration = Math.round(this.clock.now() - seat.busySince);
    const script = scriptOf(ex);
    seat.log.warn(
      { code: ErrorCodes.REQUEST_TIMEOUT, script, uri: ex.params.get('REQUEST_URI'), durationMs: duration, requestTimeout: this.cfg.requestTimeout },
      `request to ${script} ran ${duration} ms, past request_timeout (${this.cfg.requestTimeout} ms): stopping worker ${seat.pid}`,
    );
    this.supervisor.stop(seat.slot, 'request_timeout', new ProxyError(ErrorCodes.REQUEST_TIMEOUT, 504, `request exceeded request_timeout (${this.cfg.requestTimeout} ms) in pool ${this.name}`));
  }

  private onSlowRequest(seat: Seat): void {
    const ex = seat.current;
    if (ex === undefined) return;
    this.stats.slowRequests++;
    const elapsed = Math.round(this.clock.now() - seat.busySince);
    // php-cgi: where the script is, as PHP-FPM's slowlog shows it (read from the worker's memory).
    const trace = this.phpCgi && seat.pid !== undefined ? requestBacktrace(seat.pid, ex.params.get('SCRIPT_FILENAME')) : undefined;
    const backtrace = trace === undefined || typeof trace === 'string' ? undefined : formatBacktrace(trace);
    seat.log.warn(
      { code: ErrorCodes.SLOW_REQUEST, script: scriptOf(ex), uri: ex.params.get('REQUEST_URI'), elapsedMs: elapsed, slowRequest: this.cfg.slowRequest, slowRequests: this.stats.slowRequests, backtrace, backtraceError: typeof trace === 'string' ? trace : undefined },
      `slow request: ${scriptOf(ex)} still running after ${elapsed} ms${backtrace === undefined || backtrace.length === 0 ? '' : `: ${backtrace.join(' ← ')}`}`,
    );
  }
}
