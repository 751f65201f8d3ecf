/**
 * Shared helpers for worker tests. No side effects at import (node --test runs every
 * .js under dist/test/, this one included).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from '../../src/log/log.js';
import { lineLogger } from '../helpers/log.js';
import type { RetireReason, WorkerOwner, WorkerSpec } from '../../src/worker/types.js';
import { systemClock } from '../../src/util/clock.js';

/** A fresh 0700 temp dir, removed after the test. */
export function tempDir(t: { after: (fn: () => void) => void }, prefix = 'fcgi-pm-worker-'): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export function makeSpec(runtimeDir: string, command: string[], over: Partial<WorkerSpec> = {}): WorkerSpec {
  return {
    pool: 'test',
    command,
    socket: 'fd0',
    env: { PATH: '/usr/bin:/bin', PHP_FCGI_CHILDREN: '0' },
    cwd: undefined,
    uid: undefined,
    gid: undefined,
    runtimeDir,
    spawnTimeout: 5000,
    killTimeout: 2000,
    ...over,
  };
}

export interface LogRecord {
  level: number;
  msg: string;
  [k: string]: unknown;
}

/** A pino logger whose lines land in `records` (synchronously). */
export function captureLogger(level = 'trace'): { logger: Logger; records: LogRecord[] } {
  const records: LogRecord[] = [];
  const logger = lineLogger(level, (s) => void records.push(JSON.parse(s) as LogRecord));
  return { logger, records };
}

/** True when the pid has no live process (gone, or a zombie nobody reaped). */
export function processGone(pid: number): boolean {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return true;
  }
  // "pid (comm) S ..." — comm may contain spaces or parens: take the char after the last ')'.
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  return state === 'Z' || state === 'X';
}

/** Polls until cond() or the deadline; returns the last cond() value. */
export async function waitFor(cond: () => boolean, timeoutMs: number, everyMs = 20): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  return true;
}

/** SIGKILL by pid, ignoring "no such process". */
export function killQuiet(pid: number | undefined, sig: NodeJS.Signals = 'SIGKILL'): void {
  if (pid === undefined) return;
  try {
    process.kill(pid, sig);
  } catch {
    /* gone */
  }
}

/** The pool's side of a worker (its WorkerOwner), played by a test: requests given and running, why it is wanted gone. */
export class PoolSide implements WorkerOwner {
  readonly clock = systemClock;
  running = 0;
  given = 0;
  want: RetireReason | undefined;

  busy(): boolean {
    return this.running > 0;
  }

  requests(): number {
    return this.given;
  }

  reason(): RetireReason | undefined {
    return this.want;
  }

  /** A request starts on the worker. */
  start(): void {
    this.running++;
    this.given++;
  }

  end(): void {
    this.running--;
  }

  /** Wanted gone for `reason`; the first reason asked stays. */
  retire(reason: RetireReason): void {
    this.want ??= reason;
  }
}
