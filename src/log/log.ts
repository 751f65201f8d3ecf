/**
 * Structured logs (pino, JSON lines). Child loggers per pool and per worker are made
 * once and kept; nothing is logged per FastCGI record above `trace`.
 */
import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

export interface LogOptions {
  level: string;
  /** Defaults to stdout. */
  destination?: DestinationStream | number | string;
}

export function createLogger(opts: LogOptions): Logger {
  const dest = opts.destination === undefined || typeof opts.destination === 'number' || typeof opts.destination === 'string'
    ? pino.destination({ dest: opts.destination ?? 1, sync: false })
    : opts.destination;
  return pino({ level: opts.level, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime }, dest);
}

/** A logger that drops everything, for unit tests. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

/** Resolves once buffered lines reached the destination (call before process.exit). */
export function flushLogger(logger: Logger): Promise<void> {
  return new Promise((resolve) => {
    try {
      logger.flush(() => resolve());
    } catch {
      resolve(); // a destination without flush (tests) has nothing buffered
    }
  });
}
