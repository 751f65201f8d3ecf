/**
 * The step every front end ends a request's decoding with: hand the exchange to the
 * daemon (access log) and to the listener's pool, looked up now so a reload can swap it,
 * or, on a `vhosts` listener, to the pool of the site the request's host names.
 * A pool with script rules gets only what its ScriptGate lets through.
 */
import { ErrorCodes, ProxyError } from '../errors.js';
import type { Exchange } from '../protocol/exchange.js';
import { Role } from '../protocol/fastcgi.js';
import type { Pool } from '../pool/types.js';
import type { FrontendEnv } from './env.js';
import type { RewriteRule } from '../config/types.js';
import type { SiteView } from './types.js';
import { authorize } from './authorize.js';
import { rewriteParams } from './rewrite-params.js';
import { latin1Path, type ScriptVerdict } from './script-gate.js';

/** `serveLocal`: the front end may answer itself once it knows the pool (the HTTP listener's static files). */
export function dispatchExchange(env: FrontendEnv, ex: Exchange, serveLocal?: (pool: Pool) => boolean): void {
  announceExchange(env, ex);
  routeExchange(env, ex, serveLocal);
}

/** The daemon hears of every exchange, with the listener that took it, before it is routed. */
export function announceExchange(env: FrontendEnv, ex: Exchange): void {
  ex.listener = env.listener.address;
  env.ctx.onExchange(ex);
}

/**
 * The second half of dispatchExchange, for a front end that announces the exchange at
 * once but routes it later (FastCGI: after the rest of the chunk, so a request's empty
 * STDIN is known before the backend write).
 */
export function routeExchange(env: FrontendEnv, ex: Exchange, serveLocal?: (pool: Pool) => boolean): void {
  if (ex.finished) return; // aborted before it was routed
  const cfg = env.cfg;
  // status_path / ping_path / ready_path are answered by the daemon, not a worker (read per request: a reload may set them).
  if ((cfg.statusPath !== undefined || cfg.pingPath !== undefined || cfg.readyPath !== undefined) && env.ctx.localResponder?.respond(cfg, ex) === true) return;
  // authorizer_pool takes the listener's authorizer requests, on a vhosts listener too (no site is asked).
  const name = ex.role === Role.Authorizer && cfg.authorizerPool !== undefined ? cfg.authorizerPool : undefined;
  const routed = cfg.vhosts === true && name === undefined ? sitePool(env, ex) : undefined;
  const pool = cfg.vhosts === true && name === undefined ? routed?.pool : env.ctx.getPool(name ?? cfg.pool);
  if (pool === undefined) {
    if (!ex.finished) ex.respondError(new ProxyError(ErrorCodes.NO_POOL, 500, `listener ${env.listener.address} names pool "${name ?? cfg.pool}" which does not exist`));
    return;
  }
  // A pool with an authorizer gets only what it grants, static files of the HTTP listener
  // included; an authorizer request itself (a front end's) is not asked about again.
  const authorizer = pool.authorizer;
  if (authorizer !== undefined && ex.role !== Role.Authorizer) authorize(env.ctx, pool, authorizer, ex, () => admitted(env, pool, ex, routed?.site, serveLocal, true));
  else admitted(env, pool, ex, routed?.site, serveLocal, false);
}

/** The request may go to `pool`: answered by the front end, or rewritten and past the script guard. */
/** `waited`: for I/O since the pool was looked up (the authorizer; later, a rewrite's or the script check's lookups): see deliver. */
function admitted(env: FrontendEnv, pool: Pool, ex: Exchange, site: SiteView | undefined, serveLocal: ((pool: Pool) => boolean) | undefined, waited: boolean): void {
  if (ex.finished) return; // the client left while it was authorized
  if (serveLocal?.(pool) === true) return;
  // The HTTP listener rewrote the URL itself, before splitting it.
  const rewrite = env.cfg.protocol === 'http' ? undefined : rulesOf(env, site);
  const rewritten = rewrite === undefined ? undefined : rewriteParams(ex.params, rewrite, env.scripts.cache);
  if (rewritten instanceof Promise) void rewritten.then(() => guard(env, pool, ex, serveLocal, true));
  else guard(env, pool, ex, serveLocal, waited);
}

