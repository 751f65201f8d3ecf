/**
 * `fcgi-pm workers`: one line per worker with pool, pid, state, requests served, memory,
 * CPU, the CPU weight of the pool's cgroup, uptime and the request it runs now with its age. Columns are data (COLUMNS), the
 * widths follow the content. A php-cgi group (group_size > 1) is its parent's line, its
 * state and requests counted over the group's seats ("busy 2/4"), then one line per
 * child: pid, its memory, and "child of PID" (php-cgi hands requests to its children
 * itself, so which child runs which request is not known outside).
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
  { title: 'STATE', cell: (_p, w) => stateText(w) },
  { title: 'REQS', right: true, cell: (_p, w) => (w.sampled === true ? `≥${w.requests}` : String(w.requests)) },
  { title: 'MEMORY', right: true, cell: (_p, w) => (w.memory === undefined ? '-' : formatSize(w.memory)) },
  { title: 'CPU', right: true, cell: (_p, w) => (w.cpu === undefined ? '-' : `${w.cpu.toFixed(1)}%`) },
  // The pool's CPU cgroup weight (cpu_weight): its share of a busy CPU; "-" outside a CPU cgroup.
  { title: 'WEIGHT', right: true, cell: (p) => (p.cpu === undefined ? '-' : String(p.cpu.weight)) },
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

function stateText(w: WorkerStatus): string {
  const seats = w.slots !== undefined && w.slots > 1 ? ` ${w.busySlots ?? 0}/${w.slots}` : '';
  return (w.retiring ? `${w.state}(${w.retiring})` : w.state) + seats;
}

type Child = NonNullable<WorkerStatus['children']>[number];

/** A group child's line: the columns a child has a figure for, "-" for the rest. */
function childRow(p: PoolStatus, w: WorkerStatus, c: Child): string[] {
  const cells: Record<string, string> = {
    POOL: p.name,
    PID: `└ ${c.pid}`,
    STATE: `child of ${w.pid}`,
    MEMORY: c.memory === undefined ? '-' : formatSize(c.memory),
  };
  return WORKER_COLUMNS.map((col) => cells[col.title] ?? '-');
}

/** A pool's resident parent: preload's, the process its workers are forked from, or resident_parent's paused php-cgi. */
function parentRow(p: PoolStatus, pre: NonNullable<PoolStatus['preload']>): string[] {
  const cells: Record<string, string> = {
    POOL: p.name,
    PID: String(pre.pid),
    STATE: pre.kind === 'php-cgi' ? 'php-cgi parent (paused)' : `preload parent${pre.ready ? '' : ' (starting)'}`,
    REQS: pre.kind === 'php-cgi' ? `${pre.forks} wakes` : `${pre.forks} forks`,
    MEMORY: pre.memory === undefined ? '-' : formatSize(pre.memory),
  };
  return WORKER_COLUMNS.map((col) => cells[col.title] ?? '-');
}

export function renderWorkers(s: StatusSnapshot, opts: { pool?: string | undefined } = {}): string {
  const rows: string[][] = [WORKER_COLUMNS.map((c) => c.title)];
  for (const p of s.pools) {
    if (opts.pool !== undefined && p.name !== opts.pool) continue;
    if (p.preload !== undefined) rows.push(parentRow(p, p.preload));
    for (const w of p.workers) {
      rows.push(WORKER_COLUMNS.map((c) => c.cell(p, w, s.daemon.now)));
      for (const c of w.children ?? []) rows.push(childRow(p, w, c));
    }
  }
  if (rows.length === 1) return 'no workers\n';
  const widths = WORKER_COLUMNS.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows
    .map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : WORKER_COLUMNS[i]!.right ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!))).join('  '))
    .join('\n') + '\n';
}
