/**
 * header_timeout and body_timeout for a FastCGI or SCGI listener, as nginx's
 * client_header_timeout and client_body_timeout: a request head must be complete
 * within header_timeout of its first byte (one byte every few seconds does not keep it
 * alive), and a request body may not go body_timeout without a byte. The socket's
 * idle timer cannot tell either: any byte re-arms it.
 *
 * All requests of a listener share each timeout, so one DeadlineList per timeout (one
 * timer, O(1) add and remove) serves them; a holder keeps one node and moves it from
 * list to list (body: re-pushed on every chunk, taken out while we paused the client).
 * The timers are unref'd and find nothing once a closed listener's sessions are gone.
 *
 * idle_timeout too, for a FastCGI or SCGI session: its reads and writes stamp it, and one
 * IdleWatch of the listener's sessions reads the stamp when one falls due
 * (src/util/idle-watch.ts), where the socket's own timer is re-armed on every read and write.
 */
import { systemClock } from '../util/clock.js';
import { DeadlineList, DeadlineNode } from '../util/deadline-list.js';
import { IdleWatch, type Stamped } from '../util/idle-watch.js';
import type { ListenerConfig } from '../config/types.js';

export interface ClientTimed {
  headerTimedOut(): void;
  bodyTimedOut(): void;
}

/** A session on the idle watch. */
export interface ClientIdle extends Stamped {
  idleTimedOut(): void;
}

export class ClientDeadlines {
  readonly header: DeadlineList<ClientTimed>;
  readonly body: DeadlineList<ClientTimed>;
  /** idle_timeout; undefined when 0 (never). */
  readonly idle: IdleWatch<ClientIdle> | undefined;

  constructor(cfg: ListenerConfig) {
    this.header = new DeadlineList<ClientTimed>(systemClock, cfg.headerTimeout, (t) => t.headerTimedOut());
    this.body = new DeadlineList<ClientTimed>(systemClock, cfg.bodyTimeout, (t) => t.bodyTimedOut());
    this.idle = cfg.idleTimeout > 0 ? new IdleWatch<ClientIdle>(systemClock, cfg.idleTimeout, (s) => s.idleTimedOut()) : undefined;
  }

  /** Starts (or restarts) the body deadline: the client sent body bytes or we resumed reading. */
  bodyActive(node: DeadlineNode<ClientTimed>): void {
    this.body.push(node);
  }

  /** Stops whichever deadline the node is on. */
  stop(node: DeadlineNode<ClientTimed>): void {
    node.list?.remove(node);
  }
}

export { DeadlineNode };
