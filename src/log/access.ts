/**
 * The access log: one line per finished request, at info level on a child logger
 * bound to {kind: 'access'}. The daemon sets the same function as every exchange's
 * onFinish, so there is no closure per request.
 */
import type { Exchange } from '../protocol/exchange.js';
import type { Logger } from './log.js';

export type AccessLogger = (ex: Exchange) => void;

/** Request variables are latin1 byte strings; show UTF-8 text where there is any. */
function text(s: string | undefined): string {
  if (s === undefined) return '';
  // eslint-disable-next-line no-control-regex
  return /[^\x00-\x7f]/.test(s) ? Buffer.from(s, 'latin1').toString('utf8') : s;
}

function requestUri(ex: Exchange): string {
  const uri = ex.params.get('REQUEST_URI');
  if (uri !== undefined && uri !== '') return text(uri);
  const qs = ex.params.get('QUERY_STRING');
  return text((ex.params.get('SCRIPT_NAME') ?? '') + (ex.params.get('PATH_INFO') ?? '') + (qs ? `?${qs}` : ''));
}

/** Status logged for a client that left before the response head (nginx's convention). */
export const STATUS_CLIENT_CLOSED = 499;

/** The fields of one access-log line. Exported for tests and the status page. */
export function accessFields(ex: Exchange, now: number): Record<string, unknown> {
  const aborted = ex.state === 'aborted';
  return {
    method: text(ex.params.get('REQUEST_METHOD')) || '-',
    uri: requestUri(ex),
    status: ex.status || (aborted ? STATUS_CLIENT_CLOSED : 0),
    bytes: ex.bytesOut,
    ms: Math.round((now - ex.startedAt) * 10) / 10,
    frontend: ex.frontend,
    remote: ex.params.get('REMOTE_ADDR'),
    pool: ex.pool,
    backend: ex.backend,
    worker: ex.workerPid,
    error: ex.error?.code,
    aborted: aborted || undefined,
  };
}

/**
 * Returns the function to set as ex.onFinish, or undefined when access logging is off
 * (or info is disabled) so the daemon can skip setting it at all.
 */
export function createAccessLogger(logger: Logger, enabled: boolean): AccessLogger | undefined {
  const log = logger.child({ kind: 'access' });
  if (!enabled || !log.isLevelEnabled('info')) return undefined;
  return (ex: Exchange) => {
    const f = accessFields(ex, performance.now());
    log.info(f, `${f.method} ${f.uri} ${f.status}`);
  };
}
