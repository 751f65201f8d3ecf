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
 *
 * `upgrade: exec` (the default) keeps the pid instead, as PHP-FPM's and uWSGI's re-exec
 * do, for supervisors that wait on the process they started (runit, s6, supervisord, a
 * container's PID 1): the new code is first checked by running it: it loads its modules
 * and the config on disk and runs the host checks, as the bridge that serves during the
 * exec (bridge.ts) before it serves, or, when there is no bridge, in check mode
 * (UPGRADE_CHECK_ENV: then it exits); the
 * listening sockets are duplicated so that the old daemon can stop accepting and finish
 * its requests while the kernel queues new connections, and then the process execs the
 * new code (exec-in-place.ts), which finds the sockets at their numbers
 * (socket-activation.ts's EXEC_FDS_ENV). A check that fails changes nothing; an exec that
 * fails starts the new code with a new pid as above.
 */
import { spawn } from 'node:child_process';
import { EXEC_FDS_ENV } from './socket-activation.js';
import { closeSync, readFileSync, writeFileSync, writeSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { setPriority } from 'node:os';
import { ErrorCodes } from '../errors.js';
import type { HandedWorker } from '../worker/types.js';

/** How long a new daemon may take to start its pools and listeners. */
export const UPGRADE_READY_MS = 60_000;

/** The variable that tells a new daemon which fd to report readiness on. */
export const UPGRADE_FD_ENV = 'FCGI_PM_UPGRADE_FD';

/** The variable that tells a new daemon how many seats each pool had ready: JSON { pool: seats }. */
export const UPGRADE_WARM_ENV = 'FCGI_PM_UPGRADE_WARM';

/** The variable that tells the new code to check that it can start, then exit (exec upgrades). */
export const UPGRADE_CHECK_ENV = 'FCGI_PM_UPGRADE_CHECK';

/** How long the check of the new code may take. */
export const UPGRADE_CHECK_MS = 30_000;

/** The check's nice value: lowest priority (it shares the daemon's session, and so its autogroup). */
const CHECK_NICE = 19;

/** A quiet start (startSuccessor) gets the normal CPU weight back after this long at most: on a saturated machine it would wait for idle CPU. */
export const QUIET_START_MS = 5000;

/** LISTEN_FDNAMES prefix of a socket handed on by an upgrade; the rest is the address text, base64url. */
const NAME_PREFIX = 'fcgi-pm.addr.';
/** The same for a Unix socket whose file the daemon created: the last holder removes the file at its stop. */
const OWNED_PREFIX = 'fcgi-pm.own.';

export interface HandedSocket {
  fd: number;
  /** The address text the socket was bound for ("127.0.0.1:9000", "unix:/run/x.sock"), or a systemd name. */
  address?: string;
  name?: string;
  /** A Unix socket file this daemon created (or took over from one that did), not systemd's. */
  ownsPath?: boolean;
}

export class UpgradeError extends Error {
  readonly code = ErrorCodes.UPGRADE_FAILED;
  /** A new daemon (or bridge) that exited before it was ready: how, and what it said on the readiness pipe (tellPredecessorFailure). */
  readonly told: { exit: string; message: string } | undefined;
  constructor(message: string, told?: { exit: string; message: string }) {
    super(message);
    this.name = 'UpgradeError';
    this.told = told;
  }
}

/** A LISTEN_FDNAMES entry for a socket bound for `address` (FDNAMES may not hold ':'). */
export function upgradeName(address: string, ownsPath = false): string {
  return (ownsPath ? OWNED_PREFIX : NAME_PREFIX) + Buffer.from(address).toString('base64url');
}

/** The address text an upgrade name stands for and whether its file is ours, or undefined for any other name. */
export function upgradeAddress(name: string | undefined): { address: string; ownsPath: boolean } | undefined {
  const prefix = name === undefined ? undefined : [NAME_PREFIX, OWNED_PREFIX].find((p) => name.startsWith(p));
  if (prefix === undefined) return undefined;
  return { address: Buffer.from(name!.slice(prefix.length), 'base64url').toString(), ownsPath: prefix === OWNED_PREFIX };
}

export interface Successor {
  pid: number;
  /** Set when this process re-executes itself (upgrade: exec) once its requests finished. */
  exec?: ExecPlan;
}

/** The command line that started this daemon: what an upgrade runs again, from the files on disk. */
export function ownCommandLine(): string[] {
  return [process.execPath, ...process.execArgv, ...process.argv.slice(1)];
}

/** The LISTEN_FDNAMES / EXEC_FDS_ENV name a handed socket goes by. */
function nameOf(s: HandedSocket): string {
  return s.address !== undefined ? upgradeName(s.address, s.ownsPath === true) : (s.name ?? 'unknown');
}

/**
 * Lowers the CPU weight of a process started in its own session (its autogroup: the
 * kernel shares a busy CPU between sessions first) to nice 19; returns what gives it back
 * nice 0, or undefined where the kernel has no autogroups. Giving back a nice of 0 or more
 * needs no privilege, but a write may be refused for 100 ms after another one (EAGAIN).
 */
export function lowerAutogroup(pid: number): (() => void) | undefined {
  const write = (nice: number): boolean => {
    try {
      writeFileSync(`/proc/${pid}/autogroup`, String(nice));
      return true;
    } catch {
      return false;
    }
  };
  try {
    if (readFileSync('/proc/sys/kernel/sched_autogroup_enabled', 'utf8').trim() !== '1') return undefined;
  } catch {
    return undefined;
  }
  if (!write(CHECK_NICE)) return undefined;
  return () => {
    let tries = 0;
    const again = (): void => {
      if (!write(0) && ++tries < 5) setTimeout(again, 110).unref();
    };
    again();
  };
}

/**
 * Starts the new daemon with the same command line and hands it `sockets`; resolves once
 * it is ready, rejects (UpgradeError, the new daemon stopped) when it exits first or is
 * not ready in time. `quietStart`: it starts at the lowest CPU weight (lowerAutogroup)
 * while this daemon serves, and gets the normal one back once ready, or after
 * QUIET_START_MS.
 */
export function startSuccessor(
  sockets: readonly HandedSocket[],
  readySeats: ReadonlyMap<string, number> = new Map(),
  argv: readonly string[] = ownCommandLine(),
  readyMs = UPGRADE_READY_MS,
  extraEnv: NodeJS.ProcessEnv = {},
  quietStart = false,
): Promise<Successor> {
  const n = sockets.length;
  const env: NodeJS.ProcessEnv = { ...process.env, [UPGRADE_FD_ENV]: String(3 + n), [UPGRADE_WARM_ENV]: JSON.stringify(Object.fromEntries(readySeats)), ...extraEnv };
  for (const [k, v] of Object.entries(extraEnv)) if (v === undefined) delete env[k];
  delete env['LISTEN_PID'];
  if (n > 0) {
    env['LISTEN_FDS'] = String(n);
    env['LISTEN_FDNAMES'] = sockets.map(nameOf).join(':');
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
  const normal = quietStart && child.pid !== undefined ? lowerAutogroup(child.pid) : undefined;
  const giveBack = normal === undefined ? undefined : setTimeout(normal, QUIET_START_MS);
  return new Promise<Successor>((resolve, reject) => {
    const pipe = child.stdio[3 + n] as Readable;
    let said = '';
    let settled = false;
    const finish = (err: UpgradeError | undefined): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(giveBack);
      normal?.();
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
    let ended = false;
    pipe.on('data', (s: string) => {
      said += s;
      if (said.includes('ready\n')) finish(undefined);
    });
    pipe.on('error', () => undefined);
    child.once('error', (err) => finish(new UpgradeError(`could not start the new daemon: ${err.message}`)));
    child.once('exit', (code, signal) => {
      const exit = signal ?? `code ${code}`;
      const failed = (): void => {
        const told = /^failed: (.*)$/m.exec(said)?.[1];
        finish(new UpgradeError(`the new daemon (pid ${child.pid}) exited (${exit}) before it was ready${told !== undefined ? `: ${told}` : '; see its log lines above'}; still serving`, told === undefined ? undefined : { exit, message: told }));
      };
      // What it wrote on the pipe just before it exited may still be on its way.
      if (ended) return failed();
      pipe.once('end', failed);
      setTimeout(failed, 200).unref();
    });
    pipe.once('end', () => (ended = true));
  });
}

/**
 * Runs the new code in check mode (UPGRADE_CHECK_ENV) with this daemon's command line, as
 * `nginx -t` before a binary upgrade: resolves when it could start, rejects (UpgradeError,
 * with the last lines it wrote) when it exits otherwise or takes longer than `checkMs`.
 */
export function checkSuccessor(argv: readonly string[] = ownCommandLine(), checkMs = UPGRADE_CHECK_MS, quietMs = QUIET_START_MS): Promise<void> {
  const env: NodeJS.ProcessEnv = { ...process.env, [UPGRADE_CHECK_ENV]: '1' };
  for (const k of ['LISTEN_PID', 'LISTEN_FDS', 'LISTEN_FDNAMES', 'NOTIFY_SOCKET', EXEC_FDS_ENV]) delete env[k];
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], env });
  // It serves nothing: loading the program (about half a second of CPU) takes what the
  // daemon, in the same session, leaves, instead of delaying the requests it serves.
  if (child.pid !== undefined) {
    try {
      setPriority(child.pid, CHECK_NICE);
    } catch {
      // gone already: its exit says why
    }
  }
  // Where serving saturates the CPU, nice 19 gets next to nothing and the check would run
  // out its time: after quietMs it gets the normal priority back (as root: raising it
  // needs CAP_SYS_NICE; otherwise it stays at 19).
  const pid = child.pid;
  const giveBack = pid === undefined ? undefined : setTimeout(() => {
    try {
      setPriority(pid, 0);
    } catch {
      // not root, or gone
    }
  }, quietMs);
  let said = '';
  const keep = (b: Buffer): void => {
    said = (said + b.toString('utf8')).slice(-4000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      clearTimeout(giveBack);
      child.kill('SIGKILL');
      reject(new UpgradeError(`the new code did not finish its check within ${checkMs / 1000}s; not upgrading, still serving`));
    }, checkMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      clearTimeout(giveBack);
      reject(new UpgradeError(`could not run the new code's check: ${err.message}; still serving`));
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      clearTimeout(giveBack);
      if (code === 0) return resolve();
      const last = lastMessage(said);
      reject(new UpgradeError(`the new code cannot start (its check exited ${signal ?? `with code ${code}`}${last ? `: ${last}` : ''}); not upgrading, still serving`));
    });
  });
}

