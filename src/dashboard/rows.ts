/**
 * The page's table (pure): one small row per daemon and pool, from a tick's cluster and
 * points, so a page watching 200 active pools gets a few dozen bytes per pool per tick,
 * and only for the rows that changed (SentRows); a pool's full status, workers and chart
 * points come on demand for the rows opened.
 */
import { percentile } from '../control/histogram.js';
import type { PoolStatus } from '../control/types.js';
import type { Cluster } from './merge.js';
import type { PoolPoint } from './points.js';
import { ringKey } from './sampler.js';

export interface PoolRow {
  /** Daemon id. */
  d: string;
  pool: string;
  state: string;
  pm: string;
  busy: number;
  idle: number;
  max: number | undefined;
  queue: number;
  limit: number;
  /** Requests per second over the last tick (else the daemon's 10 s figure). */
  rps: number;
  /** Upper bucket bound of the 99th percentile since the pool started, ms. */
  p99: number | undefined;
  mem: number | undefined;
  /** 4xx and 5xx answers since the pool started, and refusals by fcgi-pm. */
  e4: number;
  e5: number;
  refused: number;
}

export interface DaemonRow {
  id: string;
  up: boolean;
  reason?: string | undefined;
  label: string;
  state?: string | undefined;
  version?: string | undefined;
  sites?: { defined: number; active: number; broken: number; brokenSites: Array<{ id: string; error: string }> } | undefined;
}

function poolRow(d: string, p: PoolStatus, pt: PoolPoint | undefined): PoolRow {
  const o = p.outcomes;
  const mem = p.memory?.total ?? p.workers.reduce((n, w) => n + (w.memory ?? 0), 0);
  return {
    d,
    pool: p.name,
    state: p.state,
    pm: p.pm,
    busy: p.kind === 'external' ? p.active : p.processes.busy + p.processes.draining,
    idle: p.processes.idle,
    max: p.maxChildren,
    queue: p.queue.length,
    limit: p.queue.limit,
    rps: pt?.rps ?? p.rps ?? 0,
    p99: o === undefined ? undefined : percentile(undefined, o.latency, 0.99),
    mem: mem > 0 ? mem : undefined,
    e4: o?.status['4xx'] ?? 0,
    e5: o?.status['5xx'] ?? 0,
    refused: o === undefined ? 0 : Object.values(o.refusals).reduce((a, b) => a + b, 0),
  };
}

/** A row's key: daemon id and pool joined as the page joins them (app.js keyOf). */
export const rowKey = (r: Pick<PoolRow, 'd' | 'pool'>): string => `${r.d}\u241f${r.pool}`;

/** Every field of a row the same (a row is flat: strings, numbers, undefined). */
function sameRow(a: PoolRow, b: PoolRow): boolean {
  for (const k of ROW_FIELDS) if (!Object.is(a[k], b[k])) return false;
  return true;
}
/** Every key of PoolRow: the compiler refuses this record when a field is added to the row and not here. */
const ROW_FIELD_SET: Record<keyof PoolRow, true> = { d: true, pool: true, state: true, pm: true, busy: true, idle: true, max: true, queue: true, limit: true, rps: true, p99: true, mem: true, e4: true, e5: true, refused: true };
const ROW_FIELDS = Object.keys(ROW_FIELD_SET) as Array<keyof PoolRow>;

/**
 * What one page has been sent of the table: the last row sent by daemon and pool. `next`
 * returns the rows that changed since (as JSON) and the keys of rows gone, and remembers
 * the table. Rows are compared field by field: only a changed row is made JSON (at 200
 * pools, every row made JSON at every tick was most of what a tick allocated).
 */
export class SentRows {
  private readonly sent = new Map<string, Map<string, { row: PoolRow; tick: number }>>();
  private tick = 0;

  next(rows: readonly PoolRow[]): { changed: string[]; gone: string[] } {
    const tick = ++this.tick;
    const changed: string[] = [];
    for (const r of rows) {
      let pools = this.sent.get(r.d);
      if (pools === undefined) this.sent.set(r.d, (pools = new Map()));
      const last = pools.get(r.pool);
      if (last === undefined) pools.set(r.pool, { row: r, tick });
      else {
        last.tick = tick;
        if (sameRow(last.row, r)) continue;
        last.row = r;
      }
      changed.push(JSON.stringify(r));
    }
    const gone: string[] = [];
    // forEach, not for-of: no [key, value] array per entry.
    this.sent.forEach((pools, d) => {
      pools.forEach((last, pool) => {
        if (last.tick === tick) return;
        pools.delete(pool);
        gone.push(rowKey({ d, pool }));
      });
      if (pools.size === 0) this.sent.delete(d);
    });
    return { changed, gone };
  }
}

export function tableOf(cluster: Cluster, points: Record<string, PoolPoint>): { daemons: DaemonRow[]; rows: PoolRow[] } {
  const daemons: DaemonRow[] = [];
  const rows: PoolRow[] = [];
  for (const d of cluster.daemons) {
    const s = d.snapshot;
    const sites = s?.sites === undefined ? undefined : { defined: s.sites.defined, active: s.sites.active, broken: s.sites.broken, brokenSites: s.sites.brokenSites };
    daemons.push({ id: d.id, up: d.up, reason: d.reason, label: d.label, state: s?.daemon.state, version: s?.daemon.version, sites });
    for (const p of s?.pools ?? []) rows.push(poolRow(d.id, p, points[ringKey(d.id, p.name)]));
  }
  return { daemons, rows };
}
