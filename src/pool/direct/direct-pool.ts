/**
 * An `accept: direct` pool: the front end connects to the pool's own socket and the
 * workers accept on it themselves (fd 0), as under spawn-fcgi or PHP-FPM; fcgi-pm stays
 * out of the data path. What it does instead (PHP-FPM's ondemand master, without a
 * scoreboard):
 *
 *   spawn    the socket's watch wakes it once per arriving connection; when connections
 *            wait beyond the workers blocked in accept() and those starting, it spawns
 *            the difference (up to max_children) in the same tick;
 *   sample   every SAMPLE_MS each worker's /proc state (worker/accept-state.ts): idle
 *            (in accept, no CPU since), busy (holding a connection, since when);
 *   stop     idle_timeout (pm ondemand/dynamic), max_lifetime, max_memory (SIGTERM: php-cgi
 *            finishes its request, then exits), max_memory_hard and request_timeout
 *            (SIGKILL); max_requests is php-cgi's own PHP_FCGI_MAX_REQUESTS, and a worker
 *            that exits 0 by itself was recycled;
 *   crash    the worker's exit verdict (worker/exit-policy.ts): early crashes back off and
 *            count toward crash_limit, a kill after it served is replaced at once.
 *
 * Its dispatch() is the overflow: requests that reach the pool's normal listeners (nginx's
 * `backup` server, when the direct socket's backlog is full) queue here as in any pool
 * (queue_limit, queue_timeout, 503, the access log) and go to the direct socket through
 * an Endpoint, at most max_children at once; a full backlog (EAGAIN) sends the request
 * back to the head of the queue for the next try.
 */
import fs from 'node:fs';
import type { PoolConfig } from '../../config/types.js';
import { ErrorCodes, ProxyError } from '../../errors.js';
import type { Logger } from '../../log/log.js';
import { checkWorker } from '../../memory/governor.js';
import { createSampler, type MemorySampler } from '../../memory/sampler.js';
import type { WorkerMemoryFigures } from '../../memory/types.js';
import type { Exchange } from '../../protocol/exchange.js';
import type { Endpoint, UpstreamOutcome } from '../../upstream/types.js';
import { readAcceptState } from '../../worker/accept-state.js';
import { CrashWindow } from '../../worker/exit-policy.js';
import { SharedSocket, type QueueWatch } from '../../worker/shared-socket.js';
import type { ExitVerdict, RetireReason, WorkerExit, WorkerOwner, WorkerSpec } from '../../worker/types.js';
import { Worker } from '../../worker/worker.js';
import { OneTimer, type Clock } from '../../util/clock.js';
import { PoolBase } from '../pool-base.js';
import type { EndpointFactory, PoolActionReport, PoolSnapshot, WorkerSnapshot } from '../types.js';
import { writeGuard } from './php-guard.js';

/** How often each worker's /proc state is read: idle stops land within this of idle_timeout. */
export const SAMPLE_MS = 200;
/** While the backlog is full, waiting overflow requests look again after this long. */
const OVERFLOW_RETRY_MS = 1;

type DirectState = 'spawning' | 'idle' | 'busy' | 'unknown' | 'stopping';

/** One worker and what sampling knows of it. */
class DirectWorker {
  readonly w: Worker;
  readonly startedAt: number;
  state: DirectState = 'spawning';
  cpuNs = -1;
  /** Clock ms it last did something (CPU moved, or held a connection). */
  activeAt: number;
  /** The connection it serves (socket inode) and since when. */
  conn: number | undefined;
  connSince = 0;
  /** Connections seen by sampling: a lower bound of what it served. */
  conns = 0;
  memory: WorkerMemoryFigures | undefined;
  /** SIGKILL sent: nothing more to decide about it. */
  killed = false;
  /** Why it was stopped (the first reason given). */
  reason: RetireReason | undefined;

  constructor(spawn: (owner: WorkerOwner) => Worker, clock: Clock) {
    const now = clock.now();
    this.startedAt = now;
    this.activeAt = now;
    // It takes its connections itself: the pool never sees it busy; what sampling counted is what it served.
    this.w = spawn({ clock, busy: () => false, requests: () => this.conns, reason: () => this.reason });
  }

  /** SIGTERM (SIGKILL after kill_timeout); resolves with its exit. */
  stop(reason: RetireReason): Promise<WorkerExit> {
    this.reason ??= reason;
    this.state = 'stopping';
    return this.w.stop();
  }
}

