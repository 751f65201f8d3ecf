/**
 * The host memory budget: /proc/meminfo, and memory_budget as written turned into bytes
 * once, at start.
 *
 *   "512MiB"  that many bytes
 *   "50%"     that share of MemTotal
 *   auto      AUTO_SHARE of MemAvailable when fcgi-pm starts: what the host could give
 *             without swapping then, minus headroom for the page cache and for whatever
 *             else starts later. MemAvailable already leaves out what other services use.
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

/** memory_budget in bytes, given the host's memory now. */
export function resolveBudget(setting: MemoryBudgetSetting, info: MemInfo): ResolvedBudget {
  switch (setting.kind) {
    case 'bytes':
      return { bytes: setting.bytes, setting: formatBytes(setting.bytes), derivation: 'configured' };
    case 'percent': {
      const bytes = Math.floor((info.memTotal * setting.percent) / 100);
      return { bytes, setting: `${setting.percent}%`, derivation: `${setting.percent}% of MemTotal (${formatBytes(info.memTotal)})` };
    }
    case 'auto': {
      const bytes = Math.floor(info.memAvailable * AUTO_SHARE);
      return { bytes, setting: 'auto', derivation: `${AUTO_SHARE * 100}% of MemAvailable (${formatBytes(info.memAvailable)}) at start` };
    }
  }
}
