/**
 * status_path, ping_path and ready_path on a listener: requests for them are answered by the daemon
 * itself (like PHP-FPM's pm.status_path / ping.path), so they work when every worker is
 * busy and never count as the pool's requests.
 *
 * Path: SCRIPT_NAME, as PHP-FPM matches it (nginx: fastcgi_param SCRIPT_NAME
 * $fastcgi_script_name), or the path of REQUEST_URI when there is no SCRIPT_NAME and
 * always for fcgi-pm's own HTTP listener. Client: REMOTE_ADDR against status_allow.
 * Format: the query string's keys, as PHP-FPM reads $_GET: json, html, full,
 * openmetrics (or prometheus: all pools, Prometheus text), snapshot (fcgi-pm's own JSON),
 * pool=NAME (another pool's page; default the listener's pool). ready_path: 200 or 503
 * (readiness.ts), ?pool=NAME for one pool's readiness too; ping_path: liveness, no work.
 */
import { compileAllow, DEFAULT_STATUS_ALLOW, type AllowMatcher } from '../config/cidr.js';
import type { ListenerConfig } from '../config/types.js';
import type { Logger } from '../log/log.js';
import { parseCgiHead } from '../protocol/cgi-response.js';
import type { Exchange } from '../protocol/exchange.js';
import { FPM_CONTENT_TYPES, renderFpmPool, type FpmFormat } from './render-fpm.js';
import { OPENMETRICS_CONTENT_TYPE, PROMETHEUS_CONTENT_TYPE, renderPrometheusBytes } from './render-prometheus.js';
import type { Readiness } from './readiness.js';
import type { SnapshotOptions } from './snapshot.js';
import type { StatusSnapshot } from './types.js';
import { ErrorCodes } from '../errors.js';

export interface StatusResponder {
  /** True when it took the exchange (the path matched); false: dispatch it to the pool. */
  respond(cfg: ListenerConfig, ex: Exchange): boolean;
}

const NO_CACHE = 'Cache-Control: no-cache, no-store, must-revalidate\r\nExpires: Thu, 01 Jan 1970 00:00:00 GMT\r\n';

/** Drops a request body nobody reads, so the front end is never left paused. */
const DISCARD = { data: (): boolean => true, end: (): void => {} };

function answer(ex: Exchange, status: number, reason: string, contentType: string, body: string | Buffer): void {
  if (ex.finished) return;
  const buf = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  const head = `Status: ${status} ${reason}\r\nContent-Type: ${contentType}\r\nContent-Length: ${buf.length}\r\n${NO_CACHE}\r\n`;
  ex.respondHead(parseCgiHead(Buffer.from(head, 'latin1')));
  if (buf.length > 0) ex.respondBody(buf);
  ex.respondEnd();
}

function requestPath(ex: Exchange): string {
  const script = ex.frontend === 'http' ? undefined : ex.params.get('SCRIPT_NAME');
  if (script !== undefined && script !== '') return script;
  const uri = ex.params.get('REQUEST_URI') ?? ex.params.get('DOCUMENT_URI') ?? '';
  const q = uri.indexOf('?');
  return q < 0 ? uri : uri.slice(0, q);
}

function queryOf(ex: Exchange): Map<string, string> {
  let qs = ex.params.get('QUERY_STRING');
  if (qs === undefined) {
    const uri = ex.params.get('REQUEST_URI') ?? '';
    const q = uri.indexOf('?');
    qs = q < 0 ? '' : uri.slice(q + 1);
  }
  const out = new Map<string, string>();
  for (const part of qs.split('&')) {
    if (part === '') continue;
    const eq = part.indexOf('=');
    const k = eq < 0 ? part : part.slice(0, eq);
    let v = eq < 0 ? '' : part.slice(eq + 1);
    try {
      v = decodeURIComponent(v.replace(/\+/g, ' '));
    } catch {
      // keep it as sent
    }
    out.set(k.toLowerCase(), v);
  }
  return out;
}

export function createStatusResponder(snapshot: (opts: SnapshotOptions) => Promise<StatusSnapshot>, ready: (pool?: string) => Readiness, logger: Logger): StatusResponder {
  // Keyed by the rule list itself: a reload that changes status_allow sets a new list.
  const matchers = new WeakMap<readonly string[], AllowMatcher>();
  const allowed = (cfg: ListenerConfig, ex: Exchange): boolean => {
    const rules = cfg.statusAllow ?? DEFAULT_STATUS_ALLOW;
    let m = matchers.get(rules);
    if (m === undefined) {
      m = compileAllow(rules);
      matchers.set(rules, m);
    }
    return m(ex.params.get('REMOTE_ADDR'));
  };

  const serveStatus = (cfg: ListenerConfig, ex: Exchange): void => {
    const q = queryOf(ex);
    const prometheus = q.has('openmetrics') || q.has('prometheus') || q.has('metrics');
    const native = q.has('snapshot');
    const full = q.has('full');
    const format: FpmFormat = q.has('json') ? 'json' : q.has('html') ? 'html' : 'text';
    const poolName = q.get('pool') || cfg.pool;
    snapshot({ processes: full || native }).then(
      (s) => {
        if (native) return answer(ex, 200, 'OK', 'application/json', JSON.stringify(s) + '\n');
        if (prometheus) {
          const om = q.has('openmetrics');
          return answer(ex, 200, 'OK', om ? OPENMETRICS_CONTENT_TYPE : PROMETHEUS_CONTENT_TYPE, renderPrometheusBytes(s, { openMetrics: om }));
        }
        const pool = s.pools.find((p) => p.name === poolName);
        if (pool === undefined) return answer(ex, 404, 'Not Found', 'text/plain; charset=utf-8', `no pool named ${poolName}\n`);
        const body = renderFpmPool(pool, s.daemon.now, { format, full });
        answer(ex, 200, 'OK', FPM_CONTENT_TYPES[format], format === 'json' ? body + '\n' : body);
      },
      (err: unknown) => {
        logger.error({ code: ErrorCodes.INTERNAL, err }, 'status page failed');
        answer(ex, 500, 'Internal Server Error', 'text/plain; charset=utf-8', 'status unavailable\n');
      },
    );
  };

  return {
    respond(cfg: ListenerConfig, ex: Exchange): boolean {
      const path = requestPath(ex);
      const isStatus = cfg.statusPath !== undefined && path === cfg.statusPath;
      const isPing = !isStatus && cfg.pingPath !== undefined && path === cfg.pingPath;
      const isReady = !isStatus && !isPing && cfg.readyPath !== undefined && path === cfg.readyPath;
      if (!isStatus && !isPing && !isReady) return false;
      ex.backend = 'fcgi-pm';
      ex.consumeBody(DISCARD);
      if (!allowed(cfg, ex)) {
        const remote = ex.params.get('REMOTE_ADDR') ?? '(none)';
        logger.debug({ remote, path }, 'status/ping request refused by status_allow');
        answer(ex, 403, 'Forbidden', 'text/plain; charset=utf-8', `Access denied: ${remote} is not in status_allow\n`);
        return true;
      }
      if (isPing) answer(ex, 200, 'OK', 'text/plain; charset=utf-8', cfg.pingResponse ?? 'pong');
      else if (isReady) {
        const r = ready(queryOf(ex).get('pool') || undefined);
        answer(ex, r.status, r.status === 200 ? 'OK' : r.status === 404 ? 'Not Found' : 'Service Unavailable', 'text/plain; charset=utf-8', `${r.reason}\n`);
      }
      else serveStatus(cfg, ex);
      return true;
    },
  };
}