export interface DirectPoolDeps {
  logger: Logger;
  /** Logger for the workers (they bind {pool, worker} themselves). */
  workerLogger: Logger;
  clock: Clock;
  spec: WorkerSpec;
  endpointFactory: EndpointFactory;
  random: () => number;
  memorySampleInterval: number;
}

export class DirectPool extends PoolBase {
  private readonly deps: DirectPoolDeps;
  private socket: SharedSocket | undefined;
  private listenIno = 0;
  private watch: QueueWatch | undefined;
  private readonly workers = new Map<number, DirectWorker>();
  private nextId = 1;
  private readonly crashes: CrashWindow;
  /** Clock ms before which no worker is spawned (crash back-off). */
  private respawnAt = 0;
  private failingLogged = false;
  private readonly tickTimer: OneTimer;
  private readonly respawnTimer: OneTimer;
  private readonly retryTimer: OneTimer;
  private scaleQueued = false;
  private readonly sampler: MemorySampler;
  private lastMemoryAt = -Infinity;
  private endpoint: Endpoint | undefined;
  /** Overflow requests running on the direct socket. */
  private overflowActive = 0;
  /** Connections the watch saw arrive (direct ones and the overflow's). */
  private arrivals = 0;
  private atMax = false;
  private guard: { file: string; remove(): void } | undefined;
  private startedEpoch = Date.now();

  constructor(cfg: PoolConfig, deps: DirectPoolDeps) {
    super(cfg, deps.logger, deps.clock);
    this.deps = deps;
    this.crashes = new CrashWindow(cfg.crashLimit, cfg.crashWindow);
    this.tickTimer = new OneTimer(deps.clock, () => this.tick());
    this.respawnTimer = new OneTimer(deps.clock, () => this.maintain());
    this.retryTimer = new OneTimer(deps.clock, () => this.pump());
    this.sampler = createSampler();
  }

  async start(): Promise<void> {
    const cfg = this.cfg;
    const spec = this.deps.spec;
    this.socket = SharedSocket.acquire(cfg.directListen!, { backlog: cfg.directBacklog ?? cfg.maxChildren, mode: cfg.directSocketMode ?? 0o660, uid: spec.uid, gid: spec.gid });
    this.listenIno = fs.fstatSync(this.socket.fd).ino;
    if (this.scriptRules !== undefined) this.guard = writeGuard(this.name, this.scriptRules);
    this.endpoint = this.deps.endpointFactory(
      this.socket.address,
      { protocol: 'fastcgi', connectTimeout: cfg.connectTimeout, readTimeout: cfg.readTimeout, keepAlive: false, maxIdle: 1, drainOnAbort: false },
      this.log,
    );
    this.startedEpoch = Date.now();
    this.log.info(
      { address: this.socket.address.text, backlog: this.socket.queued().backlog, pm: cfg.pm, maxChildren: cfg.maxChildren, guard: this.guard?.file },
      `pool ${this.name} ready: workers accept on ${this.socket.address.text} themselves`,
    );
    this.maintain();
  }

  // ---- spawning ------------------------------------------------------------------------

  private onArrival(): void {
    this.arrivals++;
    // Coalesce a burst of wake-ups into one look at the queue.
    if (this.scaleQueued) return;
    this.scaleQueued = true;
    setImmediate(() => {
      this.scaleQueued = false;
      this.scale();
    });
  }

  /** Spawns workers for connections waiting beyond those that will take them. */
  private scale(): void {
    if (this.state !== 'running' || this.socket === undefined) return;
    const room = this.cfg.maxChildren - this.workers.size;
    const waiting = this.socket.queued().waiting;
    if (waiting === 0) {
      this.atMax = false;
      return;
    }
    if (room <= 0) {
      if (!this.atMax) {
        this.atMax = true;
        this.stats.maxChildrenReached++;
      }
      this.tickTimer.armAt(this.clock.now() + SAMPLE_MS);
      return;
    }
    let takers = 0;
    for (const dw of this.workers.values()) {
      if (dw.state === 'stopping') continue;
      if (dw.state === 'spawning') {
        takers++;
        continue;
      }
      const s = readAcceptState(dw.w.pid!, this.listenIno);
      if (s.accepting === true) takers++;
    }
    const want = Math.min(waiting - takers, room, this.cfg.maxSpawnRate);
    for (let i = 0; i < want; i++) if (!this.spawn()) break;
    if (want > 0) this.updateWatch();
    // Connections still waiting with nobody to take them: look again soon.
    this.tickTimer.armAt(this.clock.now() + (want > 0 ? SAMPLE_MS / 4 : SAMPLE_MS));
  }

