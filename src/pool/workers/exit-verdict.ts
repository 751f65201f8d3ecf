/**
 * What a worker's exit means, judged at its burial from what the process side knows. Pure:
 * the facts of an exit in, a verdict and the rule that gave it out (upstream/retry.ts is
 * the model). The rules are tried in order; the first that holds decides:
 *
 *   spawn_timeout    fcgi-pm killed it for not becoming ready: an early crash
 *   planned          fcgi-pm asked it to go (a retire reason): quiet, as PHP-FPM is
 *   outside          SIGKILL or SIGTERM nobody here sent (an operator, the OOM killer): a
 *                    crash, replaced at once, never early (not the application's doing)
 *   recycled         exit 0 after ready, having served: php-cgi does this after
 *                    PHP_FCGI_MAX_REQUESTS. Where the served count is sampled (accept:
 *                    direct: a lower bound; fast requests, and a saturated CPU, fall
 *                    between two samples), exit 0 after ready is a recycle when the
 *                    program exits 0 by itself only to recycle (php-cgi told
 *                    PHP_FCGI_MAX_REQUESTS: in FastCGI mode it has no other clean exit),
 *                    or when it was seen at work (in accept() or on a connection); another
 *                    program never seen at work may be one that exits at once (a crash
 *                    loop that must back off)
 *   clean            exit 0 after ready, past EARLY_EXIT_MS: it started fine
 *   early_crash      before ready, or soon after start having served nothing: a crash
 *                    loop's sign, counted toward crash_limit and backed off
 *   crash            any other signal or code: replaced at once
 *
 * A verdict's level is the exit line's (quiet exits debug or info; a warn or error line
 * names its stable code); "possible request loss" when a request ran on it.
 */
import { ErrorCodes, type ErrorCode } from '../../errors.js';
import { isOutsideKill } from '../../worker/exit-policy.js';
import type { LogLevel, RetireReason, WorkerExit } from '../../worker/types.js';

/**
 * "Soon after start": a worker that dies within this long of its spawn without having
 * finished a request counts toward crash_limit. Past it, or once it finished a request,
 * it started fine and something killed it (its request gets 502; the pool goes on).
 */
export const EARLY_EXIT_MS = 5000;

export type ExitRule = 'spawn_timeout' | 'planned' | 'outside' | 'recycled' | 'clean' | 'early_crash' | 'crash';

export interface ExitFacts {
  exit: WorkerExit;
  /**
   * How the pool knows what a worker served: `exact` (it handed each request over) or
   * `sampled` (accept: direct: connections seen by sampling /proc, a lower bound).
   */
  served: 'exact' | 'sampled';
  /** The program exits 0 by itself only to recycle (php-cgi told PHP_FCGI_MAX_REQUESTS on the direct path). */
  selfRecycles: boolean;
  /** The request side saw it at work: waiting in accept(), or on a request. */
  seenWorking?: boolean;
}

interface VerdictBase {
  rule: ExitRule;
  /** Not asked for (counted as a worker crash in status). */
  crash: boolean;
  /** Counts toward crash_limit/crash_window and the restart back-off; any other crash is replaced at once. */
  early: boolean;
  /** Killed from outside (SIGKILL or SIGTERM fcgi-pm did not send), before or after ready. */
  outside: boolean;
  /** The pool should replace it (after the back-off when early). Scaling may still decide not to. */
  restart: boolean;
  message: string;
}

/** What an exit means. Quiet exits have no code; a warn or error line names its stable code. */
export type ExitVerdict = VerdictBase & ({ level: 'debug' | 'info'; code?: undefined } | { level: 'warn' | 'error'; code: ErrorCode });

interface PlannedRule {
  restart: boolean;
  level: LogLevel;
  what: string;
  /** For the rules logged at warn. */
  code?: ErrorCode;
}

