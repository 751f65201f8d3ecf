/**
 * A pool of worker processes fcgi-pm spawns itself (issue 3), PHP-FPM style:
 * static / dynamic / ondemand (scaling.ts decides how many), one request per worker,
 * each worker with its own Endpoint (one kept-alive connection is the norm).
 *
 * Dispatch takes the most recently used idle worker (LIFO), so surplus workers really
 * go idle and the idle timer can stop them, longest idle first. Workers are recycled
 * between requests (max_requests ± jitter, max_lifetime); a request running longer
 * than request_timeout gets 504 and its worker is stopped. A worker that dies under a
 * request answers it 502 WORKER_CRASHED, or hands it to another worker when it exited
 * cleanly before reading it (spawned-failures.ts). A worker killed after it served is
 * replaced at once; early crashes (exit-policy.ts) back off restarts and can make the
 * pool `failing` (crash-guard.ts), which stops spawning and answers 503 while no worker
 * is free.
 *
 * Timers: one for the queue, one each for request timeouts and slow requests
 * (request-timer.ts), one for idle stops, one for spawn rounds / restart back-off, one
 * for the failing probe. Nothing scans once a second.
 */
import { ErrorCodes, ProxyError } from '../errors.js';
import type { Logger } from '../log/log.js';
import type { PoolConfig } from '../config/types.js';
import type { Exchange } from '../protocol/exchange.js';
import type { MemoryGovernor } from '../memory/host-governor.js';
import type { UpstreamOptions, UpstreamOutcome } from '../upstream/types.js';
import type { ExitVerdict } from '../worker/exit-policy.js';
import type { RetireReason, WorkerExit, WorkerFactory, WorkerSpec } from '../worker/types.js';
import { OneTimer, type Clock } from './clock.js';
import { CrashGuard } from './crash-guard.js';
import type { EndpointFactory } from './external-pool.js';
import { killChildNow } from './hard-kill.js';
import { PoolBase } from './pool-base.js';
import { PoolMemory } from './pool-memory.js';
import { RequestTimer } from './request-timer.js';
import { initialWorkers, NO_ROUND, planIdleStops, planSpawns, SURPLUS_IDLE_MS, type ScalingConfig, type SpawnRound } from './scaling.js';
import { countWorkers, exitText, scriptOf, Slot, workerSnapshot } from './slot.js';
import { WorkerFailures } from './spawned-failures.js';
import type { PoolSnapshot } from './types.js';

export { EXIT_GRACE_MS } from './spawned-failures.js';

export interface SpawnedPoolDeps {
  logger: Logger;
  clock: Clock;
  spec: WorkerSpec;
  workerFactory: WorkerFactory;
  /** Logger handed to workers (they bind pool and worker id themselves). */
  workerLogger: Logger;
  endpointFactory: EndpointFactory;
  /** [0, 1), for max_requests_jitter. */
  random: () => number;
  /** The daemon's memory governor; without it no sampling, caps or budget (unit tests). */
  memory?: MemoryGovernor;
}

export class SpawnedPool extends PoolBase {
  private readonly deps: SpawnedPoolDeps;
  private readonly spec: WorkerSpec;
  private readonly scaling: ScalingConfig;
  private readonly upstreamOpts: UpstreamOptions;
  /** Live workers (not yet exited). */
  private readonly slots = new Set<Slot>();
  /** Idle workers; the end is the most recently used (taken first), index 0 the longest idle. */
  private readonly idle: Slot[] = [];
  private nextId = 1;
  /** Workers spawned and not yet ready or gone. */
  private nStarting = 0;
  private round: SpawnRound = NO_ROUND;
  private atMaxChildren = false;
  private readonly crashes: CrashGuard;
  private readonly failures: WorkerFailures;
  private shuttingDown = false;
  /** The start failure reported at error level; repeats of it are logged at debug. */
  private reportedStartError: string | undefined;
  private lastStartError: string | undefined;
  private readonly requestTimer: RequestTimer<Slot>;
  private readonly idleTimer: OneTimer;
  private readonly scaleTimer: OneTimer;
  /** How long after going idle a worker may first be due to stop (Infinity: never). */
  private readonly firstIdleDue: number;
  private allExited: (() => void) | undefined;
  private readonly mem: PoolMemory | undefined;
  private readonly outcome = (slot: Slot, o: UpstreamOutcome): void => this.onOutcome(slot, o);

