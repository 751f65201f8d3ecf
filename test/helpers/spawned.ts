/**
 * Helpers for pools of workers the daemon spawns: a php-cgi command line carrying a
 * marker unique to the test (so /proc searches find only our workers), and a sampler
 * that records how many workers exist while a load runs.
 */
import { join } from 'node:path';
import type { Daemon } from './daemon.js';
import { PHP_CGI, PHP_FLAGS } from './paths.js';
import { processesMatching } from './proc.js';

/** php-cgi argv whose command line contains `marker` (an error_log path in `dir`). */
export function phpCommand(dir: string, marker: string): string[] {
  return [PHP_CGI, ...PHP_FLAGS, '-d', `error_log=${join(dir, marker)}.log`];
}

/** Live workers of `daemon` whose command line contains `marker`. */
export function workerPids(daemon: Daemon, marker: string): number[] {
  return daemon.descendants(marker);
}

/**
 * Live processes anywhere carrying `marker` (also after the daemon died and they were reparented).
 * Give it something only this run has, such as its temp dir: other sessions and CI clones run the
 * same test file at the same time, and a shared marker would find (and a cleanup kill) their workers.
 */
export function orphanPids(marker: string): number[] {
  return processesMatching(marker).map((p) => p.pid);
}

export interface Sample {
  at: number;
  pids: number[];
}

/** Polls the worker count every `intervalMs` until stop() is called. */
export function sampleWorkers(daemon: Daemon, marker: string, intervalMs = 20): { samples: Sample[]; stop(): Sample[]; max(): number } {
  const samples: Sample[] = [];
  const take = (): void => {
    samples.push({ at: Date.now(), pids: workerPids(daemon, marker) });
  };
  take();
  const timer = setInterval(take, intervalMs);
  return {
    samples,
    stop() {
      clearInterval(timer);
      take();
      return samples;
    },
    max() {
      return Math.max(...samples.map((s) => s.pids.length));
    },
  };
}