/** The most telling line of what a failed check wrote: a log line's msg, else the first error line. */
function lastMessage(text: string): string {
  const lines = text.split('\n').map((l) => l.trim()).filter((l) => l !== '');
  for (let i = lines.length - 1; i >= 0; i--) {
    try {
      const o = JSON.parse(lines[i]!) as { msg?: unknown; level?: unknown };
      if (typeof o.msg === 'string' && typeof o.level === 'number' && o.level >= 50) return o.msg;
    } catch {
      // not a log line
    }
  }
  return lines.find((l) => /Error|error:/.test(l)) ?? lines[lines.length - 1] ?? '';
}

/** What an exec in place runs and keeps: the command line, its environment, the descriptors. */
export interface ExecPlan {
  argv: string[];
  env: NodeJS.ProcessEnv;
  /** The duplicated listening sockets, kept at their numbers; also what a fallback hands on. */
  sockets: HandedSocket[];
  readySeats: ReadonlyMap<string, number>;
  /** Further descriptors the new code inherits at their numbers: the output pipes of the workers handed on. */
  keep?: number[];
  /** Epoch ms the upgrade began and the new code passed its check (the phases the new code logs). */
  times?: { begin: number; checked: number; bridged?: number };
  /** The pid of the bridge serving while the exec and the new code's start happen (bridge.ts). */
  bridge?: number;
}

