/**
 * What `status`, `reload`, `stop` and `workers` share: finding the daemon's control
 * socket (--control PATH, else the config file's control_socket / runtime_dir / its own
 * derived name, else the quick form's default; src/config/control-path.ts) and sending
 * it one request. With -c FILE the daemon that answers must have been started from that
 * file (every answer names its config), else nothing is sent; --control PATH addresses
 * whatever daemon listens there.
 */
import { readdirSync, readFileSync } from 'node:fs';
import * as nodePath from 'node:path';
import type { Command } from 'commander';
import { parse as parseYaml } from 'yaml';
import { controlSocketPath, realPath } from '../config/control-path.js';
import { loadConfig } from '../config/load.js';
import { ControlUnavailable, controlRequest, whoAnswers, type ControlSession } from '../control/client.js';
import type { ControlRequest, DaemonIdentity } from '../control/protocol.js';
import { ConfigError } from '../errors.js';
import { EXIT_FAILURE, EXIT_USAGE } from './report.js';

/** No daemon answers at the control socket (LSB's "program is not running" for status). */
export const EXIT_NOT_RUNNING = 3;

export interface TargetOptions {
  config?: string;
  control?: string;
}

export function addTargetOptions(cmd: Command): Command {
  return cmd
    .option('-c, --config <file>', "the daemon started from this config file (its control_socket, runtime_dir or a name derived from the file's path); refuses a daemon started from another file")
    .option('--control <path>', 'the daemon listening on this control socket, whichever config it runs (default without -c: the quick form\'s, /run/fcgi-pm/control.sock as root)');
}

export class TargetError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
    this.name = 'TargetError';
  }
}

/** The socket path, from the options. Throws TargetError. */
export function resolveControlPath(o: TargetOptions): string {
  if (o.control !== undefined && o.config !== undefined) throw new TargetError('give either --control PATH or -c FILE, not both', EXIT_USAGE);
  if (o.control !== undefined) return nodePath.resolve(o.control);
  if (o.config === undefined) return controlSocketPath({})!;
  let path: string | undefined;
  try {
    path = controlSocketPath(loadConfig(o.config));
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    // A config being edited may be invalid; its control_socket is still where the daemon listens.
    path = lenientControlPath(o.config);
  }
  if (path === undefined) throw new TargetError(`${o.config} sets control_socket: off; the daemon has no control socket`, EXIT_FAILURE);
  return path;
}

function lenientControlPath(file: string): string | undefined {
  let obj: Record<string, unknown>;
  try {
    obj = (parseYaml(readFileSync(file, 'utf8')) ?? {}) as Record<string, unknown>;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== undefined && !(err instanceof Error && err.name.startsWith('YAML'))) {
      throw new TargetError(`cannot read ${file}: ${(err as Error).message}`, EXIT_FAILURE);
    }
    // Guessing the default path could reach another daemon: say so instead.
    throw new TargetError(`cannot tell where the daemon's control socket is: ${file} is not valid YAML (${firstLine((err as Error).message)}); give --control PATH`, EXIT_FAILURE);
  }
  if (obj === null || typeof obj !== 'object') return controlSocketPath({ source: nodePath.resolve(file) });
  const source = nodePath.resolve(file);
  const dir = nodePath.dirname(source);
  const cs = obj.control_socket;
  if (cs === false || (typeof cs === 'string' && cs.trim().toLowerCase() === 'off')) return undefined;
  const rd = typeof obj.runtime_dir === 'string' ? nodePath.resolve(dir, obj.runtime_dir) : undefined;
  return controlSocketPath({ controlSocket: typeof cs === 'string' ? nodePath.resolve(dir, cs) : undefined, runtimeDir: rd, source });
}

function firstLine(s: string): string {
  const i = s.indexOf('\n');
  return i < 0 ? s : s.slice(0, i);
}

/** "pid 123, config /etc/fcgi-pm.yaml": which daemon answered, for the commands' output. */
export function describeDaemon(d: Partial<DaemonIdentity> | undefined): string {
  return `pid ${d?.pid ?? '?'}, config ${d?.config ?? '?'}`;
}

/**
 * With -c FILE: the daemon at the socket must say it runs FILE (compared by real path),
 * checked with a ping before anything else is sent. A daemon too old to say passes.
 */
async function checkSameConfig(config: string | undefined, path: string, cmd: string): Promise<void> {
  if (config === undefined) return;
  const d = await whoAnswers(path);
  if (d?.config === undefined) return;
  if (!nodePath.isAbsolute(d.config) || realPath(d.config) !== realPath(config)) {
    throw new TargetError(`the daemon at ${path} (${describeDaemon(d)}) was not started from ${config}; not sending it "${cmd}" (give --control ${path} to address it anyway)`, EXIT_FAILURE);
  }
}

/** Sends one request; prints and maps failures to exit codes (TargetError). */
export async function ask(o: TargetOptions, req: ControlRequest, timeoutMs?: number): Promise<ControlSession> {
  const path = resolveControlPath(o);
  await checkSameConfig(o.config, path, req.cmd);
  try {
    return await controlRequest(path, req, timeoutMs);
  } catch (err) {
    if (err instanceof ControlUnavailable) throw new TargetError(err.message + othersHint(o, path), EXIT_NOT_RUNNING);
    throw new TargetError((err as Error).message, EXIT_FAILURE);
  }
}

/** Without -c or --control only the quick form's socket is tried: name the others there. */
function othersHint(o: TargetOptions, path: string): string {
  if (o.config !== undefined || o.control !== undefined) return '';
  let names: string[];
  try {
    // Derived names end in "-<10 hex>.sock" (controlSocketName); listener sockets may sit there too.
    names = readdirSync(nodePath.dirname(path)).filter((n) => /-[0-9a-f]{10}\.sock$/.test(n));
  } catch {
    return '';
  }
  return names.length === 0 ? '' : `; daemons started from a config file have their own sockets (${names.join(', ')} in ${nodePath.dirname(path)}): give -c FILE`;
}

/** For command actions: runs `fn`, turning TargetError and other errors into stderr lines and exit codes. */
export async function runTarget(fn: () => Promise<number>): Promise<void> {
  try {
    process.exitCode = await fn();
  } catch (err) {
    if (err instanceof TargetError) {
      process.stderr.write(`fcgi-pm: ${err.message}\n`);
      process.exitCode = err.exitCode;
      return;
    }
    process.stderr.write(`fcgi-pm: ${(err as Error).message ?? String(err)}\n`);
    process.exitCode = EXIT_FAILURE;
  }
}
