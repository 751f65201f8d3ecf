/**
 * No worker may outlive the daemon, even when the daemon is killed with SIGKILL.
 *
 * 'setpriv' (Linux, util-linux ≥ 2.33): the command runs as `setpriv --pdeathsig KILL --
 *   cmd…`, so the kernel sends SIGKILL to the worker when the daemon's main thread dies.
 *   Limits: the worker's own children (php-cgi with PHP_FCGI_CHILDREN > 0) are not
 *   covered: php-cgi groups (group_size) use the watchdog instead; and the setting is
 *   per forking thread, so spawn only from the main thread.
 * 'watchdog' (fallback when setpriv is missing, e.g. not Linux): one `/bin/sh` per
 *   daemon reads "+pgid"/"-pgid" lines on a pipe from the daemon. At EOF (the daemon died,
 *   however) it SIGKILLs every registered process group. Workers are spawned detached
 *   (their own process group), so this covers their children too. Limit: if the
 *   watchdog itself is SIGKILLed while the daemon lives, it is restarted and told the
 *   live groups again; a daemon death inside that gap is not covered.
 * Both leave a window of a few microseconds between fork and exec of the guard where a
 * daemon death is missed; no portable mechanism closes it.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import type { Writable } from 'node:stream';

export type DeathGuardMode = 'setpriv' | 'watchdog' | 'none';

export interface DeathGuard {
  readonly mode: DeathGuardMode;
  /** The file and argv to spawn for an already-resolved command. */
  wrap(file: string, args: readonly string[]): { file: string; args: string[] };
  /** A worker started as leader of process group `pgid` (workers are spawned detached). */
  started(pgid: number): void;
  /** That group's leader exited (and was reaped). */
  exited(pgid: number): void;
}

const SETPRIV_CANDIDATES = ['/usr/bin/setpriv', '/bin/setpriv'];
let setprivCache: string | null | undefined;

/** Path of a setpriv that supports --pdeathsig, checked once per process; undefined if none. */
export function findSetpriv(): string | undefined {
  if (setprivCache !== undefined) return setprivCache ?? undefined;
  setprivCache = null;
  if (process.platform !== 'linux') return undefined;
  for (const p of SETPRIV_CANDIDATES) {
    try {
      fs.accessSync(p, fs.constants.X_OK);
    } catch {
      continue;
    }
    const r = spawnSync(p, ['--help'], { encoding: 'utf8', timeout: 5000, env: {} });
    if (typeof r.stdout === 'string' && r.stdout.includes('--pdeathsig')) {
      setprivCache = p;
      break;
    }
  }
  return setprivCache ?? undefined;
}

class SetprivGuard implements DeathGuard {
  readonly mode = 'setpriv' as const;
  constructor(private readonly setpriv: string) {}
  wrap(file: string, args: readonly string[]): { file: string; args: string[] } {
    return { file: this.setpriv, args: ['--pdeathsig', 'KILL', '--', file, ...args] };
  }
  started(): void {}
  exited(): void {}
}

class NoGuard implements DeathGuard {
  readonly mode = 'none' as const;
  wrap(file: string, args: readonly string[]): { file: string; args: string[] } {
    return { file, args: [...args] };
  }
  started(): void {}
  exited(): void {}
}

/** The watchdog's program. Ignores the usual stop signals: only EOF ends it. */
export const WATCHDOG_SCRIPT = `trap '' INT TERM HUP QUIT
groups=' '
while IFS= read -r line; do
  id=\${line#?}
  case $id in ''|*[!0-9]*) continue ;; esac
  case $line in
    +*) groups="$groups$id " ;;
    -*) case $groups in *" $id "*) groups="\${groups%% $id *} \${groups#* $id }" ;; esac ;;
  esac
done
for g in $groups; do kill -s KILL -- "-$g" 2>/dev/null; done
`;

const WATCHDOG_RESPAWN_MS = 1000;

export class WatchdogGuard implements DeathGuard {
  readonly mode = 'watchdog' as const;
  private proc: ChildProcess | undefined;
  private pipe: Writable | undefined;
  private readonly groups = new Set<number>();
  private respawnTimer: NodeJS.Timeout | undefined;

  constructor(private readonly shell = '/bin/sh') {}

  wrap(file: string, args: readonly string[]): { file: string; args: string[] } {
    return { file, args: [...args] };
  }

  started(pgid: number): void {
    this.groups.add(pgid);
    if (this.pipe === undefined) this.launch(); // sends all groups
    else this.send(`+${pgid}\n`);
  }

  exited(pgid: number): void {
    if (this.groups.delete(pgid)) this.send(`-${pgid}\n`);
  }

  /** Pid of the watchdog process, for tests. */
  get pid(): number | undefined {
    return this.proc?.pid;
  }

  private send(text: string): void {
    this.pipe?.write(text);
  }

  private launch(): void {
    const proc = spawn(this.shell, ['-c', WATCHDOG_SCRIPT, 'fcgi-pm-watchdog'], {
      stdio: ['pipe', 'ignore', 'ignore'],
      detached: true, // a terminal's ^C must not reach it
      env: {},
    });
    const pipe = proc.stdin!;
    this.proc = proc;
    this.pipe = pipe;
    // Neither the process nor the pipe may keep the daemon alive.
    proc.unref();
    (pipe as unknown as { unref?: () => void }).unref?.();
    pipe.on('error', () => {}); // EPIPE if it died; 'exit' handles that
    proc.on('error', () => this.lost(proc));
    proc.on('exit', () => this.lost(proc));
    let text = '';
    for (const g of this.groups) text += `+${g}\n`;
    if (text !== '') pipe.write(text);
  }

  private lost(proc: ChildProcess): void {
    if (this.proc !== proc) return;
    this.proc = undefined;
    this.pipe = undefined;
    if (this.groups.size > 0 && this.respawnTimer === undefined) {
      this.respawnTimer = setTimeout(() => {
        this.respawnTimer = undefined;
        if (this.pipe === undefined && this.groups.size > 0) this.launch();
      }, WATCHDOG_RESPAWN_MS);
      this.respawnTimer.unref();
    }
  }
}

export function createDeathGuard(mode: DeathGuardMode | 'auto' = 'auto'): DeathGuard {
  if (mode === 'none') return new NoGuard();
  if (mode === 'watchdog') return new WatchdogGuard();
  const sp = findSetpriv();
  if (sp !== undefined) return new SetprivGuard(sp);
  if (mode === 'setpriv') throw new Error('setpriv with --pdeathsig support not found (looked in /usr/bin, /bin)');
  return new WatchdogGuard();
}

let defaultGuard: DeathGuard | undefined;
let groupGuard: DeathGuard | undefined;

/**
 * For workers whose own children must die with the daemon (php-cgi groups): the
 * watchdog, which kills whole process groups; setpriv's --pdeathsig reaches the parent only.
 */
export function processGroupDeathGuard(): DeathGuard {
  groupGuard ??= createDeathGuard('watchdog');
  return groupGuard;
}

/** The guard workers use unless told otherwise: setpriv when available, else the watchdog. */
export function defaultDeathGuard(): DeathGuard {
  defaultGuard ??= createDeathGuard('auto');
  return defaultGuard;
}
