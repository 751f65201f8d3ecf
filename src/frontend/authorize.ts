/**
 * `authorizer: POOL`: before a request goes to a pool that names an authorizer, that
 * pool is asked, as a FastCGI authorizer (spec 1.0, section 6.3), whatever the front end.
 * A grant adds its Variable-NAME values to the request, which then goes on its way
 * (script guard, pool.dispatch); a deny's status, headers and body are the client's
 * answer; anything else (the authorizer pool unreachable, crashed, full, timed out, an
 * answer fcgi-pm cannot act on) is 503 ERR_AUTHORIZER_FAILED: a request is never let
 * through by accident. The body keeps arriving into the request's exchange meanwhile
 * (it buffers, then applies back-pressure); only a grant lets a backend consume it.
 */
import { ErrorCodes, ProxyError, type ErrorCode } from '../errors.js';
import { EpisodeLimiter } from '../log/episode-limiter.js';
import type { Logger } from '../log/log.js';
import { Exchange, type CgiResponseHead, type ResponseSink } from '../protocol/exchange.js';
import { Role } from '../protocol/fastcgi.js';
import type { CgiParams } from '../protocol/params.js';
import type { AuthorizerRules, Pool } from '../pool/types.js';
import { AuthorizerCache } from './authorizer-cache.js';
import type { FrontendContext } from './types.js';

/** A deny's body is held to be sent whole; one larger than this is not an answer we relay. */
export const MAX_DENY_BODY = 64 * 1024;
/** One warning per cause, then one count per this many ms while the failures go on. */
const WARN_INTERVAL_MS = 10_000;

/**
 * What an authorizer request leaves out of the request's variables. The first four are
 * the spec's: an authorizer judges the request, it is not the request (and gets no body).
 * SCRIPT_FILENAME too: an authorizer must never run the protected script (php-cgi would
 * run whatever it names); a PHP authorizer pool names its own with `script`.
 */
export const AUTHORIZER_DROPS: ReadonlySet<string> = new Set(['CONTENT_LENGTH', 'PATH_INFO', 'PATH_TRANSLATED', 'SCRIPT_NAME', 'SCRIPT_FILENAME']);

/** The variables an authorizer gets for a request: all of them but AUTHORIZER_DROPS (FastCGI PARAMS copied as bytes). */
export function authorizerParams(params: CgiParams): CgiParams {
  return params.without(AUTHORIZER_DROPS);
}

type Answer =
  | { kind: 'allow'; variables: readonly string[] }
  | { kind: 'deny'; head: CgiResponseHead; body: Buffer[] }
  | { kind: 'failed'; code: ErrorCode | string; reason: string };

/** The authorizer exchange's sink: holds the answer until it is complete, bounded. */
class AnswerSink implements ResponseSink {
  private answer: Answer | undefined;
  private bodyBytes = 0;
  /** The answer was acted on; later calls are ignored. */
  private settled = false;

  constructor(private readonly done: (a: Answer) => void) {}

  /** The exchange, set once created (the sink comes first). */
  ex: Exchange | undefined;

  head(head: CgiResponseHead): void {
    // The upstream judged the answer (an unusable grant fails the exchange before this).
    const granted = this.ex?.granted;
    this.answer = granted !== undefined ? { kind: 'allow', variables: granted } : { kind: 'deny', head, body: [] };
  }

  body(chunk: Buffer): boolean {
    const a = this.answer;
    if (this.settled || a?.kind !== 'deny') return true;
    this.bodyBytes += chunk.length;
    if (this.bodyBytes > MAX_DENY_BODY) {
      this.settle({ kind: 'failed', code: ErrorCodes.AUTHORIZER_ANSWER, reason: `a deny with a body over ${MAX_DENY_BODY} bytes` });
      // Not from inside the upstream's delivery: it stops the backend request.
      const ex = this.ex;
      if (ex !== undefined) process.nextTick(() => ex.abort());
      return true;
    }
    a.body.push(Buffer.from(chunk)); // the upstream's read buffer is reused
    return true;
  }

  stderr(): void {
    // An authorizer's stderr is its own business; the request's client never sees it.
  }

  end(): void {
    const a = this.answer;
    this.settle(a ?? { kind: 'failed', code: ErrorCodes.AUTHORIZER_ANSWER, reason: 'no answer' });
  }

  fail(err: ProxyError): number {
    this.settle({ kind: 'failed', code: err.code, reason: err.message });
    return 0; // nothing reaches a client from here: the request's own exchange answers
  }

  private settle(a: Answer): void {
    if (this.settled) return;
    this.settled = true;
    this.answer = undefined;
    this.done(a);
  }
}

