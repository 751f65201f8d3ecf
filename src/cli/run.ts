/**
 * `fcgi-pm run`: the daemon in the foreground, from a config file (-c) or the quick
 * form (--fastcgi/--scgi/--http plus --backend or --command).
 */
import * as nodePath from 'node:path';
import { Command, Option } from 'commander';
import { loadConfig } from '../config/load.js';
import { configFromObject } from '../config/schema.js';
import type { Config } from '../config/types.js';
import { LogFiles } from '../log/files.js';
import { flushLogger, type Logger } from '../log/log.js';
import { hasQuickOptions, quickConfigObject, UsageError, type QuickOptions } from './quick.js';
import { ConfigError, ErrorCodes, codeOf } from '../errors.js';
import { EXIT_FAILURE, isExpectedError, reportError } from './report.js';
import { packageVersion } from '../version.js';
import { startSuccessor, stopHanded, tellPredecessorFailure, UPGRADE_CHECK_ENV, type ExecPlan } from '../daemon/upgrade.js';
import { execInPlace } from '../daemon/exec-in-place.js';
import { BRIDGE_ENV, bridgeConfig, stopBridge } from '../daemon/bridge.js';

interface RunOptions extends QuickOptions {
  config?: string;
  logLevel?: string;
  logFormat?: Config['log']['format'];
  allowRoot?: boolean;
  pidFile?: string;
}

const collect = (value: string, previous: string[]): string[] => [...previous, value];

export function runCommand(): Command {
  return new Command('run')
    .description('run the daemon in the foreground (stop it with SIGTERM or Ctrl-C)')
    .option('-c, --config <file>', 'config file (YAML or JSON)')
    .option('--fastcgi <addr>', 'quick form: listen for FastCGI (e.g. from nginx) on ADDR; repeatable', collect, [])
    .option('--scgi <addr>', 'quick form: listen for SCGI on ADDR; repeatable', collect, [])
    .option('--http <addr>', 'quick form: listen for plain HTTP on ADDR; repeatable', collect, [])
    .option('--document-root <dir>', 'quick form, with --http: where scripts are looked up')
    .option('--index <file>', 'quick form, with --http: script for URLs ending in / (default index.php)')
    .option('--backend <url>', 'quick form: a running backend, fastcgi://ADDR or scgi://ADDR; repeatable', collect, [])
    .option('--command <cmdline>', 'quick form: spawn workers running this program (no shell), e.g. "php-cgi"')
    .option('--user <name>', 'quick form, with --command: run workers as this user (when fcgi-pm runs as root)')
    .option('--group <name>', 'quick form, with --command: run workers with this group (default: the user\'s)')
    .addOption(new Option('--pm <mode>', 'quick form, with --command: process manager').choices(['static', 'dynamic', 'ondemand']))
    .option('--max-children <n>', 'quick form, with --command: most workers at once (default 5)')
    .option('--shutdown-timeout <duration>', 'quick form: how long a stop waits for running requests (default 30s)')
    .option('--no-access-log', 'quick form: do not log one line per request')
    .option('-R, --allow-root', 'as root, let pools without "user" run their workers as root (refused otherwise)')
    .option('--pid-file <path>', 'write the pid to this file, whatever pid_file says ("off" for none): for init scripts')
    .addHelpText(
      'after',
      `
ADDR is host:port ("127.0.0.1:9000", "[::1]:9000", ":9000" for all interfaces) or
unix:/path.sock. Logs go to stdout: human lines on a terminal, JSON lines otherwise
(--log-format json|pretty chooses). As root, spawned workers need a user
("user:" in the file, --user here), or -R to run them as root.

Examples:
  fcgi-pm run -c /etc/fcgi-pm/fcgi-pm.yaml
  fcgi-pm run --fastcgi 127.0.0.1:9000 --command php-cgi --user www-data --max-children 8
  fcgi-pm run --http 127.0.0.1:8080 --document-root ./public --command php-cgi --user www-data
  fcgi-pm run --fastcgi 127.0.0.1:9000 --backend fastcgi://unix:/run/php/php-fpm.sock
`,
    )
    .action(async (_opts: RunOptions, cmd: Command) => {
      const opts = cmd.optsWithGlobals<RunOptions>();
      let config: Config;
      try {
        config = buildConfig(opts);
      } catch (err) {
        process.exitCode = reportError(err);
        return;
      }
      // The bridge of an upgrade by exec (src/daemon/bridge.ts) serves the old code's workers
      // while the process re-executes. Its start is the new code's check: the host checks
      // on the config as it is, before it becomes the bridge's.
      const bridge = process.env[BRIDGE_ENV] !== undefined;
      if (bridge || process.env[UPGRADE_CHECK_ENV] !== undefined) {
        const failed = await checkForUpgrade(config, opts.allowRoot === true, bridge);
        if (failed !== 0 || !bridge) {
          process.exitCode = failed;
          return;
        }
        config = bridgeConfig(config) ?? config;
      }
      // SIGHUP re-reads the file with the same command-line overrides.
      process.exitCode = await runDaemon(config, () => buildConfig(opts), opts.allowRoot === true);
    });
}

function buildConfig(opts: RunOptions): Config {
  const cfg = configFromOptions(opts);
  if (opts.pidFile !== undefined) cfg.pidFile = opts.pidFile === 'off' ? false : nodePath.resolve(opts.pidFile);
  if (opts.logFormat !== undefined) cfg.log.format = opts.logFormat;
  return cfg;
}

