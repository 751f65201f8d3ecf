/**
 * An `accept: direct` pool: the front end connects to the pool's own socket and the
 * workers accept on it themselves (fd 0), as under spawn-fcgi or PHP-FPM; fcgi-pm stays
 * out of the data path. Its workers are the process side's like any pool's
 * (workers/supervisor.ts: the table, exit verdicts at burial, crash back-off and breaker,
 * scaling, max_lifetime, memory caps, memory_limit and the budget, the pool's cgroup and
 * OOM score, drain and rolling restart). What is its own, the request side:
 *
 *   watch    the socket's watch wakes it once per arriving connection; it looks at the
 *            workers (accept-watch.ts) and the supervisor spawns for connections waiting
 *            beyond the idle ones, in the same tick;
 *   sample   every SAMPLE_MS each worker's /proc state, reported as the supervisor's
 *            load (accept-watch.ts), and scale-down from measured concurrency;
 *   birth    the pool's WorkerFactory, with the shared socket as fd 0, the script guard,
 *            and max_requests as the worker's own limit (php-cgi's PHP_FCGI_MAX_REQUESTS,
 *            fcgi-pm-wsgi's FCGI_PM_MAX_REQUESTS: a worker that exits 0 by itself is
 *            recycled, exit-verdict.ts); with `preload` a fork of the pool's parent,
 *            which holds the shared socket (fork-server.ts share()) and never accepts.
 *
 * Its dispatch() is the overflow: requests that reach the pool's normal listeners (nginx's
 * `backup` server, when the direct socket's backlog is full) queue here as in any pool
 * (queue_limit, queue_timeout, 503, the access log) and go to the direct socket through
 * an Endpoint, at most max_children at once; a full backlog (EAGAIN) sends the request
 * back to the head of the queue for the next try.
 */
import fs from 'node:fs';
import type { PoolConfig } from '../../config/types.js';
import { DIRECT_BACKLOG_DEFAULT, runsPhpCgi, wsgiAdapterIndex } from '../../config/schema.js';
import { ErrorCodes, ProxyError } from '../../errors.js';
import type { Exchange } from '../../protocol/exchange.js';
import type { Endpoint, UpstreamOutcome } from '../../upstream/types.js';
import { formatBacktrace, requestBacktrace } from '../../worker/php-backtrace.js';
import { SharedSocket, type QueueWatch } from '../../worker/shared-socket.js';
import type { WorkerFactory, WorkerSpec } from '../../worker/types.js';
import { OneTimer } from '../../util/clock.js';
import { PoolBase } from '../pool-base.js';
import type { EndpointFactory, PoolActionReport, PoolSnapshot, StopReason, WarmStart } from '../types.js';
import { workerSnapshot, type SlotView } from '../workers/slot.js';
import { Supervisor, type SupervisorDeps, type SupervisorHooks } from '../workers/supervisor.js';
import { AcceptWatch, SAMPLE_MS } from './accept-watch.js';
import { writeGuard } from './php-guard.js';

export { SAMPLE_MS } from './accept-watch.js';
/** When a new worker is looked at (ms after it runs): php-cgi is in accept() within a few ms. */
const FRESH_LOOKS_MS = [15, 50];
/** While the backlog is full, waiting overflow requests look again after this long. */
const OVERFLOW_RETRY_MS = 1;

export interface DirectPoolDeps extends SupervisorDeps {
  endpointFactory: EndpointFactory;
}

/** The environment variables in which a worker is told its own request limit. */
const SELF_LIMITS = ['PHP_FCGI_MAX_REQUESTS', 'FCGI_PM_MAX_REQUESTS'] as const;

export class DirectPool extends PoolBase {
  private readonly deps: DirectPoolDeps;
  private socket: SharedSocket | undefined;
  private watch: QueueWatch | undefined;
  /** @internal The worker processes (exposed for tests that look at them). */
  readonly supervisor: Supervisor;
  private readonly accepts: AcceptWatch;
  private readonly tickTimer: OneTimer;
  private readonly retryTimer: OneTimer;
  private lookQueued = false;
  private endpoint: Endpoint | undefined;
  /** Overflow requests running on the direct socket. */
  private overflowActive = 0;
  /** Connections the watch saw arrive (direct ones and the overflow's). */
  private arrivals = 0;
  private guard: { file: string; remove(): void } | undefined;
  private startedEpoch = Date.now();
  /** Its workers run php-cgi: the slow log reads their PHP stack. */
  private readonly phpCgi: boolean;

