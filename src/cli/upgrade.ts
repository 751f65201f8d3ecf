/**
 * `fcgi-pm upgrade`: upgrade in place, as SIGUSR2 does. A new daemon started from the
 * program and config on disk takes over every listening socket; once it serves, the old
 * one finishes its requests and exits. When the new one cannot start, the old one keeps
 * serving and this command exits 1.
 */
import { Command } from 'commander';
import { addTargetOptions, ask, describeDaemon, runTarget, TargetError, type TargetOptions } from './control-target.js';
import { EXIT_FAILURE, EXIT_OK } from './report.js';

export function upgradeCommand(): Command {
  return addTargetOptions(
    new Command('upgrade').description(
      'upgrade in place (as SIGUSR2): a new daemon from the files on disk takes over the sockets, the old one drains and exits;\nno connection is refused (exit 1, old daemon still serving, when the new one fails to start)',
    ),
  ).action(async (o: TargetOptions) =>
    runTarget(async () => {
      const session = await ask(o, { cmd: 'upgrade' }, 120_000);
      session.end();
      const r = session.response;
      if (!r.ok) throw new TargetError(`upgrade failed, the running daemon keeps serving: ${r.error.message}`, EXIT_FAILURE);
      const pid = (r.result as { pid: number }).pid;
      process.stdout.write(`upgraded fcgi-pm: pid ${pid} serves; the old daemon (${describeDaemon(r.daemon)}) stops after its requests\n`);
      return EXIT_OK;
    }),
  );
}

/** `fcgi-pm reopen-logs`: reopen log.file and log.access_file (after logrotate moved them), as SIGUSR1. */
export function reopenLogsCommand(): Command {
  return addTargetOptions(new Command('reopen-logs').description('reopen the log files after they were moved (logrotate), as SIGUSR1; exit 1 when no daemon answers')).action(async (o: TargetOptions) =>
    runTarget(async () => {
      const session = await ask(o, { cmd: 'reopen-logs' });
      session.end();
      const r = session.response;
      if (!r.ok) throw new TargetError(`reopen-logs failed: ${r.error.message}`, EXIT_FAILURE);
      const files = (r.result as { files: string[] }).files;
      process.stdout.write(files.length > 0 ? `reopened ${files.join(', ')} (${describeDaemon(r.daemon)})\n` : `fcgi-pm (${describeDaemon(r.daemon)}) logs to stdout; nothing to reopen\n`);
      return EXIT_OK;
    }),
  );
}
