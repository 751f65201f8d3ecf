/**
 * `fcgi-pm status` by default: the header (render-text.ts), then one line per pool, the
 * busiest first, like `supervisorctl status`: fit for hundreds of active sites. The full
 * figures of one pool are `status --pool NAME` (or `--site NAME`).
 */
import { formatSize } from '../config/units.js';
import { percentile } from './histogram.js';
import { headerLines } from './render-text.js';
import type { PoolStatus, StatusSnapshot } from './types.js';

/** Busiest first: requests per second, then running, then waiting; ties by name. */
export function byActivity(a: PoolStatus, b: PoolStatus): number {
  return (b.rps ?? 0) - (a.rps ?? 0) || b.active - a.active || b.queue.length - a.queue.length || a.name.localeCompare(b.name);
}

const COLUMNS = ['POOL', 'STATE', 'PM', 'BUSY', 'IDLE', 'MAX', 'QUEUE', 'REQ/S', 'P99', 'MEM', '4XX', '5XX'] as const;

function ms(v: number | undefined): string {
  if (v === undefined) return '-';
  return v >= 1000 ? `${v / 1000}s` : `${v}ms`;
}

function row(p: PoolStatus): string[] {
  const o = p.outcomes;
  const mem = p.memory?.total ?? p.workers.reduce((n, w) => n + (w.memory ?? 0), 0);
  const busy = p.kind === 'external' ? p.active : p.processes.busy + p.processes.draining;
  return [
    p.name,
    p.state + (p.generations > 1 ? '+' : ''),
    // A direct pool's requests wait in its socket's accept queue, not in fcgi-pm's.
    p.direct === undefined ? p.pm : `${p.pm} direct`,
    String(busy),
    p.kind === 'external' ? '-' : String(p.processes.idle),
    p.maxChildren === undefined ? '-' : String(p.maxChildren),
    p.direct === undefined ? `${p.queue.length}/${p.queue.limit}` : `${p.direct.waiting ?? '?'}/${p.direct.backlog ?? '?'}`,
    (p.rps ?? 0).toFixed(1),
    // Upper bound of the bucket, since the pool started.
    o === undefined ? '-' : `≤${ms(percentile(undefined, o.latency, 0.99))}`,
    mem > 0 ? formatSize(mem) : '-',
    String(o?.status['4xx'] ?? 0),
    String(o?.status['5xx'] ?? 0),
  ];
}

export function renderCompact(s: StatusSnapshot): string {
  const lines = headerLines(s);
  const rows = [...s.pools].sort(byActivity).map(row);
  const table: string[][] = [[...COLUMNS], ...rows];
  const width = COLUMNS.map((_, i) => Math.max(...table.map((r) => r[i]!.length)));
  // Name and words left, figures right.
  const left = new Set([0, 1, 2]);
  lines.push('');
  for (const r of table) lines.push(r.map((c, i) => (left.has(i) ? c.padEnd(width[i]!) : c.padStart(width[i]!))).join('  ').trimEnd());
  if (rows.length === 0) lines.push('(no pools)');
  // What the table cannot show: a direct pool running without its shared socket.
  for (const p of s.pools) if (p.directFallback !== undefined) lines.push(`${p.name}: accept: direct in fallback (${p.directFallback.reason}): fcgi-pm listens on ${p.directFallback.address} itself and proxies`);
  return lines.join('\n') + '\n';
}
