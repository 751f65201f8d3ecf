/**
 * What every listener shares: the set of open front-end sessions and a graceful close
 * (stop accepting, let sessions finish their requests, then cut what is left).
 */
import type { Server } from 'node:net';
import type { Logger } from '../log/log.js';
import type { ListenerConfig } from '../config/types.js';
import { ClientGate } from './client-gate.js';
import type { Listener } from './types.js';
import { ErrorCodes } from '../errors.js';
import { DenseSet } from '../util/dense-set.js';
import { releaseUnixPath } from './listen.js';

/**
 * On drain, how long a connection that was accepted but has sent nothing yet may take to
 * send its first request. It is not idle: its client connected before the stop (or the
 * upgrade) and its request may already be on the wire; closing it unread would be a 502
 * (nginx does not retry a fresh connection). nginx, stopping, likewise serves a new
 * connection's first request.
 */
export const FRESH_CONNECTION_GRACE_MS = 1000;

/**
 * Calls `check(session)` once FRESH_CONNECTION_GRACE_MS has passed and the sockets were
 * polled since. Node runs due timers before it polls: a daemon that was itself stalled
 * past the grace (a loaded machine, a long stop step) would otherwise judge a connection
 * silent whose request reached the socket in time, and close it unread.
 */
export function afterFreshGrace<S>(check: (session: S) => void, session: S): void {
  setTimeout(checkAfterPoll<S>, FRESH_CONNECTION_GRACE_MS, check, session).unref();
}

function checkAfterPoll<S>(check: (session: S) => void, session: S): void {
  setImmediate(check, session);
}

/** One front-end connection as the listener sees it. */
export interface Session {
  /** Close once no request is in flight (at once when idle); new requests are still served meanwhile. */
  drain(): void;
  /** Close now; in-flight exchanges are aborted. */
  destroy(): void;
  /** Its place in the listener's set of sessions (src/protocol/dense-set.ts); -1 when in none. */
  listenerSlot: number;
}

export class SessionListener implements Listener {
  readonly config: ListenerConfig;
  address = '';
  readonly server: Server;
  /** Child logger bound to this listener's address, made once. */
  log: Logger;
  /** allowed_clients, checked first on accept (src/frontend/overflow.ts guardConnections). */
  readonly gate: ClientGate;
  /** A connection per request is the usual nginx setup: an add and a delete per request. */
  private readonly sessions = new DenseSet<Session, 'listenerSlot'>('listenerSlot');
  /** Connections taken since it started (kept-alive front ends reuse theirs: few per many requests). */
  accepted = 0;
  private closing = false;
  private closedWaiter: (() => void) | undefined;

  constructor(config: ListenerConfig, server: Server, log: Logger) {
    this.config = config;
    this.server = server;
    this.log = log;
    this.gate = new ClientGate(config, () => this.log);
  }

  get connections(): number {
    return this.sessions.size;
  }

  /** Bumped by the accept path's overflow guard (overflow.ts). */
  overflowed = 0;

  get refused(): number {
    return this.gate.refused;
  }

  add(s: Session): void {
    this.accepted++;
    this.sessions.add(s);
    // Accepted just before close(): serve what it sends but do not keep it.
    if (this.closing) s.drain();
  }

  remove(s: Session): void {
    if (!this.sessions.delete(s)) return;
    if (this.sessions.size > 0) return;
    const w = this.closedWaiter;
    this.closedWaiter = undefined;
    w?.();
  }

  close(timeoutMs: number): Promise<void> {
    if (!this.closing) {
      this.closing = true;
      this.server.close();
      releaseUnixPath(this.server);
      this.log.info({ connections: this.sessions.size }, 'listener closing');
    }
    if (this.sessions.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const prev = this.closedWaiter;
      const done = (): void => {
        if (timer) clearTimeout(timer);
        prev?.();
        resolve();
      };
      this.closedWaiter = done;
      timer = setTimeout(() => {
        timer = undefined;
        if (this.sessions.size > 0) this.log.warn({ code: ErrorCodes.SHUTDOWN_FORCED, connections: this.sessions.size }, 'close timeout; cutting open connections');
        for (const s of this.sessions.snapshot()) s.destroy();
        this.sessions.clear();
        this.closedWaiter = undefined;
        done();
      }, timeoutMs);
      for (const s of this.sessions.snapshot()) s.drain();
    });
  }
}