  constructor(cfg: PoolConfig, deps: SpawnedPoolDeps) {
    super(cfg, deps.logger, deps.clock);
    this.deps = deps;
    this.scaling = {
      pm: cfg.pm,
      maxChildren: Math.max(1, cfg.maxChildren),
      startChildren: cfg.startChildren,
      minSpare: cfg.minSpare,
      maxSpare: cfg.maxSpare,
      maxSpawnRate: cfg.maxSpawnRate,
      idleTimeout: cfg.idleTimeout,
    };
    this.upstreamOpts = {
      protocol: cfg.backend,
      connectTimeout: cfg.connectTimeout,
      readTimeout: cfg.readTimeout,
      keepAlive: cfg.keepAlive && cfg.backend === 'fastcgi',
      maxIdle: 1,
      // One request per worker: after a client abort it stays busy until its script ends.
      drainOnAbort: true,
    };
    const clock = deps.clock;
    this.crashes = new CrashGuard(cfg.name, cfg.crashLimit, cfg.crashWindow, clock, this.log, () => this.onProbe());
    this.failures = new WorkerFailures(cfg.name, clock, {
      endRequest: (slot, ex, o) => this.endRequest(slot, ex, o),
      replace: (slot, ex, err) => this.replaceUnreachable(slot, ex, err),
    });
    this.requestTimer = new RequestTimer<Slot>(
      clock,
      cfg.requestTimeout,
      cfg.slowRequest,
      (s) => this.onRequestTimeout(s),
      (s) => this.onSlowRequest(s),
    );
    this.idleTimer = new OneTimer(clock, () => this.onIdleTimer());
    this.scaleTimer = new OneTimer(clock, () => this.scale());
    const idleTimeout = cfg.idleTimeout > 0 ? cfg.idleTimeout : Infinity;
    this.firstIdleDue = cfg.pm === 'static' ? Infinity : cfg.pm === 'dynamic' ? Math.min(SURPLUS_IDLE_MS, idleTimeout) : idleTimeout;
    this.mem = deps.memory && new PoolMemory(cfg, deps.memory, {
      slots: () => this.slots,
      retire: (slot, reason, fields, msg) => this.retire(slot, reason, { fields, msg }),
      kill: (slot, fields, msg) => this.killForMemory(slot, fields, msg),
      scale: () => this.scale(),
      queued: () => this.queue.length,
    }, clock, this.log);
    this.spec = this.mem === undefined ? deps.spec : { ...deps.spec, onStarted: (pid) => this.mem!.started(pid) };
  }

  async start(): Promise<void> {
    const wanted = initialWorkers(this.scaling);
    const n = this.mem ? this.mem.admit(wanted, 0) : wanted;
    this.log.info(
      { pm: this.cfg.pm, command: this.cfg.command, maxChildren: this.scaling.maxChildren, starting: n },
      `pool ${this.name} (${this.cfg.pm}) starting ${n} worker(s)${n < wanted ? ` of ${wanted} (memory)` : ''}`,
    );
    if (n === 0) return;
    const waits: Array<Promise<void>> = [];
    for (let i = 0; i < n; i++) {
      const slot = this.spawn();
      waits.push(new Promise<void>((resolve) => (slot.settle = resolve)));
    }
    await Promise.all(waits);
  }

  // ---- PoolBase hooks ---------------------------------------------------------------

  protected startNow(ex: Exchange): boolean {
    const idle = this.idle;
    for (let slot = idle.pop(); slot !== undefined; slot = idle.pop()) {
      slot.inIdle = false;
      if (this.cfg.maxLifetime > 0 && this.clock.now() - slot.spawnedAt >= this.cfg.maxLifetime) {
        this.retire(slot, 'max_lifetime');
        continue;
      }
      this.assign(slot, ex);
      if (this.cfg.pm === 'dynamic' && idle.length < this.scaling.minSpare) this.scale();
      return true;
    }
    return false;
  }

  protected onQueued(): void {
    this.scale();
  }

  protected refusal(): ProxyError | undefined {
    // The breaker stops spawning, not serving: a worker still alive takes what it can.
    return this.crashes.failing && this.idle.length === 0 ? this.failingError() : undefined;
  }

