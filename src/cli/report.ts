/** How the CLI tells a human what went wrong: plain lines on stderr, no stack traces for expected errors. */
import { ConfigError } from '../errors.js';
import { UsageError } from './quick.js';

export const EXIT_OK = 0;
/** Bad config, or the daemon could not start or stop cleanly. */
export const EXIT_FAILURE = 1;
/** Wrong command-line usage (commander uses 1 for its own; ours say which option). */
export const EXIT_USAGE = 2;

/**
 * An error we raise on purpose or the OS reports (errno): the message says it all, a
 * stack would not help. Anything else is a bug and keeps its stack in the log.
 */
export function isExpectedError(err: unknown): err is Error & { code: string } {
  return err instanceof Error && typeof (err as NodeJS.ErrnoException).code === 'string';
}

/** Writes the error to stderr and returns the exit code it deserves. */
export function reportError(err: unknown): number {
  if (err instanceof ConfigError) {
    for (const p of err.problems) process.stderr.write(`${p}\n`);
    const n = err.problems.length;
    if (n > 1) process.stderr.write(`fcgi-pm: ${n} problems in the configuration\n`);
    return EXIT_FAILURE;
  }
  if (err instanceof UsageError) {
    process.stderr.write(`fcgi-pm: ${err.message}\n(see fcgi-pm run --help)\n`);
    return EXIT_USAGE;
  }
  const e = err as NodeJS.ErrnoException;
  const code = typeof e?.code === 'string' ? ` [${e.code}]` : '';
  process.stderr.write(`fcgi-pm: ${e?.message ?? String(err)}${code}\n`);
  return EXIT_FAILURE;
}
