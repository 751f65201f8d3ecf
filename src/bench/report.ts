/**
 * The bench report: one object (what --json prints, schema "fcgi-pm-bench/1") and its
 * text rendering in the spirit of ab and httperf. Times in the report are milliseconds.
 */
import { ERROR_KINDS, type ErrorCounts } from './error-kinds.js';
import type { Histogram, HistogramSummary } from './histogram.js';
import type { BenchOptions, BenchRun } from './runner.js';

export const REPORT_SCHEMA = 'fcgi-pm-bench/1';

/** Latencies in the report are histogram summaries, in milliseconds. */
export type LatencySummary = HistogramSummary;

export interface BenchReport {
  schema: typeof REPORT_SCHEMA;
  target: string;
  protocol: 'fastcgi' | 'scgi' | 'http';
  method: string;
  keep_alive: boolean;
  /** "closed": -c connections in a loop; "open": --rate. */
  mode: 'closed' | 'open';
  concurrency: number;
  rate: number | null;
  requests_asked: number | null;
  duration_asked_ms: number | null;
  started_at: string;
  elapsed_ms: number;
  requests: { issued: number; replies: number; errors: number; unfinished: number };
  /** Replies per second (any status). */
  rps: number;
  status: { '1xx': number; '2xx': number; '3xx': number; '4xx': number; '5xx': number; codes: Record<string, number> };
  errors: ErrorCounts;
  connections: { opened: number; per_s: number };
  latency_ms: { connect: LatencySummary; first_byte: LatencySummary; reply: LatencySummary };
  bytes: { sent: number; received: number; body: number; body_per_reply: number };
  /** Open loop: the most a request started after its scheduled time (the generator's own lag). */
  schedule_lag_max_ms: number | null;
  /** Whole seconds of the run in which no reply came. */
  stalled_s: number;
  /** What makes the figures suspect: every reply non-2xx, throughput stalled. */
  warnings: string[];
}

/** Whole seconds (the last, partial one left out) without a reply. */
export function stalledSeconds(bySecond: readonly number[], elapsedMs: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < Math.floor(elapsedMs / 1000); i++) if ((bySecond[i] ?? 0) === 0) out.push(i);
  return out;
}

function warningsFor(opts: BenchOptions, run: BenchRun, stalled: number[]): string[] {
  const s = run.stats;
  const out: string[] = [];
  if (s.replies > 0 && s.statusClasses[2] === 0) {
    const codes = [...s.statusCodes].sort((a, b) => b[1] - a[1]).map(([c, n]) => `${c}×${n}`).join(', ');
    out.push(`every reply was non-2xx (${codes}): the figures measure an error page${opts.target.protocol === 'http' ? '' : ' (PHP needs SCRIPT_FILENAME: --param DOCUMENT_ROOT=... or --param SCRIPT_FILENAME=...)'}`);
  }
  if (stalled.length > 0) {
    const first = stalled[0]!;
    const more = opts.request.keepAlive && opts.target.protocol === 'fastcgi' ? '; against php-fpm with -k, connections beyond its workers wait for ever: use -c ≤ its workers, or no -k' : '';
    out.push(`throughput stalled: ${stalled.length} s at 0 req/s (the first from ${first} s to ${first + 1} s into the run)${more}`);
  }
  return out;
}

const round3 = (x: number): number => Math.round(x * 1000) / 1000;

function ms(h: HistogramSummary): LatencySummary {
  // Histograms hold microseconds.
  return {
    count: h.count,
    min: round3(h.min / 1000),
    avg: round3(h.avg / 1000),
    p50: round3(h.p50 / 1000),
    p90: round3(h.p90 / 1000),
    p99: round3(h.p99 / 1000),
    max: round3(h.max / 1000),
  };
}

const summary = (h: Histogram): LatencySummary => ms(h.summary());

