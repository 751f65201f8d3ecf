/**
 * Upgrade in place (SIGUSR2, `fcgi-pm upgrade`), as nginx's binary upgrade and PHP-FPM's
 * USR2 re-exec: a new daemon is started from the program and config on disk and handed
 * every listening socket by fd inheritance, in systemd's socket-activation form
 * (LISTEN_FDS, LISTEN_FDNAMES, LISTEN_PID: src/daemon/socket-activation.ts reads them),
 * each socket named by the address it serves so the new daemon adopts it instead of
 * binding. Both daemons accept on the same sockets until the new one says it is ready
 * (a line on an inherited socketpair, after its READY=1 with its MAINPID went to systemd);
 * then the old one stops gracefully. A new daemon that exits or is not ready within
 * UPGRADE_READY_MS changes nothing: the old one keeps serving.
 *
 * The new daemon is also told how many workers each pool had ready (UPGRADE_WARM_ENV),
 * and starts that many before it says it is ready, as a reload's chain start does: the
 * requests it takes over do not wait for cold workers.
 */
import { spawn } from 'node:child_process';
import { closeSync, writeSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { ErrorCodes } from '../errors.js';

/** How long a new daemon may take to start its pools and listeners. */
export const UPGRADE_READY_MS = 60_000;

/** The variable that tells a new daemon which fd to report readiness on. */
export const UPGRADE_FD_ENV = 'FCGI_PM_UPGRADE_FD';

/** The variable that tells a new daemon how many seats each pool had ready: JSON { pool: seats }. */
export const UPGRADE_WARM_ENV = 'FCGI_PM_UPGRADE_WARM';

/** LISTEN_FDNAMES prefix of a socket handed on by an upgrade; the rest is the address text, base64url. */
const NAME_PREFIX = 'fcgi-pm.addr.';

export interface HandedSocket {
  fd: number;
  /** The address text the socket was bound for ("127.0.0.1:9000", "unix:/run/x.sock"), or a systemd name. */
  address?: string;
  name?: string;
}

export class UpgradeError extends Error {
  readonly code = ErrorCodes.UPGRADE_FAILED;
  constructor(message: string) {
    super(message);
    this.name = 'UpgradeError';
  }
}

/** A LISTEN_FDNAMES entry for a socket bound for `address` (FDNAMES may not hold ':'). */
export function upgradeName(address: string): string {
  return NAME_PREFIX + Buffer.from(address).toString('base64url');
}

/** The address text an upgrade name stands for, or undefined for any other name. */
export function upgradeAddress(name: string | undefined): string | undefined {
  if (name === undefined || !name.startsWith(NAME_PREFIX)) return undefined;
  return Buffer.from(name.slice(NAME_PREFIX.length), 'base64url').toString();
}

export interface Successor {
  pid: number;
}

/**
 * Starts the new daemon with the same command line and hands it `sockets`; resolves once
 * it is ready, rejects (UpgradeError, the new daemon stopped) when it exits first or is
 * not ready in time.
 */
export function startSuccessor(
  sockets: readonly HandedSocket[],
  readySeats: ReadonlyMap<string, number> = new Map(),
  argv: readonly string[] = [process.execPath, ...process.execArgv, ...process.argv.slice(1)],
  readyMs = UPGRADE_READY_MS,
): Promise<Successor> {
  const n = sockets.length;
  const env: NodeJS.ProcessEnv = { ...process.env, [UPGRADE_FD_ENV]: String(3 + n), [UPGRADE_WARM_ENV]: JSON.stringify(Object.fromEntries(readySeats)) };
  delete env['LISTEN_PID'];
  if (n > 0) {
    env['LISTEN_FDS'] = String(n);
    env['LISTEN_FDNAMES'] = sockets.map((s) => (s.address !== undefined ? upgradeName(s.address) : (s.name ?? 'unknown'))).join(':');
  } else {
    delete env['LISTEN_FDS'];
    delete env['LISTEN_FDNAMES'];
  }
  // LISTEN_PID must be the new daemon's own pid, known only once it runs: the shell sets it and execs.
  const child = spawn('/bin/sh', ['-c', 'LISTEN_PID=$$; export LISTEN_PID; exec "$0" "$@"', ...argv], {
    stdio: ['ignore', 'inherit', 'inherit', ...sockets.map((s) => s.fd), 'pipe'],
    env,
    // Not in our process group: a Ctrl-C meant for the old daemon on a terminal must not reach it.
    detached: true,
  });
  return new Promise<Successor>((resolve, reject) => {
    const pipe = child.stdio[3 + n] as Readable;
    let said = '';
    let settled = false;
    const finish = (err: UpgradeError | undefined): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      pipe.destroy();
      child.unref();
      if (err === undefined) resolve({ pid: child.pid! });
      else reject(err);
    };
    const timer = setTimeout(() => {
      child.kill('SIGTERM');
      finish(new UpgradeError(`the new daemon (pid ${child.pid}) was not ready within ${readyMs / 1000}s; stopped it, still serving`));
    }, readyMs);
    pipe.setEncoding('utf8');
    pipe.on('data', (s: string) => {
      said += s;
      if (said.includes('ready\n')) finish(undefined);
    });
    pipe.on('error', () => undefined);
    child.once('error', (err) => finish(new UpgradeError(`could not start the new daemon: ${err.message}`)));
    child.once('exit', (code, signal) => finish(new UpgradeError(`the new daemon (pid ${child.pid}) exited (${signal ?? `code ${code}`}) before it was ready; see its log lines above; still serving`)));
  });
}

/** In a daemon started by an upgrade: tells the old one we serve (after systemd heard READY=1). */
export function tellPredecessor(env: NodeJS.ProcessEnv = process.env): boolean {
  const v = env[UPGRADE_FD_ENV];
  delete env[UPGRADE_FD_ENV];
  const fd = Number(v);
  if (v === undefined || !Number.isInteger(fd) || fd < 3) return false;
  try {
    writeSync(fd, 'ready\n');
    closeSync(fd);
    return true;
  } catch {
    return false;
  }
}

/**
 * In a daemon started by an upgrade: the seats each pool of the daemon it replaces had
 * ready (empty otherwise, or when the variable is not ours). Read once: a later upgrade
 * of this daemon passes its own.
 */
export function takeReadySeats(env: NodeJS.ProcessEnv = process.env): Map<string, number> {
  const v = env[UPGRADE_WARM_ENV];
  delete env[UPGRADE_WARM_ENV];
  const out = new Map<string, number>();
  if (v === undefined) return out;
  try {
    const parsed: unknown = JSON.parse(v);
    if (typeof parsed !== 'object' || parsed === null) return out;
    for (const [pool, seats] of Object.entries(parsed)) if (Number.isInteger(seats) && (seats as number) > 0) out.set(pool, seats as number);
  } catch {
    // Not ours: start cold.
  }
  return out;
}
