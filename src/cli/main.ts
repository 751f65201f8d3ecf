/**
 * The fcgi-pm command line. One file per command; bin/fcgi-pm calls main().
 * Commands: run, check, status, workers, reload, restart, drain, stop, upgrade, reopen-logs,
 * bench, tune, dashboard.
 */
import { Command, CommanderError, Option } from 'commander';
import { LOG_FORMATS, LOG_LEVELS } from '../config/keys.js';
import { benchCommand } from './bench.js';
import { checkCommand } from './check.js';
import { dashboardCommand } from './dashboard.js';
import { EXIT_OK, EXIT_USAGE } from './report.js';
import { drainCommand, restartCommand } from './pool-action.js';
import { reloadCommand } from './reload.js';
import { runCommand } from './run.js';
import { statusCommand } from './status.js';
import { stopCommand } from './stop.js';
import { readyCommand } from './ready.js';
import { reopenLogsCommand, upgradeCommand } from './upgrade.js';
import { workersCommand } from './workers.js';
import { tuneCommand } from './tune.js';
import { packageVersion } from '../version.js';

const EXAMPLES = `
Examples:
  # Spawn php-cgi workers on demand behind nginx (fastcgi_pass 127.0.0.1:9000),
  # as www-data (as root, workers need a user):
  fcgi-pm run --fastcgi 127.0.0.1:9000 --command php-cgi --user www-data

  # Try PHP scripts straight from a browser, no web server needed:
  fcgi-pm run --http 127.0.0.1:8080 --document-root /var/www/html --command php-cgi --user www-data

  # Put fcgi-pm in front of backends that are already running:
  fcgi-pm run --fastcgi 127.0.0.1:9000 --backend fastcgi://127.0.0.1:9001 --backend fastcgi://127.0.0.1:9002

  # With a config file (see examples/demo/fcgi-pm.yaml in the fcgi-pm package):
  fcgi-pm check -c /etc/fcgi-pm/fcgi-pm.yaml
  fcgi-pm run -c /etc/fcgi-pm/fcgi-pm.yaml

  # Replace pool php's workers one by one, without failing a request:
  fcgi-pm restart -c /etc/fcgi-pm/fcgi-pm.yaml --pool php --rolling

  # A new fcgi-pm version (or config) in place, no connection refused; logs after logrotate:
  fcgi-pm upgrade -c /etc/fcgi-pm/fcgi-pm.yaml
  fcgi-pm reopen-logs -c /etc/fcgi-pm/fcgi-pm.yaml

  # A web dashboard over two running daemons (their control sockets):
  fcgi-pm dashboard --peers /run/fcgi-pm/web.sock,/run/fcgi-pm/api.sock

A minimal config file:
  listen:
    - { protocol: fastcgi, address: 127.0.0.1:9000, pool: php }
  pools:
    php:
      command: [php-cgi]
      user: www-data
      pm: ondemand
      max_children: 8

Run "fcgi-pm help <command>" for a command's options.
Exit status: 0 success, 1 bad configuration or the daemon failed, 2 wrong usage,
3 no daemon answers at the control socket (status, workers, reload, restart, drain, stop,
upgrade, reopen-logs).
`;

export function buildProgram(): Command {
  const program = new Command('fcgi-pm')
    .description('FastCGI/SCGI application process manager: spawns php-cgi and other FastCGI/SCGI\nworkers on demand and proxies FastCGI, SCGI and HTTP front ends to them.')
    .version(packageVersion(), '-V, --version', 'print the version')
    .addOption(new Option('--log-level <level>', 'log level, overrides the config file').choices(LOG_LEVELS))
    .addOption(new Option('--log-format <format>', 'json, pretty (for people) or auto (pretty on a terminal); overrides log.format').choices(LOG_FORMATS))
    .showHelpAfterError('(run "fcgi-pm --help" for usage)')
    .addHelpText('after', EXAMPLES);
  program.addCommand(runCommand());
  program.addCommand(checkCommand());
  program.addCommand(statusCommand());
  program.addCommand(readyCommand());
  program.addCommand(workersCommand());
  program.addCommand(reloadCommand());
  program.addCommand(restartCommand());
  program.addCommand(drainCommand());
  program.addCommand(stopCommand());
  program.addCommand(upgradeCommand());
  program.addCommand(reopenLogsCommand());
  program.addCommand(benchCommand());
  program.addCommand(tuneCommand());
  program.addCommand(dashboardCommand());
  // Commander would exit 1 on a usage mistake, the same as a bad config; throw instead
  // so main() can use 2, like our own usage errors.
  for (const cmd of [program, ...program.commands]) cmd.exitOverride();
  return program;
}

export async function main(argv: readonly string[] = process.argv): Promise<void> {
  // `fcgi-pm --help | head` closes the pipe early; that is not an error.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw err;
  });
  try {
    await buildProgram().parseAsync([...argv]);
  } catch (err) {
    if (!(err instanceof CommanderError)) throw err;
    // Its message is already on stderr; --help and --version end here too.
    process.exitCode = err.exitCode === 0 ? EXIT_OK : EXIT_USAGE;
  }
}
