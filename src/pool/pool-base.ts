/**
 * What external and spawned pools share: the front door (dispatch, refusals while
 * stopping or failing), the bounded queue and its rejections, counters, and the
 * stop sequence (drain for up to timeoutMs, then force). Subclasses say how to start a
 * request now (startNow) and what to do when one had to wait (onQueued).
 */
import { ErrorCodes, ProxyError, refusalError, type ErrorCode } from '../errors.js';
import { EpisodeLimiter } from '../log/episode-limiter.js';
import type { Logger } from '../log/log.js';
import type { PoolConfig } from '../config/types.js';
import type { Exchange } from '../protocol/exchange.js';
import { WallClock, type Clock } from '../util/clock.js';
import { RequestQueue, type QueueRefusal } from './queue.js';
import { copyCounters, zeroCounters } from './counters.js';
import { PoolStats } from './stats.js';
import type { AuthorizerRules, Pool, PoolSnapshot, ScriptRules, StopReason, WarmStart } from './types.js';

export type PoolState = 'running' | 'stopping' | 'stopped';

type RejectCause = keyof PoolStats['rejected'];

/** A flood of refusals: the first logged at once, then one count per code per this many ms. */
const REJECT_LOG_INTERVAL_MS = 1000;

/** Every field a snapshot has (copyCounters says why one shape): snapshot() copies it, fillSnapshot sets what its kind has. */
const SNAPSHOT_SHAPE: PoolSnapshot = {
  ...zeroCounters(),
  name: '',
  kind: 'external',
  pm: undefined,
  state: undefined,
  queued: 0,
  queueLimit: 0,
  maxChildren: undefined,
  capacity: undefined,
  active: 0,
  workers: [],
  backends: [],
  memory: undefined,
  slotsPerWorker: undefined,
  preload: undefined,
  direct: undefined,
  directFallback: undefined,
  cpu: undefined,
};

export abstract class PoolBase implements Pool {
  readonly name: string;
  protected cfg: PoolConfig;
  protected readonly log: Logger;
  protected readonly clock: Clock;
  /** Epoch times in the status, from the monotonic clock. */
  protected readonly wall: WallClock;
  protected readonly queue: RequestQueue;
  readonly stats = new PoolStats();
  readonly scriptRules: ScriptRules | undefined;
  readonly authorizer: AuthorizerRules | undefined;
  readonly script: string | undefined;
  /** SCRIPT_FILENAME set to `script`, for params.override. */
  private readonly scriptOverride: readonly string[] | undefined;
  protected state: PoolState = 'running';
  /** Set once stop()'s drain time ran out: requests still running are cut. */
  protected forced = false;

  private drained: (() => void) | undefined;
  private stopping: Promise<void> | undefined;
  private readonly rejectEpisodes: EpisodeLimiter<ErrorCode>;

  constructor(cfg: PoolConfig, log: Logger, clock: Clock) {
    this.name = cfg.name;
    this.cfg = cfg;
    this.log = log;
    this.clock = clock;
    this.wall = new WallClock(clock);
    const extensions = cfg.limitExtensions ?? [];
    const roots = cfg.scriptRoots ?? [];
    this.scriptRules = extensions.length > 0 || roots.length > 0 ? { extensions, roots } : undefined;
    this.authorizer = cfg.authorizer === undefined ? undefined : { pool: cfg.authorizer, cacheMs: cfg.authorizerCache ?? 0, cacheKey: cfg.authorizerCacheKey ?? [] };
    // CGI variables are latin1 strings of bytes; the path is UTF-8 on disk.
    this.script = cfg.script === undefined ? undefined : Buffer.from(cfg.script, 'utf8').toString('latin1');
    this.scriptOverride = this.script === undefined ? undefined : ['SCRIPT_FILENAME', this.script];
    this.rejectEpisodes = new EpisodeLimiter({ intervalMs: REJECT_LOG_INTERVAL_MS, timers: clock, summary: (code, n) => this.logRejectRepeats(code, n) });
    this.queue = new RequestQueue(clock, Math.max(0, cfg.queueLimit), Math.max(0, cfg.queueTimeout), {
      timeout: (ex, waited) => this.onQueueTimeout(ex, waited),
      aborted: (ex) => this.onQueuedAbort(ex),
      shed: (ex) => this.reject(ex, 'queueFull', this.queueFull('growing')),
      spawning: () => this.spawning(),
    }, Math.max(0, cfg.queueMaxWait ?? 0));
  }

