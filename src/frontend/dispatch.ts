/**
 * The step every front end ends a request's decoding with: hand the exchange to the
 * daemon (access log) and to the listener's pool, looked up now so a reload can swap it.
 */
import { ErrorCodes, ProxyError } from '../errors.js';
import type { Exchange } from '../protocol/exchange.js';
import type { FrontendEnv } from './env.js';

export function dispatchExchange(env: FrontendEnv, ex: Exchange): void {
  env.ctx.onExchange(ex);
  const cfg = env.cfg;
  // status_path / ping_path are answered by the daemon, not a worker (read per request: a reload may set them).
  if ((cfg.statusPath !== undefined || cfg.pingPath !== undefined) && env.ctx.localResponder?.respond(cfg, ex) === true) return;
  const pool = env.ctx.getPool(env.cfg.pool);
  if (pool === undefined) {
    ex.respondError(new ProxyError(ErrorCodes.NO_POOL, 500, `listener ${env.listener.address} names pool "${env.cfg.pool}" which does not exist`));
    return;
  }
  pool.dispatch(ex);
}