  constructor(cfg: PoolConfig, deps: DirectPoolDeps) {
    super(cfg, deps.logger, deps.clock);
    this.phpCgi = cfg.command !== undefined && runsPhpCgi(cfg.command);
    // A worker exits 0 by itself only after its own limit (exit-verdict.ts): php-cgi's
    // PHP_FCGI_MAX_REQUESTS, fcgi-pm-wsgi's FCGI_PM_MAX_REQUESTS.
    const adapter = cfg.command !== undefined && wsgiAdapterIndex(cfg.command) >= 0;
    const own = adapter ? 'FCGI_PM_MAX_REQUESTS' : 'PHP_FCGI_MAX_REQUESTS';
    const limit = own in cfg.env ? Number(cfg.env[own]) : cfg.maxRequests;
    const selfRecycles = cfg.command !== undefined && (runsPhpCgi(cfg.command) || adapter) && limit > 0;
    this.deps = { ...deps, workerFactory: this.birth(deps.workerFactory), counting: { served: 'sampled', selfRecycles }, acceptsItself: true };
    const clock = deps.clock;
    const hooks: SupervisorHooks = {
      // Connections waiting for a worker: in the accept queue, and the overflow's beyond it.
      waiting: () => (this.socket?.queued().waiting ?? 0) + this.queue.length,
      poolState: () => this.state,
      seats: (slot) => [this.accepts.seatFor(slot)],
      connect: () => undefined,
      offer: () => this.fresh(),
      withdraw: () => undefined,
      // The requests it runs are the front end's: it answers them when the connection closes.
      cut: () => undefined,
      lost: () => undefined,
      unhold: () => true,
      refuseQueued: (err) => this.rejectQueued('failing', err),
      // Never by each worker's own idle time (accept() wakes workers first-in first-out):
      // accept-watch.ts stops idle workers from the measured concurrency.
      idleWorkers: () => [],
      pump: () => this.pump(),
      checkDrained: () => this.checkDrained(),
    };
    this.supervisor = new Supervisor(cfg, this.deps, hooks, this.stats);
    this.accepts = new AcceptWatch({
      clock,
      log: deps.logger,
      scaling: { pm: cfg.pm, maxChildren: cfg.maxChildren, startChildren: cfg.startChildren, minSpare: cfg.minSpare, maxSpare: cfg.maxSpare, maxSpawnRate: cfg.maxSpawnRate, idleTimeout: cfg.idleTimeout },
      requestTimeout: cfg.requestTimeout,
      slowRequest: cfg.slowRequest,
      onSlow: (slot, pid, elapsedMs) => this.slowRequest(slot, pid, elapsedMs),
      waiting: () => this.socket?.queued().waiting ?? 0,
    });
    this.tickTimer = new OneTimer(clock, () => this.tick());
    this.retryTimer = new OneTimer(clock, () => this.pump());
  }

  /**
   * How a worker of this pool is born: the pool's factory, given the shared socket as
   * fd 0, the script guard, and php-cgi's own request limit (max_requests plus jitter).
   */
  private birth(factory: WorkerFactory): WorkerFactory {
    return (spec, logger, id, owner) => factory(this.workerSpec(spec), logger, id, owner);
  }

  private workerSpec(spec: WorkerSpec): WorkerSpec {
    const env = { ...spec.env };
    const max = this.cfg.maxRequests;
    if (!SELF_LIMITS.some((k) => k in this.cfg.env)) {
      const jitter = max > 0 && this.cfg.maxRequestsJitter > 0 ? Math.floor(this.deps.random() * (this.cfg.maxRequestsJitter + 1)) : 0;
      // php-cgi reads the one, fcgi-pm-wsgi the other; each ignores what is not its own.
      for (const k of SELF_LIMITS) env[k] = String(max > 0 ? max + jitter : 0);
    }
    const command = this.guard === undefined ? spec.command : [...spec.command, '-d', `auto_prepend_file=${this.guard.file}`];
    return { ...spec, env, command, sharedSocket: { fd: this.socket!.fd, address: this.socket!.address } };
  }

