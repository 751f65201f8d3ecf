/**
 * What an exit means, and how soon to try again. Pure (clock passed in).
 *
 * Like PHP-FPM: a worker the manager stopped (reason set) is quiet; anything else that
 * ends on a signal or a non-zero code is a crash, and "possible request loss" when it
 * was serving one. A kill from outside (SIGKILL or SIGTERM fcgi-pm did not send: the OOM
 * killer, an operator's kill -9) is not the application failing, whenever it comes:
 * the worker is replaced at once, as PHP-FPM does. Only an early crash (see `early`),
 * something the application did to itself, is a sign of a crash loop: those back off
 * exponentially like runit, never sooner than a second after the last start, and make
 * the pool `failing` when crash_limit of them fall in crash_window.
 */
import { ErrorCodes, type ErrorCode } from '../errors.js';
import type { ExitVerdict, LogLevel, RetireReason, WorkerExit } from './types.js';

/**
 * "Soon after start": a worker that dies within this long of its spawn without having
 * finished a request counts toward crash_limit. Past it, or once it finished a request,
 * it started fine and something killed it (its request gets 502; the pool goes on).
 */
export const EARLY_EXIT_MS = 5000;


interface PlannedRule {
  restart: boolean;
  level: LogLevel;
  what: string;
  /** For the rules logged at warn. */
  code?: ErrorCode;
}

/** Planned exits, by the reason the manager gave. spawn_timeout is handled as a crash. */
const PLANNED: Record<Exclude<RetireReason, 'spawn_timeout'>, PlannedRule> = {
  idle_timeout: { restart: false, level: 'debug', what: 'stopped after idle_timeout' },
  scale_down: { restart: false, level: 'debug', what: 'stopped: more idle workers than max_spare' },
  shutdown: { restart: false, level: 'debug', what: 'stopped for shutdown' },
  reload: { restart: true, level: 'debug', what: 'stopped for reload' },
  max_requests: { restart: true, level: 'debug', what: 'recycled after max_requests' },
  max_lifetime: { restart: true, level: 'debug', what: 'recycled after max_lifetime' },
  memory: { restart: true, level: 'info', what: 'recycled: memory above max_memory' },
  memory_budget: { restart: false, level: 'info', what: 'stopped: pool over its memory budget' },
  host_share: { restart: false, level: 'info', what: 'stopped: its place under max_children_total went to a pool below its share' },
  memory_hard: { restart: true, level: 'warn', what: 'killed: memory above max_memory_hard', code: ErrorCodes.MEMORY_HARD_LIMIT },
  request_timeout: { restart: true, level: 'warn', what: 'killed after request_timeout', code: ErrorCodes.REQUEST_TIMEOUT },
  restart: { restart: false, level: 'debug', what: 'replaced by a rolling restart' },
  drain: { restart: false, level: 'debug', what: 'stopped: the pool was drained' },
  client_abort: { restart: true, level: 'debug', what: 'stopped: its client went away mid-request and the request could not be cancelled' },
};

const LEVEL_RANK: Record<LogLevel, number> = { debug: 0, info: 1, warn: 2, error: 3 };
const atLeast = (a: LogLevel, b: LogLevel): LogLevel => (LEVEL_RANK[a] >= LEVEL_RANK[b] ? a : b);

/**
 * The signals that end a process from outside: an operator's kill or kill -9, the OOM
 * killer, a supervisor above us. A program does not raise these on itself when it fails;
 * SEGV, ABRT, BUS, ILL, FPE and the rest are its own doing.
 */
const OUTSIDE_SIGNALS: ReadonlySet<string> = new Set(['SIGKILL', 'SIGTERM']);

/** An end by a signal fcgi-pm did not send (no retire reason) that is not the program's own doing. */
export function isOutsideKill(signal: NodeJS.Signals | null, reason: RetireReason | undefined): boolean {
  return reason === undefined && signal !== null && OUTSIDE_SIGNALS.has(signal);
}

function describeEnd(exit: WorkerExit): string {
  if (exit.signal !== null) return `exited on signal ${exit.signal}`;
  if (exit.code !== null) return `exited with code ${exit.code}`;
  return 'could not be started';
}

function uptimeText(ms: number): string {
  return ms < 10_000 ? `${(ms / 1000).toFixed(2)}s` : `${Math.round(ms / 1000)}s`;
}

function verdict(base: Omit<ExitVerdict, 'level' | 'code'>, level: LogLevel, code: ErrorCode): ExitVerdict {
  return level === 'warn' || level === 'error' ? { ...base, level, code } : { ...base, level };
}

