/**
 * Ties a Daemon to the process: signals, uncaught errors, exit.
 *
 *   SIGTERM, SIGINT,  graceful stop (up to shutdown_timeout), then exit 0; QUIT is
 *   SIGQUIT           PHP-FPM's and nginx's graceful stop, so it is one here too
 *   second SIGINT     immediate stop (running requests are cut), then exit 0
 *   second TERM/QUIT  ignored: the graceful stop is already under way
 *   SIGHUP            reload: re-read the config file and apply it (src/daemon/reload.ts);
 *                     an invalid file is logged and the running config stays
 *   SIGUSR1           reopen log files (logrotate); the handler also keeps Node's
 *                     default (starting the inspector) from happening
 *   SIGUSR2           upgrade in place (src/daemon/upgrade.ts): upgrade: exec, once the new
 *                     code on disk passed its check, this daemon stops gracefully and the
 *                     process execs it (same pid, same sockets); upgrade: spawn, a new
 *                     daemon takes the sockets, then this one stops gracefully; if the new
 *                     code fails, this one serves on (never Node's default: exit)
 *   fcgi-pm stop      (control socket) graceful stop like SIGTERM, optionally with its
 *                     own timeout, then exit 0
 *   fcgi-pm upgrade   (control socket) like SIGUSR2
 *   uncaught error    logged; the daemon keeps serving what still works
 */
import { formatDuration } from '../config/units.js';
import type { Logger } from '../log/log.js';
import type { Daemon } from './daemon.js';
import type { ExecPlan } from './upgrade.js';
import { closeDuplicates } from './exec-in-place.js';
import { stopBridge } from './bridge.js';
import { ErrorCodes } from '../errors.js';

/** Extra time after shutdown_timeout before the process exits no matter what. */
const EXIT_GRACE_MS = 15_000;

export interface ProcessHooks {
  /** Called once the daemon stopped after a signal. */
  exit(code: number): void;
  /** Called once the daemon stopped for an upgrade by exec: replace the process by the plan's. */
  exec(plan: ExecPlan): void;
}

