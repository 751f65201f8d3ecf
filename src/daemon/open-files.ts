/**
 * RLIMIT_NOFILE for the daemon itself: every front-end connection, worker socket and
 * backend connection is a descriptor, and the soft limit is often 1024. Node 20 raises
 * the soft limit to the hard one before any of our code runs (PlatformInit); where it
 * did not (another runtime, a hard limit Node could not reach), `prlimit --pid` from
 * util-linux sets it on our own process: same pid, no re-exec, so systemd, pid files
 * and socket activation see nothing change. Node has no setrlimit of its own.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { findPrlimit } from '../pool/rlimit.js';

export interface OpenFilesLimit {
  /** The soft limit found at start; undefined where /proc is missing. */
  before: number | undefined;
  soft: number | undefined;
  hard: number | undefined;
  /** Why the soft limit stayed below the hard one. */
  problem?: string;
}

/** [soft, hard] from a /proc/<pid>/limits text; Infinity for "unlimited". */
export function parseNofile(limits: string): [number, number] | undefined {
  const m = /^Max open files\s+(\S+)\s+(\S+)/m.exec(limits);
  if (!m) return undefined;
  const num = (s: string): number => (s === 'unlimited' ? Infinity : Number.parseInt(s, 10));
  return [num(m[1]!), num(m[2]!)];
}

function readNofile(): [number, number] | undefined {
  try {
    return parseNofile(readFileSync('/proc/self/limits', 'utf8'));
  } catch {
    return undefined;
  }
}

/** Raises the soft limit to the hard limit (if it is not there already) and says what it is now. */
export function raiseOpenFilesLimit(prlimit = findPrlimit()): OpenFilesLimit {
  const found = readNofile();
  if (found === undefined) return { before: undefined, soft: undefined, hard: undefined };
  const [before, hard] = found;
  if (before >= hard || hard === Infinity) return { before, soft: before, hard };
  if (prlimit === undefined) return { before, soft: before, hard, problem: 'prlimit (util-linux) not found' };
  const r = spawnSync(prlimit, ['--pid', String(process.pid), `--nofile=${hard}:${hard}`], { encoding: 'utf8', timeout: 5000 });
  const now = readNofile() ?? found;
  if (now[0] >= hard) return { before, soft: now[0], hard };
  return { before, soft: now[0], hard, problem: `prlimit failed: ${(r.stderr || r.error?.message || `exit ${r.status}`).trim()}` };
}

/** The start-up line's text: "open files: 1024 → 1048576". */
export function describeOpenFiles(l: OpenFilesLimit, reserve: number | undefined): string {
  if (l.soft === undefined) return 'open files: limit unknown (no /proc)';
  const raised = l.before !== undefined && l.soft > l.before ? `${l.before} → ${l.soft}` : `${l.soft}`;
  const why = l.problem !== undefined ? ` (hard limit ${l.hard}; not raised: ${l.problem})` : l.soft === l.hard ? ' (the hard limit)' : '';
  const kept = reserve !== undefined ? `, ${reserve} kept for workers and backends` : '';
  return `open files: ${raised}${why}${kept}`;
}