  protected override starting(): number {
    return this.nStarting;
  }

  protected override growable(): number {
    // slots = live processes, retiring ones included: they hold their place under max_children.
    return this.crashes.failing ? 0 : Math.max(0, this.scaling.maxChildren - this.slots.size);
  }

  protected override targetNoun(): string {
    return 'worker';
  }

  protected async shutdown(reason: 'shutdown' | 'reload' = 'shutdown'): Promise<void> {
    this.shuttingDown = true;
    this.idleTimer.cancel();
    this.scaleTimer.cancel();
    this.crashes.dispose();
    this.requestTimer.dispose();
    this.mem?.dispose();
    const exits: Array<Promise<unknown>> = [];
    for (const slot of [...this.slots]) {
      const ex = slot.current;
      if (ex) {
        // stop() ran out of time with this request still running.
        this.detach(slot);
        this.fail(ex, new ProxyError(ErrorCodes.SHUTTING_DOWN, 503, `pool ${this.name} is shutting down`, 1));
        this.requestEnded();
      }
      slot.endpoint?.closeIdle();
      exits.push(slot.worker.stop(reason));
    }
    if (this.slots.size > 0) {
      await new Promise<void>((resolve) => {
        this.allExited = resolve;
        this.checkAllExited();
      });
    }
    await Promise.all(exits);
    this.mem?.removeCgroup();
  }

  protected fillSnapshot(s: PoolSnapshot): void {
    s.kind = 'spawned';
    s.pm = this.cfg.pm;
    if (this.crashes.failing && this.state === 'running') s.state = 'failing';
    for (const slot of this.slots) s.workers.push(workerSnapshot(slot));
    this.mem?.fill(s);
  }

  // ---- requests ---------------------------------------------------------------------

  private assign(slot: Slot, ex: Exchange): void {
    const w = slot.worker;
    w.assign(ex.params.get('REQUEST_URI') ?? ex.params.get('SCRIPT_NAME') ?? '');
    slot.current = ex;
    slot.busySince = this.clock.now();
    ex.workerPid = w.pid;
    ex.backend = w.address.text;
    this.stats.started();
    this.requestTimer.start(slot.timerNodes);
    slot.endpoint!.run(ex, slot.done);
  }

  /** @internal The endpoint finished a request on this worker. */
  onOutcome(slot: Slot, o: UpstreamOutcome): void {
    const ex = slot.current;
    if (ex === undefined || slot.held !== undefined) return; // already answered (request_timeout, shutdown)
    if (o.kind === 'failed' && !this.forced && this.failures.hold(slot, o)) return;
    this.endRequest(slot, ex, o);
  }

  private endRequest(slot: Slot, ex: Exchange, o: UpstreamOutcome): void {
    this.detach(slot);
    if (o.kind === 'done') this.stats.completed++;
    else if (o.kind === 'aborted') this.stats.aborted++;
    else if (this.forced) this.fail(ex, new ProxyError(ErrorCodes.SHUTTING_DOWN, 503, `pool ${this.name} is shutting down`, 1));
    else if (slot.exit !== undefined) {
      const err = this.failures.lost(slot, ex, o, slot.exit);
      if (err === undefined) this.queue.unshift(ex);
      else this.fail(ex, err);
    } else this.fail(ex, o.error);
    this.requestEnded();
    if (slot.exit === undefined) {
      this.afterRequest(slot, o);
      return;
    }
    // The worker is gone: its endpoint too. A request put back in the queue needs a worker.
    slot.endpoint?.destroy();
    if (this.queue.length > 0) {
      this.pump();
      this.scale();
    }
  }

  /** Clears the worker's request: timers, held failure. */
  private detach(slot: Slot): void {
    slot.current = undefined;
    if (slot.held !== undefined || slot.exitTimer !== undefined) this.failures.clear(slot);
    this.requestTimer.stop(slot.timerNodes);
  }

