/**
 * The whole fcgi-pm program: every command, for help, the man pages and completions
 * (manual.ts) and every command but `run`, whose start main.ts keeps lean.
 * Commands: run, check, status, workers, reload, restart, drain, stop, upgrade, reopen-logs,
 * bench, tune, dashboard.
 */
import type { Command } from 'commander';
import { benchCommand } from './bench.js';
import { checkCommand } from './check.js';
import { dashboardCommand } from './dashboard.js';
import { drainCommand, restartCommand } from './pool-action.js';
import { baseProgram, finishProgram } from './program-base.js';
import { reloadCommand } from './reload.js';
import { runCommand } from './run.js';
import { statusCommand } from './status.js';
import { stopCommand } from './stop.js';
import { readyCommand } from './ready.js';
import { reopenLogsCommand, upgradeCommand } from './upgrade.js';
import { workersCommand } from './workers.js';
import { tuneCommand } from './tune.js';

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
  const program = baseProgram().addHelpText('after', EXAMPLES);
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
  return finishProgram(program);
}
