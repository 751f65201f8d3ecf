/**
 * A memory cgroup for one test, under the test process's own (the daemon under test runs
 * in it: StartDaemonOptions.cgroupProcs). Needs root and a memory controller; otherwise
 * `makeMemoryBox` says why not, for t.skip. Cleanup, bounded in time: every process left
 * in it or its children is SIGKILLed by pid, then the directories are removed, deepest first.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { locateMemoryCgroup, type MemoryCgroup } from '../../src/memory/cgroup-files.js';
import { memoryFiles } from '../../src/memory/cgroup.js';
import type { Scope } from './scope.js';
import { sleep } from './wait.js';

export interface MemoryBoxDir {
  cg: MemoryCgroup;
  dir: string;
  procs: string;
}

let serial = 0;

/** A fresh memory cgroup with `limit` bytes (undefined: no limit), or the reason there cannot be one. */
export function makeMemoryBox(scope: Scope, limit: number | undefined): MemoryBoxDir | string {
  if (process.getuid?.() !== 0) return 'creating memory cgroups needs root';
  const own = locateMemoryCgroup();
  if (own === undefined) return 'no memory cgroup hierarchy is mounted (neither a v1 memory controller nor cgroup2 in /proc/self/mountinfo)';
  if (own.version === 2) {
    const ctl = join(own.dir, 'cgroup.subtree_control');
    if (!existsSync(ctl) || !readFileSync(ctl, 'latin1').includes('memory')) return `cgroup v2 without the memory controller for children of ${own.dir}`;
  }
  const dir = join(own.dir, `fcgi-pm-test-${process.pid}-${++serial}`);
  try {
    mkdirSync(dir);
  } catch (e) {
    return `cannot create a memory cgroup under ${own.dir}: ${(e as NodeJS.ErrnoException).code}`;
  }
  scope.after(() => removeCgroupTree(dir)); // what stays is reported by the test that cares
  if (limit !== undefined) writeFileSync(join(dir, memoryFiles(own.version).limit), String(limit));
  return { cg: { ...own, dir }, dir, procs: join(dir, 'cgroup.procs') };
}

function subdirs(dir: string): string[] {
  try {
    return readdirSync(dir).map((n) => join(dir, n)).filter((p) => statSync(p).isDirectory());
  } catch {
    return [];
  }
}

function pidsIn(dir: string): number[] {
  let own: number[] = [];
  try {
    own = readFileSync(join(dir, 'cgroup.procs'), 'latin1').split('\n').filter((l) => l !== '').map(Number);
  } catch {
    // gone
  }
  return [...own, ...subdirs(dir).flatMap(pidsIn)];
}

/**
 * SIGKILLs every process in the cgroup `dir` and below (for up to 10 s), then removes the
 * tree; returns the directories it could not remove (ENOENT: already gone, not listed).
 */
export async function removeCgroupTree(dir: string): Promise<string[]> {
  const deadline = Date.now() + 10_000;
  for (let pids = pidsIn(dir); pids.length > 0 && Date.now() < deadline; pids = pidsIn(dir)) {
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // exited meanwhile
      }
    }
    await sleep(50);
  }
  const left: string[] = [];
  const rm = (d: string): void => {
    for (const s of subdirs(d)) rm(s);
    try {
      rmdirSync(d);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') left.push(`${d}: ${(e as Error).message}`);
    }
  };
  rm(dir);
  return left;
}