  /** Starts the request on a free backend or worker now; false when none is free. */
  protected abstract startNow(ex: Exchange): boolean;
  /** A request was queued (grow the pool if it may). */
  protected abstract onQueued(): void;
  /** Refuses new requests for a pool-specific reason (a failing pool), or undefined. */
  protected abstract refusal(): ProxyError | undefined;
  /** After the drain: stop workers / close connections; resolves when everything is gone. */
  protected abstract shutdown(reason: StopReason): Promise<void>;
  protected abstract fillSnapshot(s: PoolSnapshot): void;
  /** Targets being started that will each take a queued request: they do not use up queue_limit. */
  protected starting(): number {
    return 0;
  }
  /**
   * Targets that may still be started for waiting requests (room under max_children).
   * A request one of them will take does not use up queue_limit either: queue_limit
   * bounds the requests waiting beyond the workers being started, so queue_limit 0
   * still lets an ondemand pool spawn a worker for a request.
   */
  protected growable(): number {
    return 0;
  }
  /** Seats of targets being started and how long a request waits for one (past queue_timeout); undefined when none starts. */
  protected spawning(): { seats: number; waitMs: number } | undefined {
    return undefined;
  }
  abstract start(warm?: WarmStart): Promise<void>;

  dispatch(ex: Exchange): void {
    this.stats.accepted++;
    ex.pool = this.name;
    if (ex.finished) return;
    if (this.scriptOverride !== undefined) ex.params.override(this.scriptOverride);
    if (this.state !== 'running') {
      this.reject(ex, 'shuttingDown', new ProxyError(ErrorCodes.SHUTTING_DOWN, 503, `pool ${this.name} is shutting down`, 1));
      return;
    }
    const refused = this.refusal();
    if (refused) {
      this.reject(ex, 'failing', refused);
      return;
    }
    this.queue.arrival(this.starting() > 0);
    if (this.queue.length === 0 && this.startNow(ex)) return;
    const full = this.queue.push(ex, this.starting() + this.growable());
    if (full !== undefined) {
      this.reject(ex, 'queueFull', this.queueFull(full));
      return;
    }
    this.onQueued();
  }

  /** The bound a growing queue has moves with the measured rate: its message names the rule, the log line the number. */
  private queueFull(why: QueueRefusal): ProxyError {
    return this.prebuilt(ErrorCodes.QUEUE_FULL, why === 'limit' ? this.queue.limit : why === 'growing' ? -1 : -2, () =>
      why === 'growing'
        ? `pool ${this.name}: queue full (requests arrive faster than the ${this.targetNoun()}s finish them; more would wait past queue_max_wait ${this.cfg.queueMaxWait} ms)`
        : why === 'late'
          ? `pool ${this.name}: queue full (a request queued now would wait past queue_timeout ${this.cfg.queueTimeout} ms)`
          : `pool ${this.name}: queue full (${this.queue.limit} waiting)`,
    );
  }

  stop(timeoutMs: number, reason: StopReason = 'shutdown'): Promise<void> {
    this.stopping ??= this.runStop(timeoutMs, reason);
    return this.stopping;
  }

  snapshot(): PoolSnapshot {
    const s: PoolSnapshot = { ...SNAPSHOT_SHAPE };
    copyCounters(s, this.stats);
    s.maxQueued = this.queue.maxLength;
    s.queueWait = this.queue.waits();
    s.name = this.name;
    s.state = this.state;
    s.queued = this.queue.length;
    s.queueLimit = this.queue.limit;
    s.active = this.stats.active;
    s.workers = [];
    s.backends = [];
    this.fillSnapshot(s);
    return s;
  }

  // ---- for subclasses ---------------------------------------------------------------

  /** Answers a request that ran (or was about to) with an error, and counts it. */
  protected fail(ex: Exchange, err: ProxyError): void {
    if (ex.finished) return;
    this.stats.error(err);
    // A worker that speaks another protocol than `backend` fails every request: say so, with what it answered.
    if (err.code === ErrorCodes.BACKEND_PROTOCOL && this.rejectEpisodes.hit(err.code)) {
      this.log.warn({ code: err.code, backend: this.cfg.backend }, `pool ${this.name} (backend: ${this.cfg.backend}): ${err.message}; answered 502 (does it speak ${this.cfg.backend === 'scgi' ? 'SCGI' : 'FastCGI'}? fcgi-pm check says when the command and backend disagree)`);
    }
    ex.respondError(err);
  }

