/**
 * A pool of external backends ("Pen-like"): one Endpoint per address,
 * least-busy dispatch (fewest running requests, ties taken round-robin), at most
 * max_conns_per_backend each (else the request queues). A backend that looks down is
 * skipped for backend_down_time and the request, which never reached it, goes to the
 * next one; after its down time the next request probes it.
 */
import { ErrorCodes, ProxyError } from '../../errors.js';
import type { Logger } from '../../log/log.js';
import type { PoolConfig } from '../../config/types.js';
import type { Exchange } from '../../protocol/exchange.js';
import type { Endpoint, UpstreamOptions, UpstreamOutcome } from '../../upstream/types.js';
import { OneTimer, type Clock } from '../../util/clock.js';
import { PoolBase } from '../pool-base.js';
import type { EndpointFactory, PoolSnapshot } from '../types.js';

class Backend {
  readonly index: number;
  readonly endpoint: Endpoint;
  readonly address: string;
  /** Requests this pool has running on it (own count: a retry must not see a stale one). */
  active = 0;
  /** Monotonic ms until which it is skipped. */
  downUntil = -Infinity;
  /** It was marked down and has not answered since (to log "up again" once). */
  wasDown = false;

  constructor(index: number, endpoint: Endpoint) {
    this.index = index;
    this.endpoint = endpoint;
    this.address = endpoint.address.text;
  }
}

/** One request's trip through the backends; lives until the request ends. */
class Attempt {
  readonly ex: Exchange;
  backend: Backend | undefined;
  /** Backends that failed it before it reached them. */
  tried: Backend[] | undefined;
  readonly done: (o: UpstreamOutcome) => void;

  constructor(ex: Exchange, pool: ExternalPool) {
    this.ex = ex;
    this.done = (o) => pool.onOutcome(this, o);
  }
}

export class ExternalPool extends PoolBase {
  private readonly backends: Backend[];
  private rr = 0;
  private readonly upTimer: OneTimer;

  constructor(cfg: PoolConfig, log: Logger, clock: Clock, endpointFactory: EndpointFactory) {
    super(cfg, log, clock);
    const opts: UpstreamOptions = {
      protocol: cfg.backend,
      connectTimeout: cfg.connectTimeout,
      readTimeout: cfg.readTimeout,
      keepAlive: cfg.keepAlive,
      maxIdle: Math.max(1, cfg.maxConnsPerBackend),
      authorizerRole: cfg.authorizerRole ?? 'native',
    };
    // The endpoint adds its own {backend} binding.
    this.backends = cfg.backends.map((addr, i) => new Backend(i, endpointFactory(addr, opts, log)));
    // When a down backend's time is up, queued requests may go to it.
    this.upTimer = new OneTimer(clock, () => this.pump());
  }

  async start(): Promise<void> {
    this.log.info(
      { backends: this.backends.map((b) => b.address), maxConnsPerBackend: this.cfg.maxConnsPerBackend },
      `pool ${this.name} ready with ${this.backends.length} external backend(s)`,
    );
  }

  protected startNow(ex: Exchange): boolean {
    const b = this.pick(undefined);
    if (b === undefined) return false;
    if (b === null) {
      this.allDown(ex);
      return true;
    }
    this.stats.started();
    this.run(b, new Attempt(ex, this));
    return true;
  }

  protected onQueued(): void {
    // External backends cannot grow; a freed connection slot pumps the queue.
  }

  protected refusal(): ProxyError | undefined {
    return undefined;
  }

  protected async shutdown(): Promise<void> {
    this.upTimer.cancel();
    for (const b of this.backends) b.endpoint.destroy();
  }

  protected fillSnapshot(s: PoolSnapshot): void {
    const now = this.clock.now();
    s.kind = 'external';
    s.backends = this.backends.map((b) => ({ address: b.address, active: b.active, down: b.downUntil > now }));
  }

  /** @internal */
  onOutcome(at: Attempt, o: UpstreamOutcome): void {
    const b = at.backend!;
    b.active--;
    const ex = at.ex;
    if (o.kind === 'failed') {
      if (o.backendDown) this.markDown(b, o.error);
      if (o.retryable && !this.forced && !ex.finished && ex.rewind()) {
        (at.tried ??= []).push(b);
        const next = this.pick(at.tried);
        if (next) {
          this.log.debug({ from: b.address, to: next.address, reason: o.error.code }, 'retrying request on the next backend');
          this.run(next, at);
          return;
        }
        if (next === undefined) {
          // Others are up but full: back to the head of the queue.
          this.queue.unshift(ex);
          this.requestEnded();
          return;
        }
        this.allDown(ex);
      } else if (this.forced) {
        this.fail(ex, new ProxyError(ErrorCodes.SHUTTING_DOWN, 503, `pool ${this.name} is shutting down`, 1));
      } else {
        this.fail(ex, o.error);
      }
    } else {
      if (b.wasDown) {
        b.wasDown = false;
        this.log.info({ backend: b.address }, `backend ${b.address} is answering again`);
      }
      if (o.kind === 'done') this.stats.completed++;
      else this.stats.aborted++;
    }
    this.requestEnded();
    this.pump();
  }

  private run(b: Backend, at: Attempt): void {
    at.backend = b;
    b.active++;
    at.ex.backend = b.address;
    b.endpoint.run(at.ex, at.done);
  }

  /**
   * The least busy backend that is up, not full and not already tried, ties broken
   * round-robin. undefined: some are up but all full (queue); null: none is up.
   */
  private pick(tried: Backend[] | undefined): Backend | undefined | null {
    const bs = this.backends;
    const n = bs.length;
    const now = this.clock.now();
    const cap = this.cfg.maxConnsPerBackend > 0 ? this.cfg.maxConnsPerBackend : Infinity;
    let best: Backend | undefined;
    let anyUp = false;
    for (let i = 0; i < n; i++) {
      const b = bs[(this.rr + i) % n]!;
      if (b.downUntil > now || (tried !== undefined && tried.includes(b))) continue;
      anyUp = true;
      if (b.active >= cap) continue;
      if (best === undefined || b.active < best.active) best = b;
    }
    if (best) {
      this.rr = (best.index + 1) % n;
      return best;
    }
    return anyUp ? undefined : null;
  }

  private markDown(b: Backend, err: ProxyError): void {
    const now = this.clock.now();
    const wasUp = b.downUntil <= now;
    b.downUntil = now + this.cfg.backendDownTime;
    b.wasDown = true;
    b.endpoint.closeIdle();
    if (wasUp) {
      const down = this.backends.filter((x) => x.downUntil > now).length;
      this.log.warn(
        { backend: b.address, code: err.code, downForMs: this.cfg.backendDownTime, down, backends: this.backends.length },
        `backend ${b.address} marked down for ${this.cfg.backendDownTime} ms: ${err.message}`,
      );
    }
    if (this.queue.length > 0) this.upTimer.armAt(b.downUntil);
  }

  private allDown(ex: Exchange): void {
    this.fail(
      ex,
      new ProxyError(ErrorCodes.ALL_BACKENDS_DOWN, 502, `pool ${this.name}: all ${this.backends.length} backend(s) are down`),
    );
  }

  /** Starts queued requests while a backend has room; answers them 502 once every backend is down. */
  private pump(): void {
    while (this.queue.length > 0) {
      const b = this.pick(undefined);
      if (b === undefined) return;
      const ex = this.queue.shift()!;
      if (b === null) {
        this.allDown(ex);
        continue;
      }
      this.stats.started();
      this.run(b, new Attempt(ex, this));
    }
    this.checkDrained();
  }
}
