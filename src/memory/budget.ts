/**
 * The host memory budget: /proc/meminfo, the memory cgroup limit fcgi-pm runs under (a
 * container, a systemd unit's MemoryMax, a board's cgroup), and memory_budget as written
 * turned into bytes at start and on reload.
 *
 *   "512MiB"  that many bytes
 *   "50%"     that share of the box: the cgroup limit when there is one below MemTotal,
 *             else MemTotal
 *   auto      AUTO_SHARE of what the box could give when fcgi-pm starts: MemAvailable
 *             (what the host could give without swapping, other services left out),
 *             or the cgroup limit when that is smaller.
 */
import fs from 'node:fs';
import os from 'node:os';
import type { MemoryBudgetSetting } from '../config/types.js';
import { formatBytes } from './format.js';

export const AUTO_SHARE = 0.75;

export interface MemInfo {
  memTotal: number;
  memAvailable: number;
  /** 'meminfo' (/proc/meminfo) or 'os' (os.totalmem/freemem: free memory, no page cache). */
  source: 'meminfo' | 'os';
}

/** Parses /proc/meminfo; undefined without MemTotal. MemAvailable is estimated on kernels before 3.14. */
export function parseMeminfo(text: string): MemInfo | undefined {
  const kb = (name: string): number | undefined => {
    const m = new RegExp(`^${name}:\\s+(\\d+) kB$`, 'm').exec(text);
    return m ? Number(m[1]) * 1024 : undefined;
  };
  const memTotal = kb('MemTotal');
  if (memTotal === undefined) return undefined;
  const memAvailable = kb('MemAvailable') ?? (kb('MemFree') ?? 0) + (kb('Cached') ?? 0) + (kb('Buffers') ?? 0);
  return { memTotal, memAvailable, source: 'meminfo' };
}

export function readMeminfo(): MemInfo {
  try {
    const info = parseMeminfo(fs.readFileSync('/proc/meminfo', 'latin1'));
    if (info !== undefined) return info;
  } catch {
    // not Linux
  }
  return { memTotal: os.totalmem(), memAvailable: os.freemem(), source: 'os' };
}

export interface ResolvedBudget {
  bytes: number;
  /** As configured: "512MiB", "50%", "auto". */
  setting: string;
  /** How the bytes were found, for the start-up line and status. */
  derivation: string;
}

/** A memory cgroup limit on fcgi-pm (its own cgroup's or a parent's). */
export interface BoxLimit {
  limit: number;
  /** The cgroup directory that sets it. */
  dir: string;
}

/** memory_budget in bytes, given the host's memory now and the cgroup limit fcgi-pm runs under. */
export function resolveBudget(setting: MemoryBudgetSetting, info: MemInfo, box?: BoxLimit): ResolvedBudget {
  switch (setting.kind) {
    case 'bytes':
      return { bytes: setting.bytes, setting: formatBytes(setting.bytes), derivation: 'configured' };
    case 'percent': {
      const share = (n: number): number => Math.floor((n * setting.percent) / 100);
      const s = `${setting.percent}%`;
      if (box !== undefined && box.limit < info.memTotal) return { bytes: share(box.limit), setting: s, derivation: `${s} of cgroup limit ${formatBytes(box.limit)} (${box.dir})` };
      return { bytes: share(info.memTotal), setting: s, derivation: `${s} of MemTotal (${formatBytes(info.memTotal)})` };
    }
    case 'auto': {
      const pct = `${AUTO_SHARE * 100}%`;
      if (box !== undefined && box.limit < info.memAvailable) {
        return { bytes: Math.floor(box.limit * AUTO_SHARE), setting: 'auto', derivation: `${pct} of cgroup limit ${formatBytes(box.limit)} (${box.dir})` };
      }
      return { bytes: Math.floor(info.memAvailable * AUTO_SHARE), setting: 'auto', derivation: `${pct} of MemAvailable (${formatBytes(info.memAvailable)}) at start` };
    }
  }
}
