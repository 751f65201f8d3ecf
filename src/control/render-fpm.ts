/**
 * The PHP-FPM compatible status page of one pool, in text (default), JSON or HTML, with
 * `full` adding one block per process: the names, order and value conventions of
 * php-fpm's fpm_status.c, so php-fpm exporters and dashboards read it unchanged (start
 * time is a Unix timestamp in JSON and "30/Nov/2025:06:08:00 +0000" in text; request
 * duration is in microseconds). Our own figures follow PHP-FPM's, under names in the same
 * style; parsers that look fields up by name ignore them. Driven by fields.ts.
 */
import { formatTime } from '../log/time-format.js';
import { POOL_FIELDS, WORKER_FIELDS, spacedName, type Field } from './fields.js';
import type { PoolStatus, StatusSnapshot, WorkerStatus } from './types.js';

export type FpmFormat = 'text' | 'json' | 'html';

export interface FpmOptions {
  format: FpmFormat;
  full?: boolean;
}

export const FPM_CONTENT_TYPES: Record<FpmFormat, string> = {
  text: 'text/plain; charset=utf-8',
  json: 'application/json',
  html: 'text/html; charset=utf-8',
};

type Row = [name: string, value: number | string];

/** Name/value rows of one table (pool or process), standard PHP-FPM fields first. */
function rows<T>(fields: ReadonlyArray<Field<T>>, x: T, now: number, json: boolean): Row[] {
  const out: Row[] = [];
  for (const f of fields) {
    if (f.fpm === undefined) continue;
    if (f.summary) {
      const s = f.summary(x);
      if (s === undefined) continue;
      out.push([`${f.fpm} count`, s.count], [`${f.fpm} avg ms`, s.count > 0 ? Math.round((s.totalMs / s.count) * 1000) / 1000 : 0], [`${f.fpm} max ms`, Math.round(s.maxMs * 1000) / 1000]);
      continue;
    }
    if (f.labelled) {
      for (const [lv, v] of f.labelled.values(x)) out.push([`${f.fpm} ${spacedName(lv, f)}`, v]);
      continue;
    }
    let v = f.value?.(x, now);
    if (v === undefined) continue;
    if (f.unit === 'epoch' && typeof v === 'number') v = json ? Math.floor(v) : formatTime(v * 1000);
    // PHP-FPM prints "%.2f" in text and JSON alike.
    else if (f.unit === 'percent' && typeof v === 'number') v = json ? Math.round(v * 100) / 100 : v.toFixed(2);
    out.push([f.fpm, v]);
  }
  return out;
}

function textBlock(rs: Row[]): string {
  let out = '';
  for (const [k, v] of rs) {
    const key = `${k}:`;
    out += `${key.padEnd(21)} ${typeof v === 'number' && !Number.isInteger(v) ? v.toFixed(2) : v}\n`;
  }
  return out;
}

function jsonObject(rs: Row[], lower: boolean): Record<string, number | string> {
  const o: Record<string, number | string> = {};
  for (const [k, v] of rs) o[lower ? k.toLowerCase() : k] = v;
  return o;
}

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** One pool's page. `now` is the snapshot's time (epoch ms). */
export function renderFpmPool(p: PoolStatus, now: number, opts: FpmOptions): string {
  const json = opts.format === 'json';
  const head = rows(POOL_FIELDS, p, now, json);
  const procs = opts.full ? p.workers.map((w: WorkerStatus) => rows(WORKER_FIELDS, w, now, json)) : [];
  switch (opts.format) {
    case 'json': {
      const o: Record<string, unknown> = jsonObject(head, false);
      // PHP-FPM spells the per-process keys in lower case in JSON ("request uri").
      if (opts.full) o.processes = procs.map((r) => jsonObject(r, true));
      return JSON.stringify(o);
    }
    case 'html': {
      let out = `<!DOCTYPE html>\n<html><head><title>fcgi-pm status: ${esc(p.name)}</title></head><body>\n<table>\n`;
      for (const [k, v] of head) out += `<tr><th>${esc(k)}</th><td>${esc(String(v))}</td></tr>\n`;
      out += '</table>\n';
      if (opts.full && procs.length > 0) {
        out += '<table border="1">\n<tr>' + procs[0]!.map(([k]) => `<th>${esc(k)}</th>`).join('') + '</tr>\n';
        for (const r of procs) out += '<tr>' + r.map(([, v]) => `<td>${esc(String(v))}</td>`).join('') + '</tr>\n';
        out += '</table>\n';
      }
      return `${out}</body></html>\n`;
    }
    default: {
      let out = textBlock(head);
      for (const r of procs) out += `\n************************\n${textBlock(r)}`;
      return out;
    }
  }
}

/** Pages for every pool (or the one named): text pages one after another, JSON as an array when several. */
export function renderFpm(s: StatusSnapshot, opts: FpmOptions & { pool?: string | undefined }): string {
  const pools = opts.pool === undefined ? s.pools : s.pools.filter((p) => p.name === opts.pool);
  if (opts.format === 'json') {
    const pages = pools.map((p) => renderFpmPool(p, s.daemon.now, opts));
    return `${pages.length === 1 ? pages[0] : `[${pages.join(',')}]`}\n`;
  }
  return pools.map((p) => renderFpmPool(p, s.daemon.now, opts)).join('\n');
}