  /** The worker is alive after a request ended: recycle it, or give it the next request. */
  private afterRequest(slot: Slot, o: UpstreamOutcome): void {
    const w = slot.worker;
    const st = w.state;
    if (st === 'draining') {
      // Its kept-alive connection closes first: php-cgi waiting on it would sit out SIGTERM until kill_timeout.
      slot.endpoint?.closeIdle();
      w.release(); // → stopping: the worker stops itself
      return;
    }
    if (st !== 'busy') return; // stopping (request_timeout, shutdown)
    w.release();
    if (o.kind === 'failed' && o.error.code === ErrorCodes.BACKEND_TIMEOUT) {
      // No byte for read_timeout: the script still runs and would hold the next request.
      this.retire(slot, 'request_timeout');
    } else if (o.kind === 'aborted' && o.backendBusy === true) {
      // The client went away and the request could not be cancelled (SCGI, or the
      // cancelled FastCGI request never ended): the script may still run and would hold
      // the next request, so the worker goes instead of back to the idle list.
      this.retire(slot, 'client_abort');
    } else if (w.requests >= slot.maxRequests) {
      this.retire(slot, 'max_requests');
    } else if (this.cfg.maxLifetime > 0 && this.clock.now() - slot.spawnedAt >= this.cfg.maxLifetime) {
      this.retire(slot, 'max_lifetime');
    } else if (this.mem === undefined || !this.mem.afterRequest(slot)) {
      this.free(slot);
      return;
    }
    this.scale();
  }

  /** An idle worker takes the oldest waiting request, or goes on top of the idle stack. */
  private free(slot: Slot): void {
    const ex = this.queue.shift();
    if (ex !== undefined) {
      this.assign(slot, ex);
      return;
    }
    const now = this.clock.now();
    slot.idleSince = now;
    slot.inIdle = true;
    this.idle.push(slot);
    if (this.firstIdleDue !== Infinity) this.idleTimer.armAt(now + this.firstIdleDue);
    this.mem?.wentIdle();
  }

  /** Gives requests put back at the head of the queue to idle workers. */
  private pump(): void {
    while (this.queue.length > 0 && this.idle.length > 0) {
      const ex = this.queue.shift()!;
      if (!this.startNow(ex)) {
        this.queue.unshift(ex);
        return;
      }
    }
  }

  /** A worker alive but unreachable (spawned-failures.ts): its request goes to another worker, and it is replaced. */
  private replaceUnreachable(slot: Slot, ex: Exchange, err: ProxyError): void {
    this.detach(slot);
    this.requestEnded();
    if (ex.rewind()) this.queue.unshift(ex);
    else this.fail(ex, err);
    // Its request is over: busy → idle (draining → stopping) first, else the retire below
    // would leave it draining for a release that never comes, holding a max_children slot.
    slot.worker.release();
    this.retire(slot, 'scale_down');
    this.pump();
    this.scale();
  }

  private onRequestTimeout(slot: Slot): void {
    const ex = slot.current;
    if (ex === undefined) return;
    const duration = Math.round(this.clock.now() - slot.busySince);
    const script = scriptOf(ex);
    slot.log.warn(
      { code: ErrorCodes.REQUEST_TIMEOUT, script, uri: ex.params.get('REQUEST_URI'), durationMs: duration, requestTimeout: this.cfg.requestTimeout },
      `request to ${script} ran ${duration} ms, past request_timeout (${this.cfg.requestTimeout} ms): stopping worker ${slot.pid}`,
    );
    this.stopNow(slot, 'request_timeout', new ProxyError(ErrorCodes.REQUEST_TIMEOUT, 504, `request exceeded request_timeout (${this.cfg.requestTimeout} ms) in pool ${this.name}`));
  }

  /** max_memory_hard (pool-memory.ts decided and wrote the message): SIGKILL now, its request gets 503. */
  private killForMemory(slot: Slot, fields: Record<string, unknown>, msg: string): void {
    slot.log.warn({ code: ErrorCodes.MEMORY_HARD_LIMIT, ...fields }, msg);
    const hard = this.cfg.maxMemoryHard ?? 0;
    this.stopNow(slot, 'memory_hard', new ProxyError(ErrorCodes.MEMORY_HARD_LIMIT, 503, `the worker of pool ${this.name} went over max_memory_hard (${hard} bytes) and was stopped`));
    // The kernel frees its memory only when it is gone: no SIGTERM grace.
    if (slot.pid !== undefined && slot.exit === undefined) killChildNow(slot.pid);
  }

  /** Stops a worker at once; a request it runs is answered with `err`. */
  private stopNow(slot: Slot, reason: RetireReason, err: ProxyError): void {
    const ex = slot.current;
    if (ex !== undefined) {
      this.detach(slot);
      this.fail(ex, err);
      this.requestEnded();
    }
    this.unidle(slot);
    this.stats.recycled(reason);
    void slot.worker.stop(reason);
    this.scale();
  }

