/**
 * What `status`, `reload`, `stop` and `workers` share: finding the daemon's control
 * socket (--control PATH, else the config file's control_socket / runtime_dir, else the
 * default; src/config/control-path.ts) and sending it one request.
 */
import { readFileSync } from 'node:fs';
import * as nodePath from 'node:path';
import type { Command } from 'commander';
import { parse as parseYaml } from 'yaml';
import { controlSocketPath } from '../config/control-path.js';
import { loadConfig } from '../config/load.js';
import { ControlUnavailable, controlRequest, type ControlSession } from '../control/client.js';
import type { ControlRequest } from '../control/protocol.js';
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
    .option('-c, --config <file>', "the daemon's config file: its control_socket (or runtime_dir) says where to connect")
    .option('--control <path>', 'control socket path (default: from -c FILE, else /run/fcgi-pm/control.sock as root)');
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
  if (obj === null || typeof obj !== 'object') return controlSocketPath({});
  const dir = nodePath.dirname(nodePath.resolve(file));
  const cs = obj.control_socket;
  if (cs === false || (typeof cs === 'string' && cs.trim().toLowerCase() === 'off')) return undefined;
  const rd = typeof obj.runtime_dir === 'string' ? nodePath.resolve(dir, obj.runtime_dir) : undefined;
  return controlSocketPath({ controlSocket: typeof cs === 'string' ? nodePath.resolve(dir, cs) : undefined, runtimeDir: rd });
}

function firstLine(s: string): string {
  const i = s.indexOf('\n');
  return i < 0 ? s : s.slice(0, i);
}

/** Sends one request; prints and maps failures to exit codes (TargetError). */
export async function ask(o: TargetOptions, req: ControlRequest, timeoutMs?: number): Promise<ControlSession> {
  const path = resolveControlPath(o);
  try {
    return await controlRequest(path, req, timeoutMs);
  } catch (err) {
    if (err instanceof ControlUnavailable) throw new TargetError(err.message, EXIT_NOT_RUNNING);
    throw new TargetError((err as Error).message, EXIT_FAILURE);
  }
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
