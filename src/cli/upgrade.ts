/**
 * `fcgi-pm upgrade`: upgrade in place, as SIGUSR2 does. With `upgrade: exec` the daemon
 * checks the new code, finishes its requests and execs it in the same process; this
 * command waits until the new code answers. With `upgrade: spawn` a new daemon started
 * from the program and config on disk takes over every listening socket; once it serves,
 * the old one finishes its requests and exits. When the new code cannot start, the old
 * one keeps serving and this command exits 1.
 */
import { Command } from 'commander';
import { addTargetOptions, ask, describeDaemon, runTarget, TargetError, type TargetOptions } from './control-target.js';
import { EXIT_FAILURE, EXIT_OK } from './report.js';

export function upgradeCommand(): Command {
  return addTargetOptions(
    new Command('upgrade').description(
      'upgrade in place (as SIGUSR2): the new code on disk takes over the sockets (upgrade: exec, the default: in the same\nprocess once its requests finished; spawn: in a new daemon while the old one drains); no connection is refused\n(exit 1, old code still serving, when the new code fails to start)',
    ),
  ).action(async (o: TargetOptions) =>
    runTarget(async () => {
      const session = await ask(o, { cmd: 'upgrade' }, 120_000);
      session.end();
      const r = session.response;
      if (!r.ok) throw new TargetError(`upgrade failed, the running daemon keeps serving: ${r.error.message}`, EXIT_FAILURE);
      const { pid, exec, started } = r.result as { pid: number; exec?: boolean; started?: number };
      if (exec === true) {
        process.stdout.write(`upgrading fcgi-pm in place: pid ${pid} re-executes the new code once its running requests finish\n`);
        await untilRestarted(o, started ?? 0);
        process.stdout.write(`upgraded fcgi-pm: pid ${pid} serves, running the new code\n`);
        return EXIT_OK;
      }
      process.stdout.write(`upgraded fcgi-pm: pid ${pid} serves; the old daemon (${describeDaemon(r.daemon)}) stops after its requests\n`);
      return EXIT_OK;
    }),
  );
}

/** Asks until the daemon answers with a later start time than `started` (the exec happened) and is ready (its listeners took their sockets). */
async function untilRestarted(o: TargetOptions, started: number, timeoutMs = 180_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
    try {
      const s = await ask(o, { cmd: 'ping' }, 5000);
      s.end();
      const now = s.response.ok ? (s.response.result as { started?: number }).started : undefined;
      if (now === undefined || now <= started) continue;
      const r = await ask(o, { cmd: 'ready' }, 5000);
      r.end();
      if (r.response.ok && (r.response.result as { ready?: boolean }).ready === true) return;
    } catch {
      // between the exec and the new code's control socket: ask again
    }
  }
  throw new TargetError(`the daemon did not answer with the new code within ${timeoutMs / 1000}s; see its log`, EXIT_FAILURE);
}

/** `fcgi-pm reopen-logs`: reopen log.file and log.access_file (after logrotate moved them), as SIGUSR1. */
export function reopenLogsCommand(): Command {
  return addTargetOptions(new Command('reopen-logs').description('reopen the log files after they were moved (logrotate), as SIGUSR1; exit 3 when no daemon answers')).action(async (o: TargetOptions) =>
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