function configFromOptions(opts: RunOptions): Config {
  const quick = hasQuickOptions(opts);
  if (opts.config !== undefined && quick) throw new UsageError('give either -c FILE or the quick-form options, not both');
  if (opts.config === undefined && !quick) throw new UsageError('give -c FILE, or a listener (--fastcgi/--scgi/--http ADDR) and --backend or --command');
  if (opts.config !== undefined) {
    const cfg = loadConfig(opts.config);
    if (opts.logLevel !== undefined) cfg.log.level = opts.logLevel;
    return cfg;
  }
  return configFromObject(quickConfigObject(opts, opts.logLevel), '<command line>', { baseDir: process.cwd() });
}

/**
 * An upgrade by exec runs the new code this way first (src/daemon/upgrade.ts), as its
 * bridge or alone: the config was read; now the daemon's modules load and the host checks
 * pass, or it exits 1 (a bridge first says why on its readiness pipe).
 */
async function checkForUpgrade(config: Config, allowRoot: boolean, bridge: boolean): Promise<number> {
  try {
    await import('../daemon/daemon.js');
    await import('../daemon/process.js');
    const { assertPreflight } = await import('../daemon/preflight.js');
    assertPreflight(config, { allowRoot }, () => undefined);
    return 0;
  } catch (err) {
    if (bridge) tellPredecessorFailure(err instanceof ConfigError ? err.problems.join('\n') : `${(err as Error)?.message ?? String(err)}`.split('\n')[0]!);
    return reportError(err);
  }
}

/** Resolves with the exit code once the daemon stopped (after a signal) or failed to start. */
async function runDaemon(config: Config, reloadConfig: () => Config, allowRoot: boolean): Promise<number> {
  // stdout or log.file (reopened on SIGUSR1), and log.access_file.
  const logFiles = new LogFiles(config.log);
  const logger: Logger = logFiles.logger;
  // Loaded here so check and --help never load pools and front ends.
  const { Daemon } = await import('../daemon/daemon.js');
  const { attachToProcess } = await import('../daemon/process.js');
  const daemon = new Daemon(config, { logger, allowRoot, operations: { logFiles, loadConfig: reloadConfig, version: packageVersion() } });
  return new Promise<number>((resolve) => {
    const detach = attachToProcess(daemon, logger, {
      exit: (code) => {
        detach();
        void Promise.all([flushLogger(logger), logFiles.flush()]).then(() => resolve(code));
      },
      exec: (plan) => {
        detach();
        void logFiles.end().then(() => reexec(plan, daemon.config)).then(resolve);
      },
    });
    daemon.start().then(() => announceUrls(daemon.listeners), async (err: unknown) => {
      // One log line; expected errors (bad config, port in use, no such directory) without a stack.
      const code = codeOf(err, ErrorCodes.START_FAILED);
      if (isExpectedError(err)) logger.fatal({ kind: 'start', code, errno: err.code === code ? undefined : err.code, problems: err instanceof ConfigError ? err.problems : undefined }, `could not start: ${err.message.split('\n')[0]}`);
      else logger.fatal({ code, err }, 'could not start');
      detach();
      await Promise.all([flushLogger(logger), logFiles.flush()]);
      reportError(err);
      resolve(EXIT_FAILURE);
    });
  }).then((code) => {
    // Whatever still holds the event loop open (a stuck socket) must not keep us alive.
    setTimeout(() => process.exit(code), 2000).unref();
    return code;
  });
}

/** For people, on stderr (stdout is the log): where to point a browser. */
function announceUrls(listeners: readonly { config: { protocol: string; pool: string }; address: string }[]): void {
  for (const l of listeners) {
    if (l.config.protocol !== 'http' || l.address.startsWith('unix:')) continue;
    const url = `http://${l.address.replace(/^0\.0\.0\.0:/, '127.0.0.1:').replace(/^\[::\]:/, '[::1]:')}/`;
    process.stderr.write(`fcgi-pm: serving pool ${l.config.pool} at ${url}\n`);
  }
}

/**
 * The end of an upgrade by exec: the process becomes the new code. Only when execve itself
 * fails (the new code passed its check, so rarely) does this return: the new code then
 * starts with a new pid and the sockets, and this process exits.
 */
async function reexec(plan: ExecPlan, config: Config): Promise<number> {
  let why = '';
  try {
    execInPlace(plan);
  } catch (err) {
    why = (err as Error).message;
  }
  // Our log streams ended for the exec: the fallback writes through new ones.
  const logFiles = new LogFiles(config.log);
  const logger = logFiles.logger;
  logger.error({ code: ErrorCodes.UPGRADE_FAILED, kind: 'upgrade', err: why }, `upgrade: the exec failed (${why}); starting the new code with a new pid instead`);
  // The workers handed on for the exec, and the bridge, go with this process: the new daemon starts its own.
  stopHanded(plan);
  if (plan.bridge !== undefined) stopBridge(plan.bridge);
  try {
    const next = await startSuccessor(plan.sockets, plan.readySeats);
    logger.warn({ code: ErrorCodes.UPGRADE_NO_EXEC, kind: 'upgrade', new_pid: next.pid }, `upgrade: the new code serves as pid ${next.pid}; pid ${process.pid} exits`);
    await logFiles.flush();
    return 0;
  } catch (err) {
    logger.fatal({ code: ErrorCodes.UPGRADE_FAILED, kind: 'upgrade', err: (err as Error).message }, `upgrade: the new code could not start either (${(err as Error).message}); fcgi-pm is down until it is started again`);
    await logFiles.flush();
    return EXIT_FAILURE;
  }
}