  /** Refuses a request with 503 (queue full / timeout, failing, shutting down): counted, logged at most once a second per cause. */
  protected reject(ex: Exchange, cause: RejectCause, err: ProxyError, extra?: Record<string, unknown>): void {
    this.stats.rejected[cause]++;
    this.logReject(cause, err.code, err.message, extra);
    ex.respondError(err);
  }

  /** Answers every queued request with `err` (pool failing, spawn failure, all backends down). */
  protected rejectQueued(cause: RejectCause | undefined, err: ProxyError): number {
    const all = this.queue.drain();
    for (const ex of all) {
      if (cause) {
        this.stats.rejected[cause]++;
        ex.respondError(err);
      } else this.fail(ex, err);
    }
    if (all.length > 0 && cause) this.logReject(cause, err.code, err.message, { answered: all.length });
    this.checkDrained();
    return all.length;
  }

  /** Call whenever a request ends or leaves the queue: resolves stop()'s drain wait. */
  protected checkDrained(): void {
    if (this.drained && this.queue.length === 0 && this.stats.active === 0) {
      const d = this.drained;
      this.drained = undefined;
      d();
    }
  }

  protected requestEnded(): void {
    this.stats.active--;
    this.queue.departed();
    if (this.drained) this.checkDrained();
  }

  // ---- internals ---------------------------------------------------------------------

  /** Routine 503s, one shared stackless error per kind, rebuilt when the limit in its message changes (reload). */
  private readonly refusals = new Map<ErrorCode, { limit: number; err: ProxyError }>();

  private prebuilt(code: ErrorCode, limit: number, message: () => string): ProxyError {
    const hit = this.refusals.get(code);
    if (hit !== undefined && hit.limit === limit) return hit.err;
    const err = refusalError(code, 503, message(), 1);
    this.refusals.set(code, { limit, err });
    return err;
  }

  private onQueueTimeout(ex: Exchange, waited: number): void {
    this.queue.departed();
    this.reject(
      ex,
      'queueTimeout',
      this.prebuilt(ErrorCodes.QUEUE_TIMEOUT, this.cfg.queueTimeout, () => `pool ${this.name}: no free ${this.targetNoun()} within ${this.cfg.queueTimeout} ms`),
      { waitedMs: Math.round(waited) },
    );
    this.checkDrained();
  }

  private onQueuedAbort(_ex: Exchange): void {
    this.queue.departed();
    this.stats.aborted++;
    this.checkDrained();
  }

  protected targetNoun(): string {
    return 'backend';
  }

  private logReject(cause: RejectCause, code: ErrorCode, message: string, extra?: Record<string, unknown>): void {
    if (!this.rejectEpisodes.hit(code)) return;
    this.log.warn(
      { code, queued: this.queue.length, queueLimit: this.queue.effectiveLimit, active: this.stats.active, rejected: this.stats.rejected[cause], ...extra },
      message,
    );
  }

  private logRejectRepeats(code: ErrorCode, repeats: number): void {
    this.log.warn(
      { code, repeats, queued: this.queue.length, active: this.stats.active },
      `pool ${this.name}: ${repeats} more request${repeats === 1 ? '' : 's'} refused (${code}) within ${REJECT_LOG_INTERVAL_MS} ms`,
    );
  }

  private async runStop(timeoutMs: number, reason: StopReason): Promise<void> {
    if (this.state === 'running') this.state = 'stopping';
    this.log.info({ queued: this.queue.length, active: this.stats.active, timeoutMs }, `pool ${this.name} stopping`);
    if (this.queue.length > 0 || this.stats.active > 0) {
      await new Promise<void>((resolve) => {
        const t = this.clock.setTimer(() => {
          this.drained = undefined;
          resolve();
        }, Math.max(0, timeoutMs));
        this.drained = () => {
          this.clock.clearTimer(t);
          resolve();
        };
      });
    }
    this.forced = this.queue.length > 0 || this.stats.active > 0;
    if (this.forced) {
      this.log.warn({ code: ErrorCodes.SHUTDOWN_FORCED, queued: this.queue.length, active: this.stats.active, timeoutMs }, `pool ${this.name}: requests still unfinished after the shutdown timeout; cutting them`);
    }
    this.rejectQueued('shuttingDown', new ProxyError(ErrorCodes.SHUTTING_DOWN, 503, `pool ${this.name} is shutting down`, 1));
    await this.shutdown(reason);
    this.queue.dispose();
    this.rejectEpisodes.flush();
    this.state = 'stopped';
    this.log.info({ completed: this.stats.completed }, `pool ${this.name} stopped`);
  }
}
