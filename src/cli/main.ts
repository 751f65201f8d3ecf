/**
 * The fcgi-pm command line; bin/fcgi-pm calls main(). `run` (the daemon, and an upgrade's
 * check and bridge) loads only its own command's modules; any other command loads the
 * whole program (program.ts).
 */
import { CommanderError } from 'commander';
import { baseProgram, finishProgram } from './program-base.js';
import { EXIT_OK, EXIT_USAGE } from './report.js';
import { runCommand } from './run.js';

/** The global options that take a value (program-base.ts). */
const VALUED = new Set(['--log-level', '--log-format']);

/** Whether the arguments (after node and the script) run the daemon: `run` first, after global options with values only. */
export function runsDaemon(args: readonly string[]): boolean {
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (VALUED.has(a)) i++;
    else if (!/^--log-(level|format)=/.test(a)) return a === 'run';
  }
  return false;
}

export async function main(argv: readonly string[] = process.argv): Promise<void> {
  // `fcgi-pm --help | head` closes the pipe early; that is not an error.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw err;
  });
  try {
    const program = runsDaemon(argv.slice(2)) ? finishProgram(baseProgram().addCommand(runCommand())) : (await import('./program.js')).buildProgram();
    await program.parseAsync([...argv]);
  } catch (err) {
    if (!(err instanceof CommanderError)) throw err;
    // Its message is already on stderr; --help and --version end here too.
    process.exitCode = err.exitCode === 0 ? EXIT_OK : EXIT_USAGE;
  }
}
