/** A logger whose JSON lines go to a callback, typed as the daemon's Logger (codes on warnings). */
import { pino } from 'pino';
import type { Logger } from '../../src/log/log.js';

export function lineLogger(level: string, onLine: (line: string) => void): Logger {
  return pino({ level }, { write: onLine }) as unknown as Logger;
}