  /**
   * The watch runs only while a worker may still be spawned: at max_children a wake-up
   * per connection would cost CPU on the data path for nothing (a static pool at full
   * strength then costs the daemon nothing per request). An exit calls maintain(),
   * which looks at the queue itself before watching again.
   */
  private updateWatch(): void {
    const wanted = this.state === 'running' && this.socket !== undefined && this.workers.size < this.cfg.maxChildren;
    if (wanted && this.watch === undefined) this.watch = this.socket!.watch(() => this.onArrival());
    else if (!wanted && this.watch !== undefined) {
      this.watch.stop();
      this.watch = undefined;
    }
  }

  /** Keeps the floor of static and dynamic pools; after a crash back-off. */
  private maintain(): void {
    if (this.state !== 'running') return;
    const floor = this.cfg.pm === 'static' ? this.cfg.maxChildren : this.cfg.pm === 'dynamic' ? Math.max(this.cfg.minSpare, 0) : 0;
    while (this.workers.size < floor) if (!this.spawn()) break;
    this.scale();
    this.updateWatch();
    if (this.workers.size > 0) this.tickTimer.armAt(this.clock.now() + SAMPLE_MS);
  }

  private spawn(): boolean {
    const now = this.clock.now();
    if (now < this.respawnAt) {
      this.respawnTimer.armAt(this.respawnAt);
      return false;
    }
    const id = this.nextId++;
    const spec = this.workerSpec();
    const dw = new DirectWorker((owner) => Worker.spawn(spec, this.deps.workerLogger, id, owner), this.clock);
    const w = dw.w;
    this.workers.set(id, dw);
    w.once('ready', () => this.stats.spawned(this.clock.now() - dw.startedAt));
    w.once('exit', (exit, verdict) => this.onExit(dw, exit, verdict));
    return true;
  }

  /** The pool's spec with the shared socket, and php-cgi's own request limit. */
  private workerSpec(): WorkerSpec {
    const spec = this.deps.spec;
    const env = { ...spec.env };
    const max = this.cfg.maxRequests;
    if (!('PHP_FCGI_MAX_REQUESTS' in this.cfg.env)) {
      const jitter = max > 0 && this.cfg.maxRequestsJitter > 0 ? Math.floor(this.deps.random() * (this.cfg.maxRequestsJitter + 1)) : 0;
      env['PHP_FCGI_MAX_REQUESTS'] = String(max > 0 ? max + jitter : 0);
    }
    const command = this.guard === undefined ? spec.command : [...spec.command, '-d', `auto_prepend_file=${this.guard.file}`];
    return { ...spec, env, command, sharedSocket: { fd: this.socket!.fd, address: this.socket!.address } };
  }

  private onExit(dw: DirectWorker, exit: WorkerExit, verdict: ExitVerdict): void {
    this.workers.delete(dw.w.id);
    if (dw.w.pid !== undefined) this.sampler.forget(dw.w.pid);
    const now = this.clock.now();
    if (verdict.crash) {
      this.stats.crashes++;
      if (verdict.early) {
        this.crashes.record(now);
        this.respawnAt = now + this.crashes.delay(now, dw.startedAt);
        if (this.crashes.failing(now) && !this.failingLogged) {
          this.failingLogged = true;
          this.log.error({ code: ErrorCodes.WORKER_CRASHED, crashes: this.crashes.count(now), crashWindow: this.cfg.crashWindow }, `pool ${this.name}: ${this.cfg.crashLimit} workers crashed within crash_window; spawning again in ${Math.round(this.respawnAt - now)} ms`);
        }
      }
    } else {
      this.failingLogged = false;
      // php-cgi exits 0 by itself after PHP_FCGI_MAX_REQUESTS.
      const reason = exit.reason ?? (exit.code === 0 && exit.signal === null ? 'max_requests' : undefined);
      if (reason !== undefined && reason !== 'shutdown' && reason !== 'reload') this.stats.recycled(reason);
    }
    this.maintain();
  }

  // ---- sampling ------------------------------------------------------------------------

