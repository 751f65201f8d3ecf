/**
 * Structured logs (pino, JSON lines, or human lines on a terminal: pretty.ts). Child
 * loggers per pool and per worker are made once and kept; nothing is logged per FastCGI
 * record above `trace`.
 *
 * Our Logger is pino's with one rule the compiler enforces: a warn, error or fatal line
 * carries a stable `code` from src/errors.ts, the key an operator greps and alerts on.
 */
import { pino, type Bindings, type DestinationStream, type Logger as PinoLogger } from 'pino';
import type { LOG_FORMATS } from '../config/keys.js';
import type { ErrorCode } from '../errors.js';
import { prettyStream } from './pretty.js';
import { recentWarnings } from './warning-ring.js';

/** A warn/error/fatal call: fields with a stable code, then the message. */
export type CodedLogFn = <T extends { code: ErrorCode }>(fields: T, msg: string) => void;

export interface Logger extends Omit<PinoLogger, 'warn' | 'error' | 'fatal' | 'child'> {
  warn: CodedLogFn;
  error: CodedLogFn;
  fatal: CodedLogFn;
  child(bindings: Bindings): Logger;
}

export type LogFormat = (typeof LOG_FORMATS)[number];

export interface LogOptions {
  level: string;
  /** Defaults to stdout. */
  destination?: DestinationStream | number | string;
  /** 'auto' (the default): human lines when the destination is a terminal, JSON otherwise. */
  format?: LogFormat;
  /** For 'auto': whether the destination is a terminal (default: stdout's isTTY when writing to fd 1). */
  isTTY?: boolean;
}

export function createLogger(opts: LogOptions): Logger {
  const dest = opts.destination === undefined || typeof opts.destination === 'number' || typeof opts.destination === 'string'
    ? pino.destination({ dest: opts.destination ?? 1, sync: false })
    : opts.destination;
  const toStdout = opts.destination === undefined || opts.destination === 1;
  const tty = opts.isTTY ?? (toStdout && process.stdout.isTTY === true);
  const pretty = opts.format === 'pretty' || ((opts.format ?? 'auto') === 'auto' && tty);
  const out = pretty ? prettyStream(dest, { color: tty && process.env.NO_COLOR === undefined }) : dest;
  // Every line passes the warnings ring on its way out (the dashboard's panel).
  const hooks = { streamWrite: (line: string): string => (recentWarnings.line(line), line) };
  return pino({ level: opts.level, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime, hooks }, out) as unknown as Logger;
}

/** A logger that drops everything, for unit tests. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' }) as unknown as Logger;
}

/**
 * A child bound to `bindings`, leaving out keys the parent already binds to the same
 * value: pino writes every binding it is given, so binding `pool` twice writes the key
 * twice, and log stores such as Elasticsearch reject duplicate keys.
 */
export function childLogger(parent: Logger, bindings: Bindings): Logger {
  const have = parent.bindings();
  const fresh = Object.entries(bindings).filter(([k, v]) => have[k] !== v);
  return fresh.length === 0 ? parent : parent.child(Object.fromEntries(fresh));
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
