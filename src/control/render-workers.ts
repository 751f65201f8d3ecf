/**
 * `fcgi-pm workers`: one line per worker with pool, pid, state, requests served, memory,
 * CPU, uptime and the request it runs now with its age. Columns are data (COLUMNS), the
 * widths follow the content.
 */
import { formatSize } from '../config/units.js';
import type { PoolStatus, StatusSnapshot, WorkerStatus } from './types.js';

interface Column {
  title: string;
  right?: boolean;
  cell(p: PoolStatus, w: WorkerStatus, now: number): string;
}

function age(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  return `${Math.floor(s / 86400)}d${String(Math.floor((s % 86400) / 3600)).padStart(2, '0')}h`;
}

export const WORKER_COLUMNS: readonly Column[] = [
  { title: 'POOL', cell: (p) => p.name },
  { title: 'PID', right: true, cell: (_p, w) => String(w.pid) },
  { title: 'STATE', cell: (_p, w) => (w.retiring ? `${w.state}(${w.retiring})` : w.state) },
  { title: 'REQS', right: true, cell: (_p, w) => (w.sampled === true ? `≥${w.requests}` : String(w.requests)) },
  { title: 'MEMORY', right: true, cell: (_p, w) => (w.memory === undefined ? '-' : formatSize(w.memory)) },
  { title: 'CPU', right: true, cell: (_p, w) => (w.cpu === undefined ? '-' : `${w.cpu.toFixed(1)}%`) },
  { title: 'UPTIME', right: true, cell: (_p, w, now) => age(now - w.startedAt) },
  {
    title: 'REQUEST',
    cell: (_p, w) => {
      const r = w.request;
      if (r === undefined) return '-';
      return `${r.method ? r.method + ' ' : ''}${r.uri || r.script || '?'} (${age(r.durationMs)})`;
    },
  },
];

export function renderWorkers(s: StatusSnapshot, opts: { pool?: string | undefined } = {}): string {
  const rows: string[][] = [WORKER_COLUMNS.map((c) => c.title)];
  for (const p of s.pools) {
    if (opts.pool !== undefined && p.name !== opts.pool) continue;
    for (const w of p.workers) rows.push(WORKER_COLUMNS.map((c) => c.cell(p, w, s.daemon.now)));
  }
  if (rows.length === 1) return 'no workers\n';
  const widths = WORKER_COLUMNS.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows
    .map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : WORKER_COLUMNS[i]!.right ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!))).join('  '))
    .join('\n') + '\n';
}