/** Planned exits, by the reason the manager gave. spawn_timeout is judged as a crash. */
const PLANNED: Record<Exclude<RetireReason, 'spawn_timeout'>, PlannedRule> = {
  idle_timeout: { restart: false, level: 'debug', what: 'stopped after idle_timeout' },
  scale_down: { restart: false, level: 'debug', what: 'stopped: more idle workers than the load needs' },
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

function describeEnd(exit: WorkerExit): string {
  if (exit.signal !== null) return `exited on signal ${exit.signal}`;
  if (exit.code !== null) return `exited with code ${exit.code}`;
  return 'could not be started';
}

function uptimeText(ms: number): string {
  return ms < 10_000 ? `${(ms / 1000).toFixed(2)}s` : `${Math.round(ms / 1000)}s`;
}

function verdict(base: Omit<VerdictBase, 'message'> & { message: string }, level: LogLevel, code: ErrorCode): ExitVerdict {
  return level === 'warn' || level === 'error' ? { ...base, level, code } : { ...base, level };
}

/** Exit 0 after ready that is a recycle: it served, or it was told to recycle itself and its count is only sampled. */
function recycledItself(f: ExitFacts): boolean {
  const e = f.exit;
  return e.ready && e.signal === null && e.code === 0 && (e.served > 0 || (f.served === 'sampled' && (f.selfRecycles || f.seenWorking === true)));
}

/** Died before ready, or soon after start having finished nothing. */
function isEarly(e: WorkerExit): boolean {
  return !e.ready || (e.served === 0 && e.uptime < EARLY_EXIT_MS);
}

export function judgeExit(f: ExitFacts): ExitVerdict {
  // Sampled busy is a past look: a worker that accepts itself and exits 0 (php-cgi after
  // SIGTERM or PHP_FCGI_MAX_REQUESTS) finished the request it ran first.
  const e = f.served === 'sampled' && f.exit.busy && f.exit.code === 0 && f.exit.signal === null ? { ...f.exit, busy: false } : f.exit;
  const after = `(uptime ${uptimeText(e.uptime)})`;
  const loss = e.busy ? ', possible request loss' : '';
  const reason = e.reason;
  if (reason === 'spawn_timeout') {
    return { rule: 'spawn_timeout', crash: true, early: true, outside: false, restart: true, level: 'warn', code: ErrorCodes.SPAWN_TIMEOUT, message: `did not become ready within spawn_timeout, killed (${describeEnd(e)})` };
  }
  if (reason !== undefined) {
    const rule = PLANNED[reason];
    // A planned stop that needed SIGKILL did not honour SIGTERM within kill_timeout (an idle php-cgi gets it at once).
    const forced = e.signal === 'SIGKILL' && reason !== 'memory_hard' && reason !== 'request_timeout' && e.killedIdle !== true ? ' (needed SIGKILL)' : '';
    const level = e.busy ? atLeast(rule.level, 'warn') : forced ? atLeast(rule.level, 'info') : rule.level;
    return verdict({ rule: 'planned', crash: false, early: false, outside: false, restart: rule.restart, message: `${rule.what}${forced} ${after}${loss}` }, level, rule.code ?? ErrorCodes.REQUEST_LOST);
  }
  const when = e.ready || (e.code === null && e.signal === null) ? '' : ' before it was ready';
  if (isOutsideKill(e.signal, reason)) {
    return {
      rule: 'outside',
      crash: true,
      early: false,
      outside: true,
      restart: true,
      level: e.busy ? 'error' : 'warn',
      code: ErrorCodes.WORKER_KILLED,
      message: `was killed by ${e.signal} from outside fcgi-pm${when} ${after}${loss}; replaced at once, not counted toward crash_limit`,
    };
  }
  if (recycledItself(f)) {
    return verdict({ rule: 'recycled', crash: false, early: false, outside: false, restart: true, message: `exited by itself (code 0), recycled ${after}${loss}` }, e.busy ? 'warn' : 'info', ErrorCodes.REQUEST_LOST);
  }
  const early = isEarly(e);
  if (e.signal === null && e.code === 0 && !early) {
    return verdict({ rule: 'clean', crash: false, early: false, outside: false, restart: true, message: `exited by itself (code 0) ${after}${loss}` }, e.busy ? 'warn' : 'info', ErrorCodes.REQUEST_LOST);
  }
  return { rule: early ? 'early_crash' : 'crash', crash: true, early, outside: false, restart: true, level: e.busy ? 'error' : 'warn', code: ErrorCodes.WORKER_CRASHED, message: `${describeEnd(e)}${when} ${after}${loss}` };
}
