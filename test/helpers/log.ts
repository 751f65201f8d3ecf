/** A logger whose JSON lines go to a callback, typed as the daemon's Logger (codes on warnings). */
import { pino } from 'pino';
import type { Logger } from '../../src/log/log.js';

export function lineLogger(level: string, onLine: (line: string) => void): Logger {
  return pino({ level }, { write: onLine }) as unknown as Logger;
}

/** Keys that occur more than once at the top level of one JSON object line. */
export function duplicateTopLevelKeys(line: string): string[] {
  const seen = new Set<string>();
  const dups: string[] = [];
  let depth = 0;
  let expectKey = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (c === '"') {
      let j = i + 1;
      while (line[j] !== '"') j += line[j] === '\\' ? 2 : 1;
      if (depth === 1 && expectKey) {
        const key = JSON.parse(line.slice(i, j + 1)) as string;
        if (seen.has(key)) dups.push(key);
        seen.add(key);
        expectKey = false;
      }
      i = j;
    } else if (c === '{' || c === '[') {
      depth++;
      expectKey = depth === 1;
    } else if (c === '}' || c === ']') {
      depth--;
    } else if (c === ',' && depth === 1) {
      expectKey = true;
    }
  }
  return dups;
}