/**
 * What an exec in place hands the new code beside the sockets (UPGRADE_HANDOVER_ENV): the
 * idle workers of each pool, with a fingerprint of the pool's settings (the new code adopts
 * them only for a pool whose settings are the same), the private runtime dir their sockets
 * are in (the new code keeps it), and when each phase of the upgrade began.
 */
export interface Handover {
  runtimeDir: string | undefined;
  /** The bridge that serves while the new code starts (bridge.ts): stopped once the new code serves. */
  bridge?: number | undefined;
  pools: HandedPool[];
  /** bridged: the bridge served (or, without one, the check was done); absent from an older code's record. */
  times: { begin: number; checked: number; bridged?: number; exec: number };
}

export interface HandedPool {
  pool: string;
  /** poolFingerprint (reload.ts) of the pool's settings in the code that handed it on. */
  config: string;
  workers: HandedWorker[];
}

export const UPGRADE_HANDOVER_ENV = 'FCGI_PM_UPGRADE_HANDOVER';

/** The plan with the handed workers: their record in the environment, their output pipes kept. */
export function withHandover(plan: ExecPlan, pools: HandedPool[], runtimeDir: string | undefined, now = Date.now()): ExecPlan {
  const begin = plan.times?.begin ?? now;
  const h: Handover = { runtimeDir, pools, bridge: plan.bridge, times: { begin, checked: plan.times?.checked ?? begin, bridged: plan.times?.bridged, exec: now } };
  const keep = pools.flatMap((p) => p.workers.flatMap((w) => [w.out, w.err]));
  return { ...plan, env: { ...plan.env, [UPGRADE_HANDOVER_ENV]: JSON.stringify(h) }, keep: [...(plan.keep ?? []), ...keep] };
}