  async start(warm?: WarmStart): Promise<void> {
    const cfg = this.cfg;
    const spec = this.deps.spec;
    this.socket = SharedSocket.acquire(cfg.directListen!, { backlog: cfg.directBacklog ?? DIRECT_BACKLOG_DEFAULT, mode: cfg.directSocketMode ?? 0o660, uid: spec.uid, gid: spec.gid });
    // preload: the parent holds the shared socket for its forks; it imports the
    // application now, so the first worker is a fork.
    const forks = this.deps.forkServer;
    if (forks !== undefined) {
      forks.share(this.socket.fd);
      await forks.renew();
    }
    this.accepts.attach(this.supervisor, fs.fstatSync(this.socket.fd).ino);
    if (this.scriptRules !== undefined) this.guard = writeGuard(this.name, this.scriptRules);
    this.endpoint = this.deps.endpointFactory(
      this.socket.address,
      { protocol: cfg.backend, connectTimeout: cfg.connectTimeout, readTimeout: cfg.readTimeout, keepAlive: false, maxIdle: 1, drainOnAbort: false },
      this.log,
    );
    this.startedEpoch = Date.now();
    this.log.info(
      { address: this.socket.address.text, backlog: this.socket.queued().backlog, pm: cfg.pm, maxChildren: cfg.maxChildren, guard: this.guard?.file },
      `pool ${this.name} ready: workers accept on ${this.socket.address.text} themselves`,
    );
    this.updateWatch();
    await this.supervisor.start(warm);
    this.tick();
  }

  // ---- the request side: arrivals and sampling ---------------------------------------

  private onArrival(): void {
    this.arrivals++;
    // Coalesce a burst of wake-ups into one look at the workers.
    if (this.lookQueued) return;
    this.lookQueued = true;
    setImmediate(() => {
      this.lookQueued = false;
      if (this.state === 'stopped') return;
      this.accepts.look(false);
      this.updateWatch();
      this.armTick();
    });
  }

  /**
   * A worker is running: looked at soon, twice, so that one that recycles itself within
   * its first sampling round was seen at work (exit-verdict.ts: exit 0 then is a recycle).
   */
  private fresh(): void {
    this.updateWatch();
    for (const ms of FRESH_LOOKS_MS) this.clock.setTimer(this.freshLook, ms);
  }

  private readonly freshLook = (): void => {
    if (this.state !== 'stopped') this.accepts.look(false);
  };

  /**
   * slow_request on the direct path: fcgi-pm never sees the request, so the line has the
   * worker and, for php-cgi, the PHP stack read from it (the script is its outermost file).
   */
  private slowRequest(slot: SlotView, pid: number, elapsedMs: number): void {
    this.stats.slowRequests++;
    const trace = this.phpCgi ? requestBacktrace(pid, undefined) : undefined;
    const frames = trace === undefined || typeof trace === 'string' ? undefined : trace;
    const backtrace = frames === undefined ? undefined : formatBacktrace(frames);
    const script = frames?.[frames.length - 1]?.file;
    const elapsed = Math.round(elapsedMs);
    slot.log.warn(
      { code: ErrorCodes.SLOW_REQUEST, wpid: pid, script, elapsedMs: elapsed, slowRequest: this.cfg.slowRequest, slowRequests: this.stats.slowRequests, backtrace, backtraceError: typeof trace === 'string' ? trace : undefined },
      `slow request: worker ${pid} still on one connection after ${elapsed} ms${backtrace === undefined || backtrace.length === 0 ? '' : `: ${backtrace.join(' ← ')}`}`,
    );
  }

  private tick(): void {
    if (this.state === 'stopped') return;
    this.accepts.look(true);
    this.updateWatch();
    this.armTick();
  }

  /** Sampling runs while the pool has workers or connections wait for one. */
  private armTick(): void {
    if (this.supervisor.slots.size > 0 || (this.socket?.queued().waiting ?? 0) > 0 || this.queue.length > 0) {
      if (!this.tickTimer.armed) this.tickTimer.armAt(this.clock.now() + SAMPLE_MS);
    }
  }

  /**
   * The watch runs only while a worker may still be spawned: at max_children a wake-up
   * per connection would cost CPU on the data path for nothing (a static pool at full
   * strength then costs the daemon nothing per request). A burial pumps the overflow,
   * which calls this again.
   */
  private updateWatch(): void {
    const wanted = this.state === 'running' && this.socket !== undefined && this.supervisor.slots.size < this.cfg.maxChildren;
    if (wanted && this.watch === undefined) this.watch = this.socket!.watch(() => this.onArrival());
    else if (!wanted && this.watch !== undefined) {
      this.watch.stop();
      this.watch = undefined;
    }
    this.armTick();
  }

  // ---- operator actions ---------------------------------------------------------------

  drain(): Promise<PoolActionReport> {
    return this.supervisor.drain();
  }

  rollingRestart(): Promise<PoolActionReport> {
    return this.supervisor.rollingRestart();
  }

