/**
 * Issue 5 test support: a real daemon with its own control socket in a temp dir, and the
 * CLI run as a real process against it.
 */
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { stringify as stringifyYaml } from 'yaml';
import { runBin, type RunResult } from '../cli/helpers.js';
import { startDaemon, type Daemon, type StartDaemonOptions } from '../helpers/daemon.js';
import type { Scope } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';

export interface OpsDaemon {
  daemon: Daemon;
  dir: string;
  control: string;
  /** Runs `fcgi-pm <args> --control <socket>`. */
  ctl(args: string[], timeoutMs?: number): Promise<RunResult>;
  /** Rewrites the config file the daemon was started with. */
  rewrite(config: Record<string, unknown> | string): void;
}

export async function opsDaemon(scope: Scope, config: Record<string, unknown>, opts: StartDaemonOptions = {}): Promise<OpsDaemon> {
  const dir = opts.dir ?? makeTempDir(scope, 'fpm-ops-');
  const control = join(dir, 'control.sock');
  const daemon = await startDaemon(scope, { control_socket: control, ...config }, { ...opts, dir });
  return {
    daemon,
    dir,
    control,
    ctl: (args, timeoutMs) => runBin([...args, '--control', control], { timeoutMs: timeoutMs ?? 20_000 }),
    rewrite: (c) => writeFileSync(daemon.configPath, typeof c === 'string' ? c : stringifyYaml({ control_socket: control, ...c })),
  };
}

export { runBin };
