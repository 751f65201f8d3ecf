/**
 * The access log: one line per finished request, at info level on a child logger
 * bound to {kind: 'access'}. The daemon sets the same function as every exchange's
 * onFinish, so there is no closure per request.
 *
 * createAccessLog adds the choices: JSON fields or a PHP-FPM-like %-format
 * (src/log/access-format.ts), in the main log or in its own file (log.access_file), and
 * a request that ran past its pool's slow_request is logged at warn with `slow: true`
 * (or %S), so slow requests can be found in the access log too.
 */
import type { DestinationStream } from 'pino';
import { FPM_ACCESS_FORMAT } from '../config/access-format.js';
import { ErrorCodes } from '../errors.js';
import type { Exchange } from '../protocol/exchange.js';
import { compileAccessFormat, paramText, type LineEnv, type LineFacts } from './access-format.js';
import { createLogger, type Logger } from './log.js';

/** `now`: performance.now() at the end, when the caller has read the clock already. */
export type AccessLogger = (ex: Exchange, now?: number) => void;

const text = paramText;

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
    authorizer: ex.authorization,
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
  return (ex: Exchange, now = performance.now()) => {
    const f = accessFields(ex, now);
    log.info(f, `${f.method} ${f.uri} ${f.status}`);
  };
}

export interface AccessLogOptions {
  /** The main logger: JSON access lines go here when there is no access file. */
  logger: Logger;
  enabled: boolean;
  /** 'json' (default), 'fpm' or a %-format. */
  format?: string | undefined;
  /** log.access_file's stream: lines go there instead of the main log. */
  file?: DestinationStream | undefined;
  /** The pool's slow_request in ms (0 = off), by pool name. */
  slowMs?: ((pool: string | undefined) => number) | undefined;
  workerFigures?: LineEnv['workerFigures'];
}

/**
 * Returns the function to set as ex.onFinish, or undefined when there is nothing to
 * write (access logging off, or JSON into a main log with info disabled).
 */
export function createAccessLog(opts: AccessLogOptions): AccessLogger | undefined {
  if (!opts.enabled) return undefined;
  const format = opts.format === undefined || opts.format === 'json' ? 'json' : opts.format === 'fpm' ? FPM_ACCESS_FORMAT : opts.format;
  const slowMs = opts.slowMs ?? (() => 0);
  // A file gets its own pino instance so its lines keep the JSON shape of the main log.
  const log = (opts.file !== undefined ? createLogger({ level: 'info', destination: opts.file, format: 'json' }) : opts.logger).child({ kind: 'access' });
  if (format === 'json') {
    if (!log.isLevelEnabled('info')) return undefined;
    return (ex: Exchange, now = performance.now()) => {
      const f = accessFields(ex, now);
      const limit = slowMs(ex.pool);
      if (limit > 0 && now - ex.startedAt >= limit) {
        f.slow = true;
        // A request that failed is filed under its failure (a 504 is ERR_REQUEST_TIMEOUT), slow or not.
        log.warn({ ...f, code: ex.error?.code ?? ErrorCodes.SLOW_REQUEST }, `slow request: ${f.method} ${f.uri} ${f.status} took ${f.ms} ms (slow_request ${limit} ms)`);
      } else {
        log.info(f, `${f.method} ${f.uri} ${f.status}`);
      }
    };
  }
  const line = compileAccessFormat(format, { daemonPid: process.pid, workerFigures: opts.workerFigures });
  const facts = (ex: Exchange, now = performance.now()): LineFacts => {
    const endEpoch = Date.now();
    const durationMs = now - ex.startedAt;
    const limit = slowMs(ex.pool);
    return {
      ex,
      startEpoch: endEpoch - durationMs,
      endEpoch,
      durationMs,
      status: ex.status || (ex.state === 'aborted' ? STATUS_CLIENT_CLOSED : 0),
      slow: limit > 0 && durationMs >= limit,
    };
  };
  const file = opts.file;
  if (file !== undefined) {
    return (ex: Exchange, now?: number) => {
      file.write(line(facts(ex, now)) + '\n');
    };
  }
  if (!log.isLevelEnabled('info')) return undefined;
  return (ex: Exchange, now?: number) => {
    const f = facts(ex, now);
    if (f.slow) log.warn({ code: ex.error?.code ?? ErrorCodes.SLOW_REQUEST, slow: true }, line(f));
    else log.info(line(f));
  };
}
