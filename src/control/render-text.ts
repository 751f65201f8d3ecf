/**
 * `fcgi-pm status` for a human: the daemon, its listeners, then one block per pool with
 * every figure of fields.ts (those with a value), and with `full` the worker table.
 */
import { formatDuration, formatSize } from '../config/units.js';
import { percentile } from './histogram.js';
import { listenerRefusals, POOL_FIELDS, spacedName, type Field } from './fields.js';
import { renderWorkers } from './render-workers.js';
import type { PoolStatus, StatusSnapshot } from './types.js';

/** Fields the pool header line already says. */
const IN_HEADER = new Set(['pool', 'pm', 'startTime', 'startSince', 'state', 'failing']);

function ago(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)}ms` : formatDuration(Math.round(ms / 1000) * 1000);
}

function show(f: Field<PoolStatus>, v: number | string): string {
  if (typeof v !== 'number') return v;
  if (f.unit === 'bytes') return formatSize(v);
  if (f.unit === 'ms') return `${Math.round(v)} ms`;
  if (f.unit === 'ratio') return `${Math.round(v * 100)} %`;
  return String(v);
}

function poolLines(p: PoolStatus, now: number): string[] {
  const head = `pool ${p.name}: ${p.kind}${p.kind !== 'external' ? ` (pm ${p.pm})` : ''}, ${p.state}, up ${ago(now - p.startedAt)}` + (p.generations > 1 ? `, ${p.generations - 1} older generation(s) draining` : '');
  const out = [head];
  const pre = p.preload;
  if (pre !== undefined) {
    const mem = pre.memory === undefined ? 'memory not sampled yet' : `${formatSize(pre.memory)} (${pre.measure ?? 'pss'}), counted in the pool's memory`;
    if (pre.kind === 'php-cgi') out.push(`  php-cgi parent ${pre.pid}: paused at warm zero, woken ${pre.forks} time(s), ${mem}`);
    else out.push(`  preload parent ${pre.pid}: ${pre.ready ? 'ready' : 'starting'}, ${pre.forks} worker(s) forked, ${mem}`);
  }
  const fb = p.directFallback;
  if (fb !== undefined) out.push(`  accept: direct in fallback (${fb.reason}): fcgi-pm listens on ${fb.address} itself and proxies to the workers (docs/direct.md)`);
  if (p.cpu !== undefined) out.push(`  CPU cgroup ${p.cpu.dir}: cpu_weight ${p.cpu.weight} (${p.cpu.file} ${p.cpu.value})`);
  const d = p.direct;
  if (d !== undefined) {
    const queue = d.waiting === undefined ? 'accept queue not known' : `${d.waiting} of ${d.backlog} waiting in the accept queue`;
    out.push(`  direct socket: ${d.address}, ${queue}, ${d.arrivals} connection(s) arrived${d.guard ? ', script guard in the workers' : ''}`);
    out.push('  (workers accept there themselves: their state is sampled from /proc, and the request, queue and error figures below are the overflow listener\'s only; direct requests are not in the access log)');
  }
  for (const f of POOL_FIELDS) {
    if (IN_HEADER.has(f.id)) continue;
    if (f.histogram && !f.summary) {
      const h = f.histogram(p);
      if (h === undefined) continue;
      const n = h.counts.reduce((a, b) => a + b, 0);
      out.push(`  ${f.title}: p50 ≤ ${percentile(undefined, h, 0.5)} ms, p99 ≤ ${percentile(undefined, h, 0.99)} ms over ${n}`);
      continue;
    }
    if (f.summary) {
      const s = f.summary(p);
      if (s === undefined) continue;
      const avg = s.count > 0 ? s.totalMs / s.count : 0;
      out.push(`  ${f.title}: ${s.count === 0 ? 'none yet' : `avg ${avg.toFixed(1)} ms over ${s.count}, max ${Math.round(s.maxMs)} ms`}`);
      continue;
    }
    if (f.labelled) {
      const vals = f.labelled.values(p);
      if (vals.length === 0) continue;
      out.push(`  ${f.title}: ${vals.map(([k, v]) => `${spacedName(k, f)} ${v}`).join(', ')}`);
      continue;
    }
    const v = f.value?.(p, now);
    if (v === undefined) continue;
    out.push(`  ${f.title}: ${show(f, v)}`);
  }
  return out;
}

