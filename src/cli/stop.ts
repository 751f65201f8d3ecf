/** `fcgi-pm stop`: stop the running daemon gracefully and wait until it has exited. */
import { Command } from 'commander';
import { formatDuration, parseDuration } from '../config/units.js';
import { addTargetOptions, ask, describeDaemon, runTarget, TargetError, type TargetOptions } from './control-target.js';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE } from './report.js';

interface StopCliOptions extends TargetOptions {
  gracefulTimeout?: string;
  wait?: boolean;
}

/** Beyond the graceful timeout: kill_timeout escalation and process exit. */
const EXIT_MARGIN_MS = 30_000;

export function stopCommand(): Command {
  return addTargetOptions(
    new Command('stop')
      .description('stop the daemon: no new requests, running ones may finish (default shutdown_timeout), then exit')
      .option('--graceful-timeout <duration>', 'how long running requests may finish, e.g. 10s (default: shutdown_timeout)')
      .option('--no-wait', 'return once the daemon started stopping'),
  ).action(async (o: StopCliOptions) =>
    runTarget(async () => {
      let timeoutMs: number | undefined;
      if (o.gracefulTimeout !== undefined) {
        const ms = parseDuration(o.gracefulTimeout);
        if (typeof ms === 'string') throw new TargetError(`--graceful-timeout: ${ms}`, EXIT_USAGE);
        timeoutMs = ms;
      }
      const session = await ask(o, { cmd: 'ping' });
      session.end();
      const info = session.response.ok ? (session.response.result as { shutdown_timeout_ms?: number; shutdown_delay_ms?: number }) : {};
      const who = `fcgi-pm (${describeDaemon(session.response.daemon ?? (session.response.ok ? (session.response.result as { pid?: number }) : undefined))})`;
      const stop = await ask(o, { cmd: 'stop', timeout_ms: timeoutMs });
      if (!stop.response.ok) {
        stop.end();
        throw new TargetError(`stop failed: ${stop.response.error.message}`, EXIT_FAILURE);
      }
      if (o.wait === false) {
        stop.end();
        process.stdout.write(`${who} is stopping\n`);
        return EXIT_OK;
      }
      const limit = (info.shutdown_delay_ms ?? 0) + (timeoutMs ?? info.shutdown_timeout_ms ?? 30_000) + EXIT_MARGIN_MS;
      if (!(await stop.closed(limit))) {
        stop.end();
        throw new TargetError(`the daemon is still running after ${formatDuration(limit)}`, EXIT_FAILURE);
      }
      process.stdout.write(`${who} stopped\n`);
      return EXIT_OK;
    }),
  );
}