  private tick(): void {
    if (this.state !== 'running' && this.workers.size === 0) return;
    const now = this.clock.now();
    const cfg = this.cfg;
    const sampleMemory = now - this.lastMemoryAt >= this.deps.memorySampleInterval;
    if (sampleMemory) this.lastMemoryAt = now;
    const mayStopIdle = (): boolean => cfg.pm === 'ondemand' || (cfg.pm === 'dynamic' && this.live() > cfg.minSpare);
    for (const dw of this.workers.values()) {
      const pid = dw.w.pid;
      if (pid === undefined || dw.killed) continue;
      const s = readAcceptState(pid, this.listenIno);
      if (s.gone) continue;
      if (s.cpuNs !== dw.cpuNs && dw.cpuNs >= 0) dw.activeAt = now;
      dw.cpuNs = s.cpuNs;
      const stopping = dw.state === 'stopping';
      if (s.accepting === true) {
        if (!stopping) dw.state = 'idle';
        dw.conn = undefined;
      } else if (s.conn !== undefined) {
        if (!stopping) dw.state = 'busy';
        dw.activeAt = now;
        if (s.conn !== dw.conn) {
          dw.conn = s.conn;
          dw.connSince = now;
          dw.conns++;
        }
      } else if (s.accepting === undefined) {
        if (!stopping) dw.state = 'unknown';
      } else if (dw.state !== 'spawning' && !stopping) {
        dw.state = 'busy';
      }
      // A retired worker may still run a request it took before the SIGTERM: the hard limits still hold.
      if (sampleMemory && this.checkMemory(dw, pid, now)) continue;
      if (cfg.requestTimeout > 0 && dw.conn !== undefined && now - dw.connSince > cfg.requestTimeout) {
        this.kill(dw, 'request_timeout', `worker ${pid} ran one request for over request_timeout (${cfg.requestTimeout} ms): killed`);
      } else if (stopping) {
        continue;
      } else if (cfg.maxLifetime > 0 && now - dw.startedAt >= cfg.maxLifetime) {
        this.retire(dw, 'max_lifetime');
      } else if (dw.state === 'idle' && now - dw.activeAt >= cfg.idleTimeout && mayStopIdle() && this.stillIdle(dw, pid)) {
        this.retire(dw, 'idle_timeout');
      }
    }
    this.scale();
    if (this.workers.size > 0) this.tickTimer.armAt(now + SAMPLE_MS);
  }

  /**
   * Read again right before an idle stop: the sample may be up to SAMPLE_MS old, and a
   * worker that took a connection since would get the SIGTERM mid-request (php-cgi then
   * finishes it, but a sleep in the script is cut short). Narrows that window to the
   * microseconds between this read and the signal.
   */
  private stillIdle(dw: DirectWorker, pid: number): boolean {
    const s = readAcceptState(pid, this.listenIno);
    return s.accepting === true && s.cpuNs === dw.cpuNs;
  }

  /** max_memory: retire (it finishes its request); max_memory_hard: kill now. True when it goes. */
  private checkMemory(dw: DirectWorker, pid: number, now: number): boolean {
    const sample = this.sampler.readNow(pid, now);
    if (sample === undefined) return false;
    const peak = Math.max(dw.memory?.peak ?? 0, sample.value);
    dw.memory = { pss: sample.pss, rss: sample.rss, anon: sample.anon, cpu: Math.round(sample.cpu * 10) / 10, measure: sample.measure, peak, sampledAt: Date.now() };
    const verdict = checkWorker(sample.value, { soft: this.cfg.maxMemory ?? 0, hard: this.cfg.maxMemoryHard ?? 0 });
    if (verdict === 'hard') {
      this.kill(dw, 'memory_hard', `worker ${pid} uses ${sample.value} bytes (${sample.measure}), over max_memory_hard: killed`);
      return true;
    }
    if (verdict === 'soft' && dw.state !== 'stopping') {
      this.log.info({ wpid: pid, value: sample.value, measure: sample.measure, maxMemory: this.cfg.maxMemory }, `worker ${pid} is over max_memory: recycling it after its request`);
      this.retire(dw, 'memory');
      return true;
    }
    return false;
  }

  private live(): number {
    let n = 0;
    for (const dw of this.workers.values()) if (dw.state !== 'stopping') n++;
    return n;
  }

  /** SIGTERM: php-cgi finishes the request it runs, then exits (kill_timeout → SIGKILL). */
  private retire(dw: DirectWorker, reason: RetireReason): void {
    void dw.stop(reason);
  }

