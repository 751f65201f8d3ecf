/**
 * A reload's hand-over between two generations of one spawned pool. The new generation
 * starts as many workers as the old one had ready (the chain), but each of them still has
 * to load the application on its first request (php-cgi: the scripts from the opcache file
 * cache, over a hundred ms of CPU for a framework-sized app). Handing it all the traffic
 * at once makes every request wait on a first request. So for a while both serve: a
 * request goes to a new worker that has served before, or to one that has not while fewer
 * than `firstAtOnce` first requests run; else to the old generation (at once, or in its
 * queue: its workers are warm and each request there is short). A php-cgi group (a
 * resident pool) is one worker whose children share its parent's opcache memory: its
 * first request loads the application once for all of them, and its other seats wait
 * for it (Pool.warmth), so a generation costs one exec and one load, not one per child.
 * The hand-over ends when every new worker that is up has finished a request, when no
 * request came for `quietMs` and the old generation runs none, after `maxMs`, or when the
 * pool is stopped or handed on; then the new pool serves alone and the old one drains
 * (`released`). A reload during a hand-over replaces it: the newest generation hands over
 * from the same warm old one (passPrevTo), and the one in between, never warm, drains.
 * For a few seconds, requests may thus run under the old settings, as in uWSGI's chain
 * reload, where old workers serve until each is replaced.
 */
import type { PoolConfig } from '../config/types.js';
import type { Exchange } from '../protocol/exchange.js';
import type { Clock } from '../util/clock.js';
import type { HandedWorker } from '../worker/types.js';
import type { Pool, PoolActionReport, PoolSnapshot, StopReason, Warmth } from './types.js';

export interface HandoverOptions {
  clock: Clock;
  /** First requests of new workers running at once. */
  firstAtOnce: number;
  /** The hand-over ends after this long without a request (and none running in the old generation). */
  quietMs: number;
  /** ...and after this long at most. */
  maxMs: number;
  /** Called once when it ends (why, and how long it lasted): the new pool serves alone from then on. */
  ended(why: HandoverEnd, ms: number): void;
  /** When the old generation began handing over (a replaced hand-over's start, when this one took its old generation on); maxMs counts from it. */
  since?: number;
}

/** Why a hand-over ended: every new worker served, quiet, maxMs, or the pool was stopped, replaced by a newer reload, handed on, drained or restarted. */
export type HandoverEnd = 'warm' | 'quiet' | 'max' | 'stop' | 'replaced' | 'upgrade' | 'action';

/** How often it looks whether the hand-over is over while no request comes. */
const CHECK_MS = 100;

/** Every new worker has finished a request, and none is still to come (a start paced by first requests: WarmStart.afterServed). */
function warmAll(w: Warmth): boolean {
  return w.unserved === 0 && w.firstRunning === 0 && w.pending === 0;
}

/** Whether `prev` can hand over to `next` this way (both tell their workers' warmth). */
export function canHandOver(prev: Pool, next: Pool): boolean {
  return prev.warmth?.() !== undefined && next.warmth?.() !== undefined;
}

export class HandoverPool implements Pool {
  readonly name: string;
  private readonly opts: HandoverOptions;
  private readonly began: number;
  private lastRequest: number;
  private timer: unknown;
  private over = false;
  /** Resolves when the hand-over ended. */
  readonly ended: Promise<void>;
  private resolveEnded!: () => void;
  /** Resolves when the old generation may drain: at the end, or when the hand-over that took it on (passPrevTo) lets it go. */
  readonly released: Promise<void>;
  private resolveReleased!: () => void;
  private passedOn = false;

  constructor(
    readonly next: Pool,
    readonly prev: Pool,
    opts: HandoverOptions,
  ) {
    this.name = next.name;
    this.opts = opts;
    this.lastRequest = opts.clock.now();
    this.began = opts.since ?? this.lastRequest;
    this.ended = new Promise<void>((r) => (this.resolveEnded = r));
    this.released = new Promise<void>((r) => (this.resolveReleased = r));
    this.timer = opts.clock.setTimer(() => this.check(), CHECK_MS);
  }

  get scriptRules(): Pool['scriptRules'] {
    return this.next.scriptRules;
  }

  get authorizer(): Pool['authorizer'] {
    return this.next.authorizer;
  }

  get script(): Pool['script'] {
    return this.next.script;
  }

  dispatch(ex: Exchange): void {
    if (!this.over) {
      this.lastRequest = this.opts.clock.now();
      const w = this.next.warmth?.();
      if (w === undefined || warmAll(w)) this.end('warm');
      // Anything else waits for the old generation's warm workers rather than piling more
      // first requests on the new ones.
      else if (!(w.next === 'warm' || (w.next === 'cold' && w.firstRunning < this.opts.firstAtOnce)) && this.prev.warmth?.() !== undefined) return this.prev.dispatch(ex);
    }
    this.next.dispatch(ex);
  }

  /** Ends the hand-over: the new pool serves alone, the old one may drain. */
  end(why: HandoverEnd): void {
    if (this.over) return;
    this.over = true;
    this.opts.clock.clearTimer(this.timer);
    this.opts.ended(why, Math.round(this.opts.clock.now() - this.began));
    this.resolveEnded();
    if (!this.passedOn) this.resolveReleased();
  }

  /**
   * A newer reload replaces this hand-over before its new generation has warmed: `successor`
   * hands over from this one's old generation (warm: it served alone before) instead, which
   * drains only when `successor` releases it. Ends this hand-over ('replaced').
   */
  passPrevTo(successor: HandoverPool): void {
    if (this.over) return;
    this.passedOn = true;
    void successor.released.then(() => this.resolveReleased());
    this.end('replaced');
  }

  /** When the old generation began handing over (HandoverOptions.since for a successor). */
  get since(): number {
    return this.began;
  }

  private check(): void {
    if (this.over) return;
    const now = this.opts.clock.now();
    const w = this.next.warmth?.();
    // Quiet: no request came for quietMs and the old generation runs none (long requests in
    // flight at the commit bring their clients' next ones later).
    const quiet = now - this.lastRequest >= this.opts.quietMs && this.prev.snapshot().active === 0;
    if (w === undefined || warmAll(w)) this.end('warm');
    else if (quiet) this.end('quiet');
    else if (now - this.began >= this.opts.maxMs) this.end('max');
    else this.timer = this.opts.clock.setTimer(() => this.check(), CHECK_MS);
  }

  start(): Promise<void> {
    return Promise.resolve();
  }

  stop(timeoutMs: number, reason?: StopReason): Promise<void> {
    this.end('stop');
    return this.next.stop(timeoutMs, reason);
  }

  warmth(): Warmth | undefined {
    return this.next.warmth?.();
  }

  holdForHandover(hold?: boolean): string[] {
    this.end('upgrade');
    return this.next.holdForHandover?.(hold) ?? [];
  }

  retune(next: PoolConfig): (() => void) | undefined {
    void next;
    // A reload during the hand-over ends it, then replaces the pool (daemon/reload.ts).
    return undefined;
  }

  handedOn(): readonly HandedWorker[] {
    return this.next.handedOn?.() ?? [];
  }

  snapshot(): PoolSnapshot {
    return this.next.snapshot();
  }

  drain(): Promise<PoolActionReport> {
    this.end('action');
    return this.next.drain?.() ?? Promise.resolve({ pool: this.name, action: 'drain', retired: [], started: [] });
  }

  rollingRestart(): Promise<PoolActionReport> {
    this.end('action');
    return this.next.rollingRestart?.() ?? Promise.resolve({ pool: this.name, action: 'restart', retired: [], started: [] });
  }
}
