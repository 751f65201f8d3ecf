/**
 * The daemon's private directory for worker sockets and request-body temp files.
 * php-cgi -b binds its socket with mode 0777, so the directory itself must keep others
 * out: it is always a fresh mkdtemp (mode 0700), `fcgi-pm.<pid>.XXXXXX`, made by this
 * process and removed on exit, inside a base directory of the config's own:
 *
 *   runtime_dir                       when configured (its mode is left alone: it may hold
 *                                     listener sockets nginx must reach)
 *   /run/fcgi-pm/<name>-<hash>/       as root (<name>-<hash> as the default control socket's)
 *   $XDG_RUNTIME_DIR/fcgi-pm/<name>-<hash>/, else <tmpdir>/fcgi-pm-<uid>/<name>-<hash>/
 *
 * Two daemons of one config share the base during an upgrade in place. A daemon killed
 * with SIGKILL (or a crash) cannot remove its directory, so at start the daemon sweeps the
 * base: a `fcgi-pm.<pid>.` directory whose pid no longer runs is a dead predecessor's.
 */
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import * as nodePath from 'node:path';
import { controlSocketName, defaultControlDir } from '../config/control-path.js';

const PRIVATE = /^fcgi-pm\.(\d+)\.[A-Za-z0-9]{6}$/;

export interface RuntimeSetting {
  runtimeDir?: string | undefined;
  /** Config.source: the config file's absolute path, or a label for the quick form. */
  source: string;
}

/** The base directory the private directory goes in. */
export function runtimeBase(cfg: RuntimeSetting, env: NodeJS.ProcessEnv = process.env, uid = process.getuid?.() ?? -1): string {
  if (cfg.runtimeDir !== undefined) return cfg.runtimeDir;
  const name = nodePath.isAbsolute(cfg.source) ? controlSocketName(cfg.source).replace(/\.sock$/, '') : 'quick';
  return nodePath.join(defaultControlDir(env, uid), name);
}

export interface MadeRuntimeDir {
  dir: string;
  /** Directories of dead predecessors removed on the way. */
  swept: string[];
  /** The directory the code before an exec in place kept (makeRuntimeDir's `reuse`). */
  reused?: boolean;
}

/**
 * `reuse`: the directory the code before an exec in place of this process kept for the
 * workers it handed on (their sockets are in it), taken again when it is this process's
 * own (same base, named for our pid) and still there.
 */
export function makeRuntimeDir(cfg: RuntimeSetting, alive: (pid: number) => boolean = pidAlive, reuse?: string): MadeRuntimeDir {
  const base = runtimeBase(cfg);
  // /run/fcgi-pm holds the sockets the front end connects to (docs/direct.md puts them
  // there): it must let others pass, whoever made it first.
  if (base === SHARED_RUN_DIR || nodePath.dirname(base) === SHARED_RUN_DIR) openSharedRunDir(SHARED_RUN_DIR);
  if (cfg.runtimeDir !== undefined) mkdirSync(base, { recursive: true, mode: 0o755 });
  else {
    // Its parent may be a shared tmpdir: the base is private and must be ours.
    mkdirSync(base, { recursive: true, mode: 0o700 });
    const st = lstatSync(base);
    const uid = process.getuid?.();
    if (!st.isDirectory() || (uid !== undefined && st.uid !== uid)) throw new Error(`${base} is not a directory of ours (uid ${st.uid}); set runtime_dir`);
  }
  const swept = sweepDead(base, alive);
  if (reuse !== undefined && ownPrivateDir(base, reuse)) return { dir: reuse, swept, reused: true };
  return { dir: mkdtempSync(nodePath.join(base, `fcgi-pm.${process.pid}.`)), swept };
}

function ownPrivateDir(base: string, dir: string): boolean {
  if (nodePath.dirname(dir) !== base || PRIVATE.exec(nodePath.basename(dir))?.[1] !== String(process.pid)) return false;
  try {
    const st = lstatSync(dir);
    return st.isDirectory() && st.uid === process.getuid?.();
  } catch {
    return false;
  }
}

/** Where root's daemons keep their control sockets, private bases, and Unix listeners. */
export const SHARED_RUN_DIR = '/run/fcgi-pm';

/**
 * /run/fcgi-pm as 0755: made so, or opened up when root made it 0700 (fcgi-pm before it
 * knew better, or a mkdir -p under umask 077); a directory of someone else's is left alone.
 */
export function openSharedRunDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  const st = lstatSync(dir);
  if (st.isDirectory() && st.uid === process.getuid?.() && (st.mode & 0o055) !== 0o055) chmodSync(dir, (st.mode & 0o7777) | 0o055);
}

/** Removes the private directories in `base` whose daemon no longer runs. */
export function sweepDead(base: string, alive: (pid: number) => boolean = pidAlive): string[] {
  const swept: string[] = [];
  let names: string[];
  try {
    names = readdirSync(base);
  } catch {
    return swept;
  }
  const uid = process.getuid?.();
  for (const name of names) {
    const m = PRIVATE.exec(name);
    if (m === null) continue;
    const pid = Number(m[1]);
    if (pid === process.pid || alive(pid)) continue;
    const path = nodePath.join(base, name);
    try {
      const st = lstatSync(path);
      if (!st.isDirectory() || (uid !== undefined && st.uid !== uid)) continue;
      rmSync(path, { recursive: true, force: true });
      swept.push(path);
    } catch {
      // raced with another sweeper
    }
  }
  return swept;
}

export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it runs, as someone else.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Synchronous so it can run from a process 'exit' handler too. */
/**
 * A new 0700 directory `<prefix><n>` in `base` for one generation's worker sockets, n the
 * first free number after `after`: worker sockets are named by pool and worker number, and workers of an
 * earlier generation (a reload's, or those an exec in place handed on) still own theirs in
 * the directory they were started in until they exit, and remove them when they do.
 */
export function freshSubdir(base: string, prefix: string, after = 0): { dir: string; n: number } {
  for (let n = after + 1; ; n++) {
    const dir = nodePath.join(base, `${prefix}${n}`);
    try {
      mkdirSync(dir, { mode: 0o700 });
      return { dir, n };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
}

export function removeRuntimeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}