/** Site rules first, then the listener's; undefined when there are none. */
function rulesOf(env: FrontendEnv, site: SiteView | undefined): readonly RewriteRule[] | undefined {
  const own = env.cfg.rewrite;
  if (site === undefined || site.rewrite.length === 0) return own !== undefined && own.length > 0 ? own : undefined;
  if (own === undefined || own.length === 0) return site.rewrite;
  let both = combined.get(site);
  if (both === undefined) {
    both = [...site.rewrite, ...own];
    combined.set(site, both);
  }
  return both;
}

const combined = new WeakMap<SiteView, readonly RewriteRule[]>();

/** A pool with script rules gets only what the listener's ScriptGate lets through. */
function guard(env: FrontendEnv, pool: Pool, ex: Exchange, serveLocal: ((pool: Pool) => boolean) | undefined, waited: boolean): void {
  if (ex.finished) return; // the client left while the file was looked up
  const rules = pool.scriptRules;
  if (rules === undefined) {
    deliver(env, pool, ex, serveLocal, waited);
    return;
  }
  // A pool with `script` runs that file whatever the request named.
  const verdict = env.scripts.check(pool.script ?? ex.params.get('SCRIPT_FILENAME'), rules);
  if (verdict instanceof Promise) void verdict.then((v) => admit(env, pool, ex, v, serveLocal, true));
  else admit(env, pool, ex, verdict, serveLocal, waited);
}

function admit(env: FrontendEnv, pool: Pool, ex: Exchange, refusal: ScriptVerdict, serveLocal: ((pool: Pool) => boolean) | undefined, waited: boolean): void {
  if (ex.finished) return; // the client left while the file was looked up
  if (refusal === undefined) deliver(env, pool, ex, serveLocal, waited);
  else {
    ex.pool = pool.name; // counted as the pool's refusal, though the pool never saw it
    env.scripts.refuse(env.listener.log, ex, refusal);
  }
}

/**
 * The authorizer, a rewrite or the script check may have waited for I/O since the pool
 * was looked up: a reload that replaced the pool meanwhile has begun stopping it, and it
 * would answer 503. The request is routed again, to the pool now in service. Without a
 * wait (`waited` false: the usual request, in the call that looked the pool up) nothing
 * can have replaced it, and it is not looked up again.
 */
function deliver(env: FrontendEnv, pool: Pool, ex: Exchange, serveLocal: ((pool: Pool) => boolean) | undefined, waited: boolean): void {
  if (!waited) {
    pool.dispatch(ex);
    return;
  }
  const now = env.ctx.getPool(pool.name);
  if (now !== undefined && now !== pool) routeExchange(env, ex, serveLocal);
  else pool.dispatch(ex);
}

/**
 * A vhosts listener: the site's pool, with the script looked up under the site's
 * document_root (the front end's own root does not know the site). No site: the
 * listener's `pool` if it names one, else 404 (undefined is returned either way once answered).
 */
function sitePool(env: FrontendEnv, ex: Exchange): { pool: Pool | undefined; site?: SiteView } | undefined {
  const routed = env.ctx.route?.(ex.params);
  if (routed === undefined) {
    if (env.cfg.pool !== '') return { pool: env.ctx.getPool(env.cfg.pool) };
    const host = ex.params.get('HTTP_HOST') ?? ex.params.get('SERVER_NAME') ?? '';
    ex.respondError(new ProxyError(ErrorCodes.VHOST_UNKNOWN, 404, `no site is named ${JSON.stringify(host)}`));
    return undefined;
  }
  // CGI variables are latin1 strings of bytes; the root is UTF-8 on disk.
  const root = latin1Path(routed.site.documentRoot);
  const p = ex.params;
  p.set('DOCUMENT_ROOT', root);
  let script = p.get('SCRIPT_NAME');
  if (script !== undefined && script.endsWith('/')) {
    // A directory URL runs its index, as on the HTTP listener (nginx's fastcgi_index).
    script += env.cfg.index;
    p.set('SCRIPT_NAME', script);
  }
  if (script !== undefined) p.set('SCRIPT_FILENAME', root + script);
  const info = p.get('PATH_INFO');
  if (info !== undefined && info !== '') p.set('PATH_TRANSLATED', root + info);
  return routed;
}
