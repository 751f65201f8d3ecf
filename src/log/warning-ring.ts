/**
 * The daemon's recent warn/error/fatal lines, for the dashboard's warnings panel: a
 * bounded ring fed from every logger's output (pino's streamWrite hook, log.ts). A line
 * repeating the latest one with the same code and message within REPEAT_MS is counted on
 * that entry instead of taking a slot, so a storm of one warning cannot push out the rest.
 */

export interface WarningEntry {
  /** Epoch ms of the first line of this entry. */
  at: number;
  /** Epoch ms of the latest repeat. */
  last: number;
  level: 'warn' | 'error' | 'fatal';
  code: string;
  msg: string;
  pool?: string | undefined;
  count: number;
}

export const WARNING_RING_SIZE = 100;
export const REPEAT_MS = 60_000;
const LEVEL = /^\{"level":(\d+)/;
const NAMES: Record<number, WarningEntry['level']> = { 40: 'warn', 50: 'error', 60: 'fatal' };

export class WarningRing {
  private readonly entries: WarningEntry[] = [];
  /** Bumped on every change, so a reader can tell whether to send anything. */
  version = 0;

  constructor(
    private readonly size = WARNING_RING_SIZE,
    private readonly now: () => number = Date.now,
  ) {}

  /** One JSON log line; anything below warn costs one regex test. */
  line(s: string): void {
    const m = LEVEL.exec(s);
    const level = m === null ? undefined : NAMES[Number(m[1])];
    if (level === undefined) return;
    let o: Record<string, unknown>;
    try {
      o = JSON.parse(s) as Record<string, unknown>;
    } catch {
      return;
    }
    const code = typeof o.code === 'string' ? o.code : '';
    const msg = typeof o.msg === 'string' ? o.msg : '';
    const t = this.now();
    this.version++;
    const same = this.entries.find((e) => e.code === code && e.msg === msg && t - e.last < REPEAT_MS);
    if (same !== undefined) {
      same.count++;
      same.last = t;
      return;
    }
    this.entries.push({ at: t, last: t, level, code, msg, pool: typeof o.pool === 'string' ? o.pool : undefined, count: 1 });
    if (this.entries.length > this.size) this.entries.shift();
  }

  list(): WarningEntry[] {
    return this.entries.map((e) => ({ ...e }));
  }
}

/** The process's ring: every logger createLogger makes writes into it. */
export const recentWarnings = new WarningRing();