  private onSlowRequest(slot: Slot): void {
    const ex = slot.current;
    if (ex === undefined) return;
    this.stats.slowRequests++;
    const elapsed = Math.round(this.clock.now() - slot.busySince);
    slot.log.warn(
      { code: ErrorCodes.SLOW_REQUEST, script: scriptOf(ex), uri: ex.params.get('REQUEST_URI'), elapsedMs: elapsed, slowRequest: this.cfg.slowRequest, slowRequests: this.stats.slowRequests },
      `slow request: ${scriptOf(ex)} still running after ${elapsed} ms`,
    );
  }

  // ---- workers ----------------------------------------------------------------------

  private spawn(): Slot {
    const id = this.nextId++;
    const cfg = this.cfg;
    const maxRequests = cfg.maxRequests > 0 ? cfg.maxRequests + Math.floor(this.deps.random() * (Math.max(0, cfg.maxRequestsJitter) + 1)) : Infinity;
    const w = this.deps.workerFactory(this.spec, this.deps.workerLogger, id);
    const slot = new Slot(this.outcome, w, this.clock.now(), maxRequests, this.log);
    this.slots.add(slot);
    this.nStarting++;
    this.mem?.spawned(slot);
    w.on('ready', () => this.onReady(slot));
    w.on('spawnFailed', (f) => (slot.spawnFailure = f));
    w.on('exit', (exit, verdict) => this.onExit(slot, exit, verdict));
    return slot;
  }

  private onReady(slot: Slot): void {
    const w = slot.worker;
    slot.ready = true;
    this.nStarting--;
    const spawnMs = Math.round(this.clock.now() - slot.spawnedAt);
    this.stats.spawned(spawnMs);
    slot.log = this.log.child({ wpid: w.pid });
    slot.endpoint = this.deps.endpointFactory(w.address, this.upstreamOpts, slot.log);
    slot.log.info({ spawnMs, workers: this.slots.size }, `worker ${w.pid} ready after ${spawnMs} ms`);
    this.reportedStartError = undefined;
    this.crashes.ready(w.pid);
    this.mem?.ready(slot);
    const settle = slot.settle;
    slot.settle = undefined;
    if (w.state === 'idle' && !this.shuttingDown) this.free(slot);
    this.scale();
    settle?.();
  }

  /** Retires a worker between requests (busy ones finish first). `why`: the memory governor's line instead of the usual one. */
  private retire(slot: Slot, reason: RetireReason, why?: { fields: Record<string, unknown>; msg: string }): void {
    const w = slot.worker;
    this.unidle(slot);
    this.stats.recycled(reason);
    const fields = { reason, requests: w.requests, uptimeMs: Math.round(this.clock.now() - slot.spawnedAt), workers: this.slots.size };
    if (why !== undefined) slot.log.info({ ...fields, ...why.fields }, why.msg);
    else slot.log.info(fields, `retiring worker ${w.pid}: ${reason}`);
    slot.endpoint?.closeIdle();
    w.retire(reason);
  }

  private unidle(slot: Slot): void {
    if (!slot.inIdle) return;
    const i = this.idle.indexOf(slot);
    if (i >= 0) this.idle.splice(i, 1);
    slot.inIdle = false;
  }

  private onExit(slot: Slot, exit: WorkerExit, verdict: ExitVerdict): void {
    slot.exit = exit;
    this.slots.delete(slot);
    if (!slot.ready) this.nStarting--;
    this.unidle(slot);
    this.mem?.exited(slot);
    // Counted before its request is answered: answering may spawn a replacement, which
    // must see this crash's back-off.
    const nowFailing = this.countExit(slot, exit, verdict);
    const ex = slot.current;
    if (ex !== undefined) this.failures.exited(slot, ex);
    if (slot.current === undefined) slot.endpoint?.destroy();
    if (!slot.ready) this.onStartFailure(slot, exit);
    if (nowFailing) {
      this.scaleTimer.cancel();
      this.rejectQueued('failing', this.failingError());
    }
    const settle = slot.settle;
    slot.settle = undefined;
    settle?.();
    this.pump();
    this.scale();
    this.checkAllExited();
    this.checkDrained();
  }

