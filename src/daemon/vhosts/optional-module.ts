/**
 * The database drivers are optional dependencies, loaded on first use: a daemon without
 * `vhosts: { sqlite | postgres }` never loads them (start-up time and memory), and an
 * install where better-sqlite3 could not be built (no compiler) still runs everything else.
 */
import { createRequire } from 'node:module';

const requireFromHere = createRequire(import.meta.url);

/** `name` (a CommonJS package), or an error that says what needs it and how to get it. */
export function loadOptional<T>(name: string, neededBy: string): T {
  try {
    return requireFromHere(name) as T;
  } catch (err) {
    const why = (err as Error).message.split('\n')[0];
    throw new Error(`${neededBy} needs the npm package ${name}, which is not installed or not built (${why}); run npm install in fcgi-pm's directory (better-sqlite3 builds with make, g++ and python3)`);
  }
}