  // ---- the overflow --------------------------------------------------------------------

  protected startNow(ex: Exchange): boolean {
    if (this.endpoint === undefined || this.overflowActive >= this.cfg.maxChildren) return false;
    const q = this.socket!.queued();
    if (q.waiting >= q.backlog) {
      // Full: it waits in our queue (onQueued looks again soon).
      return false;
    }
    this.run(ex);
    return true;
  }

  private run(ex: Exchange): void {
    this.stats.started();
    this.overflowActive++;
    ex.backend = this.endpoint!.address.text;
    this.endpoint!.run(ex, (o) => this.onOutcome(ex, o));
  }

  private onOutcome(ex: Exchange, o: UpstreamOutcome): void {
    this.overflowActive--;
    if (o.kind === 'failed') {
      // A full backlog (the connect failed): the request never reached a worker; it keeps
      // its place in line. Not a worker that died under it: that is the request's answer.
      if (o.retryable && o.facts.failure === 'connect' && !this.forced && !ex.finished && ex.rewind()) {
        this.queue.unshift(ex);
        this.requestEnded();
        this.retryTimer.armAt(this.clock.now() + OVERFLOW_RETRY_MS);
        return;
      }
      this.fail(ex, o.error);
    } else if (o.kind === 'done') this.stats.completed++;
    else this.stats.aborted++;
    this.requestEnded();
    this.pump();
  }

  /**
   * Sends waiting overflow requests on while the backlog has room (the kernel says when a
   * worker took a connection only by the queue getting shorter, so a full one is looked
   * at again every OVERFLOW_RETRY_MS rather than connected to in vain).
   */
  private pump(): void {
    if (this.queue.length > 0 && this.socket !== undefined) {
      const q = this.socket.queued();
      let room = Math.min(q.backlog - q.waiting, this.cfg.maxChildren - this.overflowActive);
      while (room-- > 0 && this.queue.length > 0) this.run(this.queue.shift()!);
      if (this.queue.length > 0) this.retryTimer.armAt(this.clock.now() + OVERFLOW_RETRY_MS);
    }
    this.checkDrained();
  }

  protected onQueued(): void {
    this.retryTimer.armAt(this.clock.now() + OVERFLOW_RETRY_MS);
  }

  protected refusal(): ProxyError | undefined {
    // The breaker stops spawning, not serving: a worker still alive takes what it can.
    return this.supervisor.failing && this.supervisor.slots.size === 0 ? this.supervisor.failingError() : undefined;
  }

  protected override growable(): number {
    return Math.max(0, this.cfg.maxChildren - this.overflowActive);
  }

  protected override targetNoun(): string {
    return 'worker';
  }

  protected async shutdown(stopReason: StopReason): Promise<void> {
    const reason = stopReason === 'upgrade' ? 'shutdown' : stopReason;
    this.watch?.stop();
    this.watch = undefined;
    this.tickTimer.cancel();
    this.retryTimer.cancel();
    this.endpoint?.destroy();
    await this.supervisor.shutdown(reason);
    await this.deps.forkServer?.stop();
    this.socket?.release();
    this.socket = undefined;
    this.guard?.remove();
  }

  protected fillSnapshot(s: PoolSnapshot): void {
    s.kind = 'direct';
    s.pm = this.cfg.pm;
    s.maxChildren = this.cfg.maxChildren;
    const q = this.socket?.queued();
    if (this.state === 'running' && this.supervisor.cannotServe()) s.state = 'failing';
    s.direct = {
      address: this.cfg.directListen!.text,
      waiting: q?.waiting,
      backlog: q?.backlog,
      arrivals: this.arrivals,
      overflowActive: this.overflowActive,
      guard: this.guard !== undefined,
      since: this.startedEpoch,
    };
    for (const slot of this.supervisor.slots) s.workers.push(this.workerSnapshot(slot));
    this.supervisor.fill(s);
    const parent = this.deps.forkServer?.parent;
    if (parent !== undefined) {
      const m = this.supervisor.mem?.preloadParent();
      s.preload = { ...parent, memory: m?.pid === parent.pid ? m.memory : undefined, measure: m?.pid === parent.pid ? m.measure : undefined };
    }
  }

  private workerSnapshot(slot: SlotView): PoolSnapshot['workers'][number] {
    const w = workerSnapshot(slot, this.wall);
    w.sampled = true;
    if (slot.state === 'up' && this.accepts.seat(slot)?.unknown === true) w.state = 'unknown';
    return w;
  }
}
