/**
 * All connections from fcgi-pm to one backend address: runs exchanges on idle kept-alive
 * connections or fresh ones, keeps up to maxIdle idle ones, and replays a request once
 * on a fresh connection when a reused one turns out to have been closed by the backend.
 * It never answers a failed exchange itself: the outcome goes to the pool.
 */
import { DenseSet } from '../util/dense-set.js';
import type { Logger } from '../log/log.js';
import type { SocketAddress } from '../protocol/address.js';
import type { Exchange } from '../protocol/exchange.js';
import type { ConnectionOwner, DoneCallback, UpstreamConnection } from './connection-base.js';
import { FastcgiConnection } from './fastcgi-connection.js';
import { ABORTED, endpointClosed } from './failures.js';
import { ScgiConnection } from './scgi-connection.js';
import type { Endpoint, UpstreamOptions, UpstreamOutcome } from './types.js';

export class UpstreamEndpoint implements Endpoint, ConnectionOwner {
  readonly address: SocketAddress;
  private readonly opts: UpstreamOptions;
  private readonly logger: Logger;
  /** Idle connections, most recently used last (reused first: its socket is warm). */
  private readonly idle: UpstreamConnection[] = [];
  private readonly busy = new DenseSet<UpstreamConnection, 'busySlot'>('busySlot');
  private running = 0;
  private destroyed = false;
  /** Connections opened so far (status, tests: proves keep-alive reuse). */
  connectionsOpened = 0;
  /** Requests replayed after a reused connection turned out closed. */
  staleRetries = 0;

  constructor(address: SocketAddress, opts: UpstreamOptions, logger: Logger) {
    this.address = address;
    this.opts = opts;
    this.logger = logger.child({ backend: address.text });
  }

  get active(): number {
    return this.running;
  }

  get idleCount(): number {
    return this.idle.length;
  }

  run(ex: Exchange, done: (outcome: UpstreamOutcome) => void): void {
    if (ex.finished) {
      done(ABORTED);
      return;
    }
    if (this.destroyed) {
      done(endpointClosed(this.address.text, false));
      return;
    }
    this.running++;
    const conn = this.idle.pop() ?? this.open();
    this.busy.add(conn);
    conn.start(ex, done);
  }

  closeIdle(): void {
    const list = this.idle.splice(0);
    for (const c of list) c.close();
  }

  destroy(): void {
    this.destroyed = true;
    this.closeIdle();
    for (const c of this.busy.snapshot()) c.abandon(endpointClosed(this.address.text, c.headSent));
  }

  // ---- ConnectionOwner ------------------------------------------------------------------

  requestFinished(
    conn: UpstreamConnection,
    ex: Exchange,
    done: DoneCallback,
    outcome: UpstreamOutcome,
    reusable: boolean,
    stale: boolean,
  ): void {
    this.busy.delete(conn);
    if (stale && !this.destroyed) {
      // Once only: the replay runs on a fresh connection, which never reports stale.
      if (ex.rewind()) {
        this.staleRetries++;
        this.logger.debug({ exchange: ex.id }, 'kept-alive connection was closed by the backend; retrying on a new one');
        const fresh = this.open();
        this.busy.add(fresh);
        fresh.start(ex, outcome.kind === 'failed' && outcome.facts.headSent ? afterReplay(done) : done);
        return;
      }
    }
    this.running--;
    if (reusable && !this.destroyed && this.idle.length < this.opts.maxIdle) {
      this.idle.push(conn);
    } else if (reusable) {
      conn.close();
    }
    done(outcome);
  }

  idleClosed(conn: UpstreamConnection): void {
    const i = this.idle.indexOf(conn);
    if (i >= 0) this.idle.splice(i, 1);
  }

  private open(): UpstreamConnection {
    this.connectionsOpened++;
    return this.opts.protocol === 'scgi'
      ? new ScgiConnection(this, this.address, this.opts, this.logger)
      : new FastcgiConnection(this, this.address, this.opts, this.logger);
  }
}

export function createEndpoint(address: SocketAddress, opts: UpstreamOptions, logger: Logger): Endpoint {
  return new UpstreamEndpoint(address, opts, logger);
}

/** A replay's `done`: its failure says that an earlier attempt's head had left us (AttemptFacts.replayed). */
function afterReplay(done: DoneCallback): DoneCallback {
  return (o) => done(o.kind === 'failed' ? { ...o, facts: { ...o.facts, replayed: true } } : o);
}