/** Per guarded pool object: its cache (bound to one authorizer pool object) and warnings. */
interface Guard {
  authPool: Pool;
  cache: AuthorizerCache | undefined;
  warnings: EpisodeLimiter<string>;
}

/** Dropped with the pool object: a reload that replaces either pool starts a new cache. */
const guards = new WeakMap<Pool, Guard>();

function guardOf(pool: Pool, rules: AuthorizerRules, authPool: Pool, log: Logger): Guard {
  let g = guards.get(pool);
  if (g === undefined) {
    const warnings = new EpisodeLimiter<string>({
      intervalMs: WARN_INTERVAL_MS,
      summary: (code, n) => log.warn({ code: ErrorCodes.AUTHORIZER_FAILED, pool: pool.name, authorizer: rules.pool, cause: code, repeats: n }, `pool ${pool.name}: ${n} more request${n === 1 ? '' : 's'} denied because authorizer pool ${rules.pool} failed (${code})`),
    });
    g = { authPool, cache: newCache(rules), warnings };
    guards.set(pool, g);
  } else if (g.authPool !== authPool) {
    g.authPool = authPool;
    g.cache = newCache(rules);
  }
  return g;
}

function newCache(rules: AuthorizerRules): AuthorizerCache | undefined {
  return rules.cacheMs > 0 ? new AuthorizerCache(rules.cacheMs, rules.cacheKey) : undefined;
}

/**
 * Asks `pool`'s authorizer about `ex`, then calls `next` with the request granted (its
 * variables added), or answers it. An exchange that is itself an authorizer request
 * (a front end's) is not asked about again: the caller checks ex.role.
 */
export function authorize(ctx: FrontendContext, pool: Pool, rules: AuthorizerRules, ex: Exchange, next: () => void): void {
  const log = ctx.logger;
  const authPool = ctx.getPool(rules.pool);
  if (authPool === undefined) {
    refuse(log, pool, rules, ex, undefined, { kind: 'failed', code: ErrorCodes.NO_POOL, reason: `no pool named "${rules.pool}"` });
    return;
  }
  const guard = guardOf(pool, rules, authPool, log);
  const cache = guard.cache;
  const now = performance.now();
  const key = cache?.keyOf(ex.params);
  if (key !== undefined) {
    const kept = cache!.get(key, now);
    if (kept !== undefined) {
      grant(ex, kept, 'cached');
      next();
      return;
    }
  }
  const sink = new AnswerSink((answer) => {
    if (ex.onAbort === leave) ex.onAbort = undefined;
    if (ex.finished) return; // the client left; the authorizer request was aborted with it
    if (answer.kind !== 'allow') {
      refuse(log, pool, rules, ex, guard, answer);
      return;
    }
    if (key !== undefined) cache!.put(key, answer.variables, performance.now());
    grant(ex, answer.variables, 'allowed');
    next();
  });
  const aex = new Exchange(authorizerParams(ex.params), sink, ex.frontend, now);
  sink.ex = aex;
  aex.role = Role.Authorizer;
  aex.endBody();
  // Until the answer, this step holds the request: a client that leaves cancels the question.
  const leave = (): void => aex.abort();
  ex.onAbort = leave;
  authPool.dispatch(aex);
}

function grant(ex: Exchange, variables: readonly string[], how: 'allowed' | 'cached'): void {
  ex.authorization = how;
  // Each name replaces every copy the client sent (FastCGI PARAMS bytes stay undecoded).
  if (variables.length > 0) ex.params.override(variables);
}

/** A deny goes to the client as the authorizer wrote it; a failure is 503, with one warning per episode. */
function refuse(log: Logger, pool: Pool, rules: AuthorizerRules, ex: Exchange, guard: Guard | undefined, answer: Exclude<Answer, { kind: 'allow' }>): void {
  // Named for the access log and the pool's status; the pool itself never saw it.
  ex.pool = pool.name;
  if (answer.kind === 'deny') {
    ex.authorization = 'denied';
    ex.recordsPassed = false; // a response built here, not a backend's records
    ex.respondHead(answer.head);
    for (const chunk of answer.body) ex.respondBody(chunk);
    ex.respondEnd();
    return;
  }
  ex.authorization = 'failed';
  const message = `pool ${pool.name}: authorizer pool ${rules.pool} failed (${answer.code}: ${answer.reason}); request denied`;
  if (guard === undefined || guard.warnings.hit(answer.code)) {
    log.warn({ code: ErrorCodes.AUTHORIZER_FAILED, pool: pool.name, authorizer: rules.pool, cause: answer.code }, message);
  }
  ex.respondError(new ProxyError(ErrorCodes.AUTHORIZER_FAILED, 503, message));
}