  /**
   * Only an early crash (exit-policy.ts) counts toward crash_limit and backs off restarts;
   * a worker killed after it served is replaced at once. True when the pool became failing.
   */
  private countExit(slot: Slot, exit: WorkerExit, verdict: ExitVerdict): boolean {
    if (verdict.crash) this.stats.crashes++;
    // An OOM kill says the page wanted too much, not that the worker cannot start.
    if (verdict.early && slot.mem?.oomKilled !== true) {
      const why = slot.spawnFailure?.message ?? `worker ${slot.pid ?? '?'} ${exitText(exit)}`;
      return this.crashes.crashed(slot.spawnedAt, slot.probe, why, this.queue.length);
    }
    if (slot.probe) this.crashes.probeGone();
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
          queued: this.queue.length,
        },
        `pool ${this.name} cannot start workers: ${message}`,
      );
    } else {
      this.log.debug({ errno: slot.spawnFailure?.errno }, `pool ${this.name}: worker start failed again: ${message}`);
    }
    // Waiting requests get 503 now unless some worker may still take them.
    let serving = 0;
    for (const s of this.slots) if (s.ready || s.worker.state === 'spawning') serving++;
    if (serving === 0 && this.queue.length > 0) {
      this.rejectQueued(
        'failing',
        new ProxyError(ErrorCodes.POOL_FAILING, 503, `pool ${this.name} cannot start workers: ${message}`, 1),
      );
    }
  }

  // ---- failing ----------------------------------------------------------------------

  private failingError(): ProxyError {
    return this.crashes.error(this.reportedStartError !== undefined ? this.lastStartError : undefined);
  }

  private onProbe(): void {
    if (this.shuttingDown || this.state === 'stopped') {
      this.crashes.probeGone();
      return;
    }
    this.spawn().probe = true;
  }

  // ---- scaling ----------------------------------------------------------------------

  /** Spawns what the mode wants now; re-arms itself for rate rounds and crash back-off. */
  private scale(): void {
    if (this.crashes.failing || this.shuttingDown || this.state === 'stopped') return;
    const now = this.clock.now();
    const c = countWorkers(this.slots, this.queue.length);
    // While stopping, only waiting requests justify a new worker.
    const scaling: ScalingConfig = this.state === 'running' ? this.scaling : { ...this.scaling, pm: 'ondemand' };
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
    // Memory may allow fewer; those for waiting requests are retried when memory comes back.
    const n = this.mem ? this.mem.admit(plan.spawn, Math.min(plan.spawn, c.queued - c.idle - c.spawning)) : plan.spawn;
    // Memory refusing the spawns logged its own reason: max_children holds back only once it is reached.
    this.noteMaxChildren(plan.atMaxChildren && this.slots.size + n >= this.scaling.maxChildren, c);
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
  private noteMaxChildren(at: boolean, c: ReturnType<typeof countWorkers>): void {
    if (at && !this.atMaxChildren) {
      this.stats.maxChildrenReached++;
      this.log.warn(
        { code: ErrorCodes.MAX_CHILDREN, maxChildren: this.scaling.maxChildren, busy: c.busy, spawning: c.spawning, retiring: c.retiring, queued: c.queued, times: this.stats.maxChildrenReached },
        `pool ${this.name} reached max_children (${this.scaling.maxChildren}); requests wait in the queue`,
      );
    }
    this.atMaxChildren = at;
  }

  private onIdleTimer(): void {
    if (this.shuttingDown) return;
    const now = this.clock.now();
    const since = this.idle.map((s) => s.idleSince);
    const plan = planIdleStops(this.scaling, since, now);
    if (plan.stop > 0) {
      const idleTimeout = this.cfg.idleTimeout > 0 ? this.cfg.idleTimeout : Infinity;
      for (const slot of this.idle.slice(0, plan.stop)) {
        this.retire(slot, now - slot.idleSince >= idleTimeout ? 'idle_timeout' : 'scale_down');
      }
    }
    if (plan.recheckAt !== undefined) this.idleTimer.armAt(plan.recheckAt);
  }

  private checkAllExited(): void {
    if (this.allExited !== undefined && this.slots.size === 0) {
      const r = this.allExited;
      this.allExited = undefined;
      r();
    }
  }
}

