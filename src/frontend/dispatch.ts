/**
 * The step every front end ends a request's decoding with: hand the exchange to the
 * daemon (access log) and to the listener's pool, looked up now so a reload can swap it.
 * A pool with script rules gets only what its ScriptGate lets through.
 */
import { ErrorCodes, ProxyError } from '../errors.js';
import type { Exchange } from '../protocol/exchange.js';
import type { Pool } from '../pool/types.js';
import type { FrontendEnv } from './env.js';
import type { ScriptVerdict } from './script-gate.js';

/** `serveLocal`: the front end may answer itself once it knows the pool (the HTTP listener's static files). */
export function dispatchExchange(env: FrontendEnv, ex: Exchange, serveLocal?: (pool: Pool) => boolean): void {
  env.ctx.onExchange(ex);
  routeExchange(env, ex, serveLocal);
}

/**
 * The second half of dispatchExchange, for a front end that announces the exchange at
 * once but routes it later (FastCGI: after the rest of the chunk, so a request's empty
 * STDIN is known before the backend write).
 */
export function routeExchange(env: FrontendEnv, ex: Exchange, serveLocal?: (pool: Pool) => boolean): void {
  if (ex.finished) return; // aborted before it was routed
  const cfg = env.cfg;
  // status_path / ping_path are answered by the daemon, not a worker (read per request: a reload may set them).
  if ((cfg.statusPath !== undefined || cfg.pingPath !== undefined) && env.ctx.localResponder?.respond(cfg, ex) === true) return;
  const pool = env.ctx.getPool(env.cfg.pool);
  if (pool === undefined) {
    ex.respondError(new ProxyError(ErrorCodes.NO_POOL, 500, `listener ${env.listener.address} names pool "${env.cfg.pool}" which does not exist`));
    return;
  }
  if (serveLocal?.(pool) === true) return;
  const rules = pool.scriptRules;
  if (rules === undefined) {
    pool.dispatch(ex);
    return;
  }
  const verdict = env.scripts.check(ex.params.get('SCRIPT_FILENAME'), rules);
  if (verdict instanceof Promise) void verdict.then((v) => admit(env, pool, ex, v));
  else admit(env, pool, ex, verdict);
}

function admit(env: FrontendEnv, pool: Pool, ex: Exchange, refusal: ScriptVerdict): void {
  if (ex.finished) return; // the client left while the file was looked up
  if (refusal === undefined) pool.dispatch(ex);
  else env.scripts.refuse(env.listener.log, ex, refusal);
}