/** Installs the handlers; returns a function that removes them. */
export function attachToProcess(daemon: Daemon, logger: Logger, hooks: ProcessHooks): () => void {
  let signals = 0;

  const stopThenExit = (immediate: boolean, timeoutMs?: number, plan?: ExecPlan): void => {
    const noDelay = plan !== undefined;
    const stopped = daemon.stop({ immediate, timeoutMs, noDelay, handOn: plan !== undefined });
    let done = false;
    const end = (code: number): void => {
      if (done) return;
      done = true;
      clearTimeout(watchdog);
      if (plan !== undefined) hooks.exec(daemon.handOn(plan));
      else hooks.exit(code);
    };
    // Pools bound their own stop by shutdown_timeout + kill_timeout; this is the last resort.
    const watchdog = setTimeout(() => {
      logger.error({ code: ErrorCodes.SHUTDOWN_FORCED, kind: 'shutdown' }, `shutdown took too long; ${plan ? 're-executing' : 'exiting'} anyway`);
      end(1);
    }, (immediate || noDelay ? 0 : daemon.config.shutdownDelay) + (timeoutMs ?? daemon.config.shutdownTimeout) + EXIT_GRACE_MS);
    watchdog.unref();
    stopped.then(
      () => end(0),
      (err: unknown) => {
        logger.error({ code: ErrorCodes.STOP_FAILED, err }, 'error while stopping');
        end(1);
      },
    );
  };

  const onSignal = (sig: NodeJS.Signals): void => {
    signals++;
    if (signals === 1) {
      const within = formatDuration(daemon.config.shutdownTimeout);
      logger.info({ kind: 'shutdown', signal: sig, timeout_ms: daemon.config.shutdownTimeout }, `${sig}: stopping gracefully, running requests have up to ${within} (a further SIGINT stops at once)`);
      stopThenExit(false);
    } else if (sig === 'SIGINT') {
      logger.warn({ code: ErrorCodes.SHUTDOWN_FORCED, kind: 'shutdown', signal: sig }, `${sig} again: stopping now, running requests are cut`);
      void daemon.stop({ immediate: true });
    } else {
      logger.info({ kind: 'shutdown', signal: sig }, `${sig}: already stopping`);
    }
  };
  const onHup = (): void => {
    if (signals > 0) return; // stopping
    logger.info({ kind: 'reload', signal: 'SIGHUP' }, 'SIGHUP: reloading the config');
    // Failures are logged (with every config problem) by the reload itself.
    daemon.reloadFromSource().catch(() => undefined);
  };
  const onUsr1 = (): void => void daemon.ops.reopenLogs();
  const onUsr2 = (): void => {
    if (signals > 0) return; // stopping
    logger.info({ kind: 'upgrade', signal: 'SIGUSR2' }, 'SIGUSR2: upgrading in place');
    // Failures are logged by the upgrade; this daemon serves on.
    daemon.upgrade().catch(() => undefined);
  };
  daemon.onHandedOver = (pid) => {
    if (signals > 0) return;
    signals++;
    logger.info({ kind: 'shutdown', via: 'upgrade', new_pid: pid, timeout_ms: daemon.config.shutdownTimeout }, `handed over to pid ${pid}: stopping gracefully, running requests have up to ${formatDuration(daemon.config.shutdownTimeout)}`);
    stopThenExit(false);
  };
  daemon.onExec = (plan) => {
    if (signals > 0) {
      logger.info({ kind: 'upgrade' }, 'upgrade: a stop came first; not re-executing');
      closeDuplicates(plan.sockets.map((s) => s.fd));
      if (plan.bridge !== undefined) stopBridge(plan.bridge);
      return;
    }
    signals++;
    logger.info({ kind: 'shutdown', via: 'upgrade', exec: true, timeout_ms: daemon.config.shutdownTimeout }, `upgrade: stopping gracefully before the exec, running requests have up to ${formatDuration(daemon.config.shutdownTimeout)}`);
    stopThenExit(false, undefined, plan);
  };
  daemon.onStopRequest = (timeoutMs) => {
    if (signals > 0) return;
    signals++;
    const within = formatDuration(timeoutMs ?? daemon.config.shutdownTimeout);
    logger.info({ kind: 'shutdown', via: 'control', timeout_ms: timeoutMs ?? daemon.config.shutdownTimeout }, `stop requested (fcgi-pm stop): stopping gracefully, running requests have up to ${within}`);
    stopThenExit(false, timeoutMs);
  };
  const onUncaught = (err: Error): void => {
    logger.error({ code: ErrorCodes.INTERNAL, err, kind: 'uncaught' }, 'uncaught exception; still serving');
  };
  const onRejection = (reason: unknown): void => {
    logger.error({ code: ErrorCodes.INTERNAL, err: reason, kind: 'uncaught' }, 'unhandled promise rejection; still serving');
  };
  const onExit = (): void => daemon.cleanupSync();

  // One list for on and off, so a handler added later is also removed.
  const signalHandlers: Array<[NodeJS.Signals, NodeJS.SignalsListener]> = [
    ['SIGTERM', onSignal], ['SIGINT', onSignal], ['SIGQUIT', onSignal],
    ['SIGHUP', onHup], ['SIGUSR1', onUsr1], ['SIGUSR2', onUsr2],
  ];
  for (const [sig, fn] of signalHandlers) process.on(sig, fn);
  process.on('uncaughtException', onUncaught);
  process.on('unhandledRejection', onRejection);
  process.on('exit', onExit);
  return () => {
    for (const [sig, fn] of signalHandlers) process.off(sig, fn);
    process.off('uncaughtException', onUncaught);
    process.off('unhandledRejection', onRejection);
    process.off('exit', onExit);
    daemon.onStopRequest = undefined;
    daemon.onHandedOver = undefined;
    daemon.onExec = undefined;
  };
}