  /** SIGKILL now: its request's client gets whatever the front end makes of a closed connection (nginx: 502). */
  private kill(dw: DirectWorker, reason: 'memory_hard' | 'request_timeout', msg: string): void {
    const pid = dw.w.pid!;
    dw.killed = true;
    this.log.warn({ code: reason === 'memory_hard' ? ErrorCodes.MEMORY_HARD_LIMIT : ErrorCodes.REQUEST_TIMEOUT, wpid: pid }, msg);
    void dw.stop(reason);
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }

  // ---- operator actions ---------------------------------------------------------------

  /** Retires every worker (php-cgi finishes the request it runs); static and dynamic pools start their floor again. */
  async drain(): Promise<PoolActionReport> {
    const before = new Set(this.workers.keys());
    const retired: number[] = [];
    for (const dw of [...this.workers.values()]) {
      if (dw.state === 'stopping' || dw.w.pid === undefined) continue;
      retired.push(dw.w.pid);
      this.retire(dw, 'drain');
    }
    return { pool: this.name, action: 'drain', retired, started: this.startedSince(before) };
  }

  /**
   * Replaces the workers one at a time: each is retired and its exit awaited before the
   * next, so the pool keeps all but one of them accepting (connections wait in the
   * backlog meanwhile, none is refused).
   */
  async rollingRestart(): Promise<PoolActionReport> {
    const before = new Set(this.workers.keys());
    const retired: number[] = [];
    for (const dw of [...this.workers.values()]) {
      if (dw.state === 'stopping' || dw.w.pid === undefined || this.state !== 'running') continue;
      retired.push(dw.w.pid);
      this.retire(dw, 'restart');
      await dw.w.exited;
    }
    return { pool: this.name, action: 'restart', retired, started: this.startedSince(before) };
  }

  private startedSince(before: ReadonlySet<number>): number[] {
    const out: number[] = [];
    for (const [id, dw] of this.workers) if (!before.has(id) && dw.w.pid !== undefined) out.push(dw.w.pid);
    return out;
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
      // A full backlog: the request never reached a worker; it keeps its place in line.
      if (o.retryable && !this.forced && !ex.finished && ex.rewind()) {
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
    const now = this.clock.now();
    if (this.workers.size === 0 && this.crashes.failing(now) && now < this.respawnAt) {
      return new ProxyError(ErrorCodes.WORKER_CRASHED, 503, `pool ${this.name}: workers keep crashing; trying again in ${Math.round(this.respawnAt - now)} ms`, 1);
    }
    return undefined;
  }

  protected override growable(): number {
    return Math.max(0, this.cfg.maxChildren - this.overflowActive);
  }

  protected override targetNoun(): string {
    return 'worker';
  }

  protected async shutdown(reason: 'shutdown' | 'reload'): Promise<void> {
    this.watch?.stop();
    this.watch = undefined;
    this.tickTimer.cancel();
    this.respawnTimer.cancel();
    this.retryTimer.cancel();
    this.endpoint?.destroy();
    const exits = [...this.workers.values()].map((dw) => dw.stop(reason));
    await Promise.all(exits);
    this.sampler.close();
    this.socket?.release();
    this.socket = undefined;
    this.guard?.remove();
  }

  protected fillSnapshot(s: PoolSnapshot): void {
    s.kind = 'direct';
    s.pm = this.cfg.pm;
    s.maxChildren = this.cfg.maxChildren;
    const q = this.socket?.queued();
    s.direct = {
      address: this.cfg.directListen!.text,
      waiting: q?.waiting,
      backlog: q?.backlog,
      arrivals: this.arrivals,
      overflowActive: this.overflowActive,
      guard: this.guard !== undefined,
      since: this.startedEpoch,
    };
    s.workers = [...this.workers.values()].map((dw): WorkerSnapshot => {
      const w = dw.w;
      const snap: WorkerSnapshot = {
        pid: w.pid ?? 0,
        state: dw.state,
        requests: dw.conns,
        startedAt: this.wall.at(dw.startedAt),
        lastUsedAt: this.wall.at(dw.activeAt),
        current: dw.conn !== undefined ? { uri: '', startedAt: this.wall.at(dw.connSince) } : undefined,
        sampled: true,
      };
      if (dw.memory !== undefined) snap.memory = dw.memory;
      return snap;
    });
  }
}
