/**
 * Prometheus text exposition (format 0.0.4), or OpenMetrics 1.0 when asked: one family
 * per metric with HELP and TYPE, every pool's series labelled pool="...". Walks the
 * tables in fields.ts; a family with no value (e.g. memory figures when the governor does
 * not run) is left out entirely. Durations are exported in seconds, sizes in bytes.
 */
import { DAEMON_METRICS, POOL_FIELDS, WORKER_FIELDS, type Field, type MetricType } from './fields.js';
import type { Histogram, StatusSnapshot } from './types.js';

export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';
export const OPENMETRICS_CONTENT_TYPE = 'application/openmetrics-text; version=1.0.0; charset=utf-8';

type Labels = Array<[string, string]>;

const NEEDS_ESCAPE = /[\\"\n]/;

function escapeLabel(v: string): string {
  if (!NEEDS_ESCAPE.test(v)) return v;
  return v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

/** `labels` with one more label. */
function withLabel(labels: string, name: string, value: string): string {
  const one = `${name}="${escapeLabel(value)}"`;
  return labels === '' ? one : `${labels},${one}`;
}

function labelsOf(pairs: Labels): string {
  let out = '';
  for (const [k, v] of pairs) out = withLabel(out, k, v);
  return out;
}

function escapeHelp(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

function num(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return Number.isInteger(v) ? String(v) : String(Math.round(v * 1e6) / 1e6);
}

/** `le="…"` of a bucket bound (ms), kept: every pool's histograms have the same few bounds. */
const leTexts = new Map<number, string>();

function leOf(boundMs: number | undefined): string {
  if (boundMs === undefined) return 'le="+Inf"';
  let t = leTexts.get(boundMs);
  if (t === undefined) {
    t = `le="${num(boundMs / 1000)}"`;
    if (leTexts.size < 256) leTexts.set(boundMs, t);
  }
  return t;
}

/** About the last exposition's size: the next buffer starts there instead of growing to it. */
let sizeHint = 64 * 1024;

/**
 * The exposition written into one growing buffer, lines a few kilobytes at a time: a
 * scrape of 200 pools is some 15,000 samples, and a string built of them all (or an
 * object per sample) lived until the end of the scrape, so every young-generation
 * collection copied it again; here a line is garbage as soon as its chunk is written.
 */
class Writer {
  private buf = Buffer.allocUnsafe(sizeHint);
  private pos = 0;
  /** Lines not yet in `buf`. */
  private chunk = '';
  /** Where the open family's header starts in buf, and whether it has a sample yet. */
  private familyPos = 0;
  private samples = 0;
  /** The open family's sample name prefix. */
  private metric = '';
  constructor(private readonly openMetrics: boolean) {}

  private put(text: string): void {
    this.chunk += text;
    if (this.chunk.length >= 16 * 1024) this.flush();
  }

  private flush(): void {
    const text = this.chunk;
    // UTF-8 takes at most 3 bytes per UTF-16 unit.
    if (this.pos + text.length * 3 > this.buf.length) {
      const bigger = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + text.length * 3));
      this.buf.copy(bigger, 0, 0, this.pos);
      this.buf = bigger;
    }
    this.pos += this.buf.write(text, this.pos, 'utf8');
    this.chunk = '';
  }

  /** Opens a family; one with no sample is taken back out when the next opens or the text ends. */
  family(metric: string, type: MetricType, help: string): void {
    this.close();
    this.flush();
    // OpenMetrics names a counter family without its _total suffix; 0.0.4 uses the sample name.
    const name = this.openMetrics && type === 'counter' ? metric.replace(/_total$/, '') : metric;
    this.familyPos = this.pos;
    this.samples = 0;
    this.metric = metric;
    this.put(`# HELP ${name} ${escapeHelp(help)}\n# TYPE ${name} ${type}\n`);
  }

  /** One sample of the open family: `labels` and `extra` as text (`pool="www"`, `le="0.5"`), '' for none. */
  sample(suffix: string, labels: string, extra: string, value: number): void {
    this.samples++;
    const all = labels === '' ? extra : extra === '' ? labels : `${labels},${extra}`;
    this.put(all === '' ? `${this.metric}${suffix} ${num(value)}\n` : `${this.metric}${suffix}{${all}} ${num(value)}\n`);
  }

  /** Takes an empty family's header back out. */
  private close(): void {
    if (this.samples > 0) return;
    this.pos = this.familyPos;
    this.chunk = '';
  }

  bytes(): Buffer {
    this.close();
    if (this.openMetrics) this.chunk += '# EOF\n';
    this.flush();
    sizeHint = Math.max(64 * 1024, Math.min(16 * 1024 * 1024, Math.ceil(this.pos * 1.25)));
    return this.buf.subarray(0, this.pos);
  }
}

function scale(f: Field<unknown>): number {
  return f.unit === 'ms' ? 1 / 1000 : 1;
}

function samplesOf<T>(w: Writer, f: Field<T>, items: Array<{ x: T; labels: string }>, now: number): void {
  const k = scale(f as Field<unknown>);
  for (const { x, labels } of items) {
    if (f.type === 'histogram') {
      const h = f.histogram?.(x);
      if (h !== undefined) histogramSamples(w, h, labels);
    } else if (f.summary) {
      const s = f.summary(x);
      if (s === undefined) continue;
      w.sample('_sum', labels, '', s.totalMs / 1000);
      w.sample('_count', labels, '', s.count);
    } else if (f.labelled) {
      for (const [lv, v] of f.labelled.values(x)) w.sample('', labels, `${f.labelled.label}="${escapeLabel(lv)}"`, v);
    } else if (f.value) {
      const v = f.value(x, now);
      if (typeof v === 'number') w.sample('', labels, '', v * k);
    }
  }
}

/** Cumulative _bucket series (le in seconds, then +Inf), _sum and _count. */
function histogramSamples(w: Writer, h: Histogram, labels: string): void {
  let seen = 0;
  for (let i = 0; i < h.counts.length; i++) {
    seen += h.counts[i]!;
    w.sample('_bucket', labels, leOf(h.boundsMs[i]), seen);
  }
  w.sample('_sum', labels, '', h.sumMs / 1000);
  w.sample('_count', labels, '', seen);
}

/** The exposition as UTF-8 bytes (what a scrape sends). */
export function renderPrometheusBytes(s: StatusSnapshot, opts: { openMetrics?: boolean } = {}): Buffer {
  const w = new Writer(opts.openMetrics === true);
  const now = s.daemon.now;
  for (const m of DAEMON_METRICS) {
    w.family(m.metric, m.type, m.help);
    for (const x of m.samples(s)) if (x.value !== undefined) w.sample('', labelsOf(x.labels), '', x.value);
  }
  const pools = s.pools.map((p) => ({ x: p, labels: withLabel('', 'pool', p.name) }));
  for (const f of POOL_FIELDS) {
    if (f.metric === undefined) continue;
    w.family(f.metric, f.type, f.help);
    samplesOf(w, f, pools, now);
  }
  const workers = s.pools.flatMap((p) => p.workers.map((x) => ({ x, labels: labelsOf([['pool', p.name], ['pid', String(x.pid)]]) })));
  for (const f of WORKER_FIELDS) {
    if (f.metric === undefined) continue;
    w.family(f.metric, f.type, f.help);
    samplesOf(w, f, workers, now);
  }
  return w.bytes();
}

export function renderPrometheus(s: StatusSnapshot, opts: { openMetrics?: boolean } = {}): string {
  return renderPrometheusBytes(s, opts).toString('utf8');
}
