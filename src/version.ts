/**
 * fcgi-pm's version, from the package.json at the package root (a leaf: the CLI's
 * --version and the daemon's status both read it here).
 */
import { readFileSync } from 'node:fs';

export function packageVersion(): string {
  try {
    // dist/src/version.js → package.json at the package root.
    return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}