/** In the new code after an exec in place: what the code before handed on (read once), or undefined. */
export function takeHandover(env: NodeJS.ProcessEnv = process.env): Handover | undefined {
  const v = env[UPGRADE_HANDOVER_ENV];
  delete env[UPGRADE_HANDOVER_ENV];
  if (v === undefined) return undefined;
  try {
    const h = JSON.parse(v) as Handover;
    if (typeof h !== 'object' || h === null || !Array.isArray(h.pools) || typeof h.times !== 'object') return undefined;
    const pools = h.pools.filter((p) => typeof p.pool === 'string' && typeof p.config === 'string' && Array.isArray(p.workers));
    for (const p of pools) p.workers = p.workers.filter(isHandedWorker);
    return { runtimeDir: typeof h.runtimeDir === 'string' ? h.runtimeDir : undefined, pools, bridge: Number.isInteger(h.bridge) ? h.bridge : undefined, times: h.times };
  } catch {
    return undefined;
  }
}

/** An exec that failed: the workers handed on for it are stopped (SIGTERM to each group; libuv still reaps them here). */
export function stopHanded(plan: ExecPlan): void {
  const h = takeHandover({ ...plan.env });
  for (const w of h?.pools.flatMap((p) => p.workers) ?? []) {
    try {
      process.kill(-w.pid, 'SIGTERM');
    } catch {
      // gone
    }
  }
}

function isHandedWorker(w: unknown): w is HandedWorker {
  const o = w as Record<string, unknown>;
  return typeof o === 'object' && o !== null && Number.isInteger(o['pid']) && typeof o['socket'] === 'string' && Number.isInteger(o['out']) && Number.isInteger(o['err']);
}

/** The plan for an exec of `argv` that keeps `sockets` (already duplicated). */
export function execPlan(sockets: HandedSocket[], readySeats: ReadonlyMap<string, number>, argv: string[] = ownCommandLine()): ExecPlan {
  const env: NodeJS.ProcessEnv = { ...process.env, [EXEC_FDS_ENV]: JSON.stringify(sockets.map((s) => [s.fd, nameOf(s)])), [UPGRADE_WARM_ENV]: JSON.stringify(Object.fromEntries(readySeats)) };
  for (const k of ['LISTEN_PID', 'LISTEN_FDS', 'LISTEN_FDNAMES', UPGRADE_FD_ENV]) delete env[k];
  return { argv, env, sockets, readySeats };
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
 * In a new daemon or bridge started by an upgrade that cannot start: tells the old one why
 * (one line), before it exits.
 */
export function tellPredecessorFailure(message: string, env: NodeJS.ProcessEnv = process.env): void {
  const fd = Number(env[UPGRADE_FD_ENV]);
  delete env[UPGRADE_FD_ENV];
  if (!Number.isInteger(fd) || fd < 3) return;
  try {
    writeSync(fd, `failed: ${message.replace(/\s*\n\s*/g, '; ')}\n`);
    closeSync(fd);
  } catch {
    // gone: its exit says enough
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
