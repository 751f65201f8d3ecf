/**
 * Reaping the children libuv did not spawn: the workers the addon spawned without a fork
 * (spawn.ts spawnUnforked), and the workers an exec in place of the daemon handed to the
 * new code (the same pid, so still our children, but unknown to libuv, which waits only
 * for the pids it spawned). On each SIGCHLD, and every REAP_POLL_MS as a safety net, each
 * watched pid is asked with waitpid(pid, WNOHANG) (the addon's `reap`): a zombie is reaped
 * and its exit reported once.
 */
import { constants } from 'node:os';
import { handOverAddon } from './exec-addon.js';

/**
 * Every SIGCHLD scans every watched pid, so a signal coalesced with another still reaps
 * both; the poll is only a safety net. A scan of 200 idle workers' pids is ~0.5 ms
 * (waitpid each): once a second it would be a twentieth of an idle daemon's CPU budget.
 */
export const REAP_POLL_MS = 10_000;

export interface ReapedExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

const watched = new Map<number, (exit: ReapedExit) => void>();
let timer: NodeJS.Timeout | undefined;

const SIGNAL_NAMES = new Map<number, NodeJS.Signals>(Object.entries(constants.signals).map(([name, n]) => [n, name as NodeJS.Signals]));

/** Reports `pid`'s exit once it is reaped; the addon must be there (handOverAddon()). */
export function watchChild(pid: number, onExit: (exit: ReapedExit) => void): void {
  watched.set(pid, onExit);
  if (watched.size === 1) {
    process.on('SIGCHLD', reapWatched);
    // Held like libuv's handle of a child it spawned: a process waits for the children it watches.
    timer = setInterval(reapWatched, REAP_POLL_MS);
  }
  // It may have exited already (between the exec and now).
  reapWatched();
}

function reapWatched(): void {
  const addon = handOverAddon();
  if (addon === undefined) return;
  for (const [pid, onExit] of watched) {
    const r = addon.reap(pid);
    if (r === undefined) continue;
    watched.delete(pid);
    onExit(r.gone === true ? { code: null, signal: null } : { code: r.code ?? null, signal: r.signal === undefined ? null : (SIGNAL_NAMES.get(r.signal) ?? null) });
  }
  if (watched.size === 0 && timer !== undefined) {
    process.off('SIGCHLD', reapWatched);
    clearInterval(timer);
    timer = undefined;
  }
}

/** `sig` to the process group `pid` leads, or to `pid` alone where it leads none; quiet when it is gone. */
export function signalGroup(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig);
  } catch {
    try {
      process.kill(pid, sig);
    } catch {
      // gone
    }
  }
}