/** Broken sites named in the header; `status --all-sites` and the dashboard have them all. */
const BROKEN_SHOWN = 10;

/** The daemon, memory, sites and listeners: what both the compact and the long view open with. */
export function headerLines(s: StatusSnapshot): string[] {
  const d = s.daemon;
  const lines: string[] = [];
  const last = d.reloads.last;
  const reloads = d.reloads.ok + d.reloads.failed === 0 ? 'no reloads' : `reloads: ${d.reloads.ok} ok, ${d.reloads.failed} failed` + (last ? ` (last ${last.ok ? 'ok' : 'FAILED'} ${ago(d.now - last.at)} ago)` : '');
  lines.push(`fcgi-pm ${d.version}, pid ${d.pid}, ${d.state}, up ${ago(d.now - d.startedAt)}, ${formatSize(d.rss)} resident`);
  lines.push(`config ${d.config}; ${reloads}`);
  if (s.memory !== undefined) {
    const m = s.memory;
    const how = m.derivation !== undefined && m.derivation !== 'configured' ? ` (${m.derivation})` : '';
    const budget = m.budget === undefined ? 'no memory budget' : `memory budget ${formatSize(m.budget)}${how}`;
    lines.push(`${budget}: used ${formatSize(m.used ?? 0)}, committed ${formatSize(m.committed ?? 0)}${m.available !== undefined ? `, available ${formatSize(m.available)}` : ''} (${m.measure ?? 'rss'})`);
    const c = m.cgroup;
    if (c !== undefined) lines.push(`memory cgroup ${c.dir}: limit ${formatSize(c.limit)}, ${c.used !== undefined ? `${formatSize(c.used)} not reclaimable, ` : ''}headroom ${formatSize(c.headroom)}`);
  }
  if (s.sites !== undefined) {
    const v = s.sites;
    lines.push(`sites: ${v.defined} defined, ${v.active} active (one pool each, below), ${v.broken} broken; from ${v.source}`);
    const all = v.list !== undefined;
    for (const b of all ? v.brokenSites : v.brokenSites.slice(0, BROKEN_SHOWN)) lines.push(`  broken ${b.id}: ${b.error.replace(/\n/g, '; ')}`);
    if (!all && v.brokenSites.length > BROKEN_SHOWN) lines.push(`  … ${v.brokenSites.length - BROKEN_SHOWN} more broken (status --all-sites)`);
    for (const site of v.list ?? []) lines.push(`  ${site.id}${site.active ? ' (active)' : ''}: ${site.names.join(' ')} → ${site.documentRoot}`);
  }
  lines.push('listeners:');
  for (const l of s.listeners) {
    const extra = [l.statusPath ? `status ${l.statusPath}` : '', l.pingPath ? `ping ${l.pingPath}` : '', l.inherited ? 'from systemd' : ''].filter((x) => x !== '').join(', ');
    const refused = l.refused > 0 ? `, ${l.refused} refused (allowed_clients)` : '';
    lines.push(`  ${l.protocol} ${l.address} → ${l.pool || 'vhosts'}, ${l.connections} connection(s), ${l.accepted} accepted${refused}${extra ? ` (${extra})` : ''}`);
    const answered = l.outcomes === undefined ? [] : Object.entries(l.outcomes.status).filter(([, n]) => n > 0);
    const codes = listenerRefusals(l);
    if (answered.length > 0 || codes.length > 0) {
      lines.push(`    answered ${answered.map(([c, n]) => `${c} ${n}`).join(', ') || 'none'}${codes.length > 0 ? `; by fcgi-pm: ${codes.map(([c, n]) => `${c} ${n}`).join(', ')}` : ''}`);
    }
  }
  return lines;
}

/** The long view: the header, then one block per pool with every figure (`pool`: that one only). */
export function renderText(s: StatusSnapshot, opts: { full?: boolean; pool?: string | undefined } = {}): string {
  const d = s.daemon;
  const lines = headerLines(s);
  for (const p of s.pools) {
    if (opts.pool !== undefined && p.name !== opts.pool) continue;
    lines.push('', ...poolLines(p, d.now));
  }
  let out = lines.join('\n') + '\n';
  if (opts.full) out += '\n' + renderWorkers(s, { pool: opts.pool });
  return out;
}
