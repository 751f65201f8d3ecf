/**
 * allowed_clients (PHP-FPM's listen.allowed_clients): which TCP clients a listener
 * serves. A refused connection is destroyed in the accept callback, before a byte is
 * read or a session exists; it is counted, and logged at most once a minute per client
 * address with the number of refusals left unlogged since the last line.
 *
 * The per-address log state is bounded: past MAX_TRACKED addresses (a scan from many
 * sources) the rest share one "other addresses" entry, so memory stays flat.
 */
import type { Socket } from 'node:net';
import { compileAllow, type AllowMatcher } from '../config/cidr.js';
import type { ListenerConfig } from '../config/types.js';
import { ErrorCodes } from '../errors.js';
import type { Logger } from '../log/log.js';

export const REFUSAL_LOG_INTERVAL_MS = 60_000;
export const MAX_TRACKED = 1024;
const OTHERS = 'other addresses';

interface LogState {
  /** When this address was last logged. */
  at: number;
  /** Refusals since then, not logged. */
  suppressed: number;
}

export class ClientGate {
  /** Connections refused since the listener started. */
  refused = 0;
  private rules: readonly string[] | undefined;
  private matcher: AllowMatcher | undefined;
  private readonly seen = new Map<string, LogState>();

  constructor(
    private readonly cfg: ListenerConfig,
    private readonly log: () => Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /** True when the socket may be served; otherwise it has been destroyed. */
  admit(socket: Socket): boolean {
    const m = this.current();
    if (m === undefined) return true;
    const remote = socket.remoteAddress;
    if (m(remote)) return true;
    socket.destroy();
    this.refused++;
    this.noteRefusal(remote ?? 'unknown');
    return false;
  }

  /** The matcher for the listener's allow list as it is now (a reload swaps the list). */
  private current(): AllowMatcher | undefined {
    const rules = this.cfg.allowedClients;
    if (rules !== this.rules) {
      this.rules = rules;
      this.matcher = rules === undefined ? undefined : compileAllow(rules);
    }
    return this.matcher;
  }

  private noteRefusal(remote: string): void {
    const t = this.now();
    let key = remote;
    if (!this.seen.has(key) && this.seen.size >= MAX_TRACKED) {
      this.sweep(t);
      if (this.seen.size >= MAX_TRACKED) key = OTHERS;
    }
    const st = this.seen.get(key);
    if (st !== undefined && t - st.at < REFUSAL_LOG_INTERVAL_MS) {
      st.suppressed++;
      return;
    }
    const suppressed = st?.suppressed ?? 0;
    // Re-inserted so the map stays in order of last log time: sweep() stops early.
    this.seen.delete(key);
    this.seen.set(key, { at: t, suppressed: 0 });
    this.log().warn(
      { code: ErrorCodes.CLIENT_NOT_ALLOWED, remote: key, suppressed, refused: this.refused },
      `connection refused: ${key} is not in allowed_clients${suppressed > 0 ? ` (${suppressed} more since the last line)` : ''}; next line for it in a minute at the earliest`,
    );
  }

  /** Forgets addresses whose minute is over (their unlogged count goes with them). */
  private sweep(t: number): void {
    for (const [k, st] of this.seen) {
      if (t - st.at < REFUSAL_LOG_INTERVAL_MS) return;
      this.seen.delete(k);
    }
  }
}
