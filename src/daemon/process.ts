/**
 * Ties a Daemon to the process: signals, uncaught errors, exit.
 *
 *   SIGTERM, SIGINT   graceful stop (up to shutdown_timeout), then exit 0
 *   second SIGINT     immediate stop (running requests are cut), then exit 0
 *   second SIGTERM    ignored: the graceful stop is already under way
 *   SIGHUP            reload is not implemented yet: logged and ignored (the default
 *                     action would kill the daemon)
 *   uncaught error    logged; the daemon keeps serving what still works
 */
import { formatDuration } from '../config/units.js';
import type { Logger } from '../log/log.js';
import type { Daemon } from './daemon.js';

/** Extra time after shutdown_timeout before the process exits no matter what. */
const EXIT_GRACE_MS = 15_000;

export interface ProcessHooks {
  /** Called once the daemon stopped after a signal. */
  exit(code: number): void;
}

/** Installs the handlers; returns a function that removes them. */
export function attachToProcess(daemon: Daemon, logger: Logger, hooks: ProcessHooks): () => void {
  let signals = 0;

  const stopThenExit = (immediate: boolean): void => {
    const stopped = daemon.stop({ immediate });
    // Pools bound their own stop by shutdown_timeout + kill_timeout; this is the last resort.
    const watchdog = setTimeout(() => {
      logger.error({ kind: 'shutdown' }, 'shutdown took too long; exiting anyway');
      hooks.exit(1);
    }, daemon.config.shutdownTimeout + EXIT_GRACE_MS);
    watchdog.unref();
    stopped.then(
      () => hooks.exit(0),
      (err: unknown) => {
        logger.error({ err }, 'error while stopping');
        hooks.exit(1);
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
      logger.warn({ kind: 'shutdown', signal: sig }, `${sig} again: stopping now, running requests are cut`);
      void daemon.stop({ immediate: true });
    } else {
      logger.info({ kind: 'shutdown', signal: sig }, `${sig}: already stopping`);
    }
  };
  const onHup = (): void => {
    logger.warn({ kind: 'reload', signal: 'SIGHUP' }, 'SIGHUP: reload is not supported yet; restart fcgi-pm to apply a new config');
  };
  const onUncaught = (err: Error): void => {
    logger.error({ err, kind: 'uncaught' }, 'uncaught exception; still serving');
  };
  const onRejection = (reason: unknown): void => {
    logger.error({ err: reason, kind: 'uncaught' }, 'unhandled promise rejection; still serving');
  };
  const onExit = (): void => daemon.cleanupSync();

  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  process.on('SIGHUP', onHup);
  process.on('uncaughtException', onUncaught);
  process.on('unhandledRejection', onRejection);
  process.on('exit', onExit);
  return () => {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    process.off('SIGHUP', onHup);
    process.off('uncaughtException', onUncaught);
    process.off('unhandledRejection', onRejection);
    process.off('exit', onExit);
  };
}