export function classifyExit(exit: WorkerExit, wasBusy: boolean): ExitVerdict {
  const after = `(uptime ${uptimeText(exit.uptime)})`;
  const loss = wasBusy ? ', possible request loss' : '';
  const reason = exit.reason;

  if (reason === 'spawn_timeout') {
    return { crash: true, early: true, outside: false, restart: true, level: 'warn', code: ErrorCodes.SPAWN_TIMEOUT, message: `did not become ready within spawn_timeout, killed (${describeEnd(exit)})` };
  }
  if (reason !== undefined) {
    const rule = PLANNED[reason];
    // A planned stop that needed SIGKILL did not honour SIGTERM within kill_timeout.
    const forced = exit.signal === 'SIGKILL' && reason !== 'memory_hard' && reason !== 'request_timeout' ? ' (needed SIGKILL)' : '';
    const level = wasBusy ? atLeast(rule.level, 'warn') : forced ? atLeast(rule.level, 'info') : rule.level;
    return verdict({ crash: false, early: false, outside: false, restart: rule.restart, message: `${rule.what}${forced} ${after}${loss}` }, level, rule.code ?? ErrorCodes.REQUEST_LOST);
  }
  const when = exit.ready || (exit.code === null && exit.signal === null) ? '' : ' before it was ready';
  if (isOutsideKill(exit.signal, reason)) {
    return {
      crash: true,
      early: false,
      outside: true,
      restart: true,
      level: wasBusy ? 'error' : 'warn',
      code: ErrorCodes.WORKER_KILLED,
      message: `was killed by ${exit.signal} from outside fcgi-pm${when} ${after}${loss}; replaced at once, not counted toward crash_limit`,
    };
  }
  const early = isEarlyExit(exit);
  if (exit.signal === null && exit.code === 0 && !early) {
    // Exited by itself, cleanly: php-cgi does this after PHP_FCGI_MAX_REQUESTS.
    return verdict({ crash: false, early: false, outside: false, restart: true, message: `exited by itself (code 0) ${after}${loss}` }, wasBusy ? 'warn' : 'info', ErrorCodes.REQUEST_LOST);
  }
  return { crash: true, early, outside: false, restart: true, level: wasBusy ? 'error' : 'warn', code: ErrorCodes.WORKER_CRASHED, message: `${describeEnd(exit)}${when} ${after}${loss}` };
}

/** An exit nobody asked for that looks like a crash loop rather than a kill (EARLY_EXIT_MS). */
function isEarlyExit(exit: WorkerExit): boolean {
  return !exit.ready || (exit.served === 0 && exit.uptime < EARLY_EXIT_MS);
}

export const BACKOFF_MIN_MS = 100;
export const BACKOFF_MAX_MS = 30_000;
/** runit: no restart sooner than this after the last start of a crashing worker. */
export const MIN_RESTART_INTERVAL_MS = 1000;

/** 0 without crashes; then 100 ms doubling per recent crash, capped at 30 s. */
export function backoffDelay(recentCrashes: number): number {
  if (recentCrashes <= 0) return 0;
  if (recentCrashes > 20) return BACKOFF_MAX_MS;
  return Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** (recentCrashes - 1));
}

/** Milliseconds to wait before spawning a replacement. `lastStartAt`: when the crashed worker started. */
export function restartDelay(recentCrashes: number, now: number, lastStartAt: number): number {
  if (recentCrashes <= 0) return 0;
  return Math.max(backoffDelay(recentCrashes), lastStartAt + MIN_RESTART_INTERVAL_MS - now, 0);
}

/**
 * Ring of recent crash times for one pool. `limit` ≤ 0 disables `failing`.
 * Times are whatever clock the caller uses (monotonic ms recommended).
 */
export class CrashWindow {
  readonly limit: number;
  readonly windowMs: number;
  private readonly ring: number[];
  private head = 0; // next slot to write
  private size = 0;

  constructor(limit: number, windowMs: number) {
    this.limit = limit;
    this.windowMs = windowMs;
    // Enough for the failing test and for the back-off exponent to reach its cap.
    this.ring = new Array<number>(Math.max(limit, 16)).fill(0);
  }

  record(now: number): void {
    this.ring[this.head] = now;
    this.head = (this.head + 1) % this.ring.length;
    if (this.size < this.ring.length) this.size++;
  }

  /** Crashes within the window ending at `now`. */
  count(now: number): number {
    const cutoff = now - this.windowMs;
    const cap = this.ring.length;
    let n = 0;
    for (let i = 1; i <= this.size; i++) {
      const t = this.ring[(this.head - i + cap) % cap]!;
      if (t <= cutoff) break; // older ones are older still
      n++;
    }
    return n;
  }

  failing(now: number): boolean {
    return this.limit > 0 && this.count(now) >= this.limit;
  }

  /** When to respawn after a crash of a worker started at `lastStartAt`. */
  delay(now: number, lastStartAt: number): number {
    return restartDelay(this.count(now), now, lastStartAt);
  }

  /** Most recent crash time, if any. */
  get last(): number | undefined {
    return this.size === 0 ? undefined : this.ring[(this.head - 1 + this.ring.length) % this.ring.length];
  }

  clear(): void {
    this.size = 0;
    this.head = 0;
  }
}
