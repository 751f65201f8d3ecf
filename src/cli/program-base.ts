/**
 * What every form of the fcgi-pm program shares (program.ts, and main.ts's lean one for
 * `run`): its name, version and global options, and usage mistakes thrown, not exited.
 */
import { Command, Option } from 'commander';
import { LOG_FORMATS, LOG_LEVELS } from '../config/keys.js';
import { packageVersion } from '../version.js';

/** The program without its commands. */
export function baseProgram(): Command {
  return new Command('fcgi-pm')
    .description('FastCGI/SCGI application process manager: spawns php-cgi and other FastCGI/SCGI\nworkers on demand and proxies FastCGI, SCGI and HTTP front ends to them.')
    .version(packageVersion(), '-V, --version', 'print the version')
    .addOption(new Option('--log-level <level>', 'log level, overrides the config file').choices(LOG_LEVELS))
    .addOption(new Option('--log-format <format>', 'json, pretty (for people) or auto (pretty on a terminal); overrides log.format').choices(LOG_FORMATS))
    .showHelpAfterError('(run "fcgi-pm --help" for usage)');
}

/** The program once its commands are added. */
export function finishProgram(program: Command): Command {
  // Commander would exit 1 on a usage mistake, the same as a bad config; throw instead
  // so main() can use 2, like our own usage errors.
  for (const cmd of [program, ...program.commands]) cmd.exitOverride();
  return program;
}