export function buildReport(opts: BenchOptions, run: BenchRun): BenchReport {
  const s = run.stats;
  const secs = run.elapsedMs / 1000;
  const codes: Record<string, number> = {};
  for (const [code, n] of [...s.statusCodes].sort((a, b) => a[0] - b[0])) codes[String(code)] = n;
  const errors = s.errorCount;
  const stalled = stalledSeconds(s.repliesBySecond, run.elapsedMs);
  return {
    schema: REPORT_SCHEMA,
    target: opts.target.url,
    protocol: opts.target.protocol,
    method: opts.request.method,
    keep_alive: opts.target.protocol !== 'scgi' && opts.request.keepAlive,
    mode: opts.rate === undefined ? 'closed' : 'open',
    concurrency: opts.concurrency,
    rate: opts.rate ?? null,
    requests_asked: opts.requests ?? null,
    duration_asked_ms: opts.durationMs ?? null,
    started_at: run.startedAt.toISOString(),
    elapsed_ms: round3(run.elapsedMs),
    requests: { issued: s.issued, replies: s.replies, errors, unfinished: run.unfinished },
    rps: secs > 0 ? Math.round((s.replies / secs) * 10) / 10 : 0,
    status: {
      '1xx': s.statusClasses[1]!,
      '2xx': s.statusClasses[2]!,
      '3xx': s.statusClasses[3]!,
      '4xx': s.statusClasses[4]!,
      '5xx': s.statusClasses[5]!,
      codes,
    },
    errors: { ...s.errors },
    connections: { opened: s.connections, per_s: secs > 0 ? Math.round((s.connections / secs) * 10) / 10 : 0 },
    latency_ms: { connect: summary(s.connect), first_byte: summary(s.firstByte), reply: summary(s.reply) },
    bytes: { sent: s.bytesOut, received: s.bytesIn, body: s.bodyBytes, body_per_reply: s.replies > 0 ? Math.round(s.bodyBytes / s.replies) : 0 },
    schedule_lag_max_ms: opts.rate === undefined ? null : round3(run.scheduleLagMaxMs),
    stalled_s: stalled.length,
    warnings: warningsFor(opts, run, stalled),
  };
}

function fmtBytes(n: number): string {
  if (n < 10_000) return `${n} B`;
  if (n < 10_000_000) return `${(n / 1000).toFixed(1)} kB`;
  if (n < 10_000_000_000) return `${(n / 1e6).toFixed(1)} MB`;
  return `${(n / 1e9).toFixed(1)} GB`;
}

const PROTOCOL_NAMES = { fastcgi: 'FastCGI', scgi: 'SCGI', http: 'HTTP/1.1' } as const;

function pad(s: string, n: number): string {
  return s.length >= n ? s : ' '.repeat(n - s.length) + s;
}

function fmtMs(x: number): string {
  return x >= 1000 ? x.toFixed(0) : x >= 100 ? x.toFixed(1) : x.toFixed(3);
}

export function renderReport(r: BenchReport): string {
  const lines: string[] = [];
  const how = r.mode === 'open' ? `open loop at ${r.rate} req/s, at most ${r.concurrency} in flight` : `closed loop, ${r.concurrency} connection${r.concurrency === 1 ? '' : 's'}`;
  lines.push(`Target:       ${r.target}  (${PROTOCOL_NAMES[r.protocol]} ${r.method}, ${r.keep_alive ? 'keep-alive' : 'new connection per request'}, ${how})`);
  lines.push(`Requests:     ${r.requests.issued} issued, ${r.requests.replies} replies, ${r.requests.errors} errors${r.requests.unfinished > 0 ? `, ${r.requests.unfinished} unfinished` : ''} in ${(r.elapsed_ms / 1000).toFixed(3)} s`);
  lines.push(`Reply rate:   ${r.rps.toFixed(1)} req/s    Connections: ${r.connections.opened} opened (${r.connections.per_s.toFixed(1)}/s)`);
  const codes = Object.entries(r.status.codes).map(([c, n]) => `${c}:${n}`).join(' ');
  lines.push(`Status:       1xx ${r.status['1xx']}  2xx ${r.status['2xx']}  3xx ${r.status['3xx']}  4xx ${r.status['4xx']}  5xx ${r.status['5xx']}${codes ? `   (${codes})` : ''}`);
  const errs = ERROR_KINDS.filter((k) => r.errors[k] > 0).map((k) => `${k} ${r.errors[k]}`);
  lines.push(`Errors:       ${errs.length === 0 ? 'none' : errs.join('  ')}`);
  lines.push(`Time [ms]     ${['min', 'avg', 'p50', 'p90', 'p99', 'max'].map((h) => pad(h, 9)).join('')}`);
  const row = (name: string, l: LatencySummary): void => {
    if (l.count === 0) {
      lines.push(`  ${name.padEnd(12)}${pad('-', 9)}`);
      return;
    }
    lines.push(`  ${name.padEnd(12)}${[l.min, l.avg, l.p50, l.p90, l.p99, l.max].map((x) => pad(fmtMs(x), 9)).join('')}`);
  };
  row('connect', r.latency_ms.connect);
  row('first byte', r.latency_ms.first_byte);
  row('reply', r.latency_ms.reply);
  lines.push(`Bytes:        sent ${fmtBytes(r.bytes.sent)}, received ${fmtBytes(r.bytes.received)}, reply bodies ${fmtBytes(r.bytes.body)} (${r.bytes.body_per_reply} B each)`);
  if (r.schedule_lag_max_ms !== null) lines.push(`Schedule lag: ${r.schedule_lag_max_ms.toFixed(3)} ms at most (how late the bench itself started a request)`);
  for (const w of r.warnings) lines.push(`Warning:      ${w}`);
  return `${lines.join('\n')}\n`;
}
