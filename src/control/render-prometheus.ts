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

/**
 * A sample's labels are text from the start (`pool="www",le="0.5"`): a scrape of 200 pools
 * is some 15,000 samples, and arrays of pairs joined per sample made it slow.
 */
interface Sample {
  suffix: string;
  labels: string;
  value: number;
}

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

function labelText(labels: string): string {
  return labels === '' ? '' : `{${labels}}`;
}

class Writer {
  private out = '';

  constructor(private readonly openMetrics: boolean) {}

  family(metric: string, type: MetricType, help: string, samples: Sample[]): void {
    if (samples.length === 0) return;
    // OpenMetrics names a counter family without its _total suffix; 0.0.4 uses the sample name.
    const name = this.openMetrics && type === 'counter' ? metric.replace(/_total$/, '') : metric;
    this.out += `# HELP ${name} ${escapeHelp(help)}\n# TYPE ${name} ${type}\n`;
    for (const s of samples) this.out += `${metric}${s.suffix}${labelText(s.labels)} ${num(s.value)}\n`;
  }

  text(): string {
    return this.openMetrics ? `${this.out}# EOF\n` : this.out;
  }
}

function scale(f: Field<unknown>): number {
  return f.unit === 'ms' ? 1 / 1000 : 1;
}

function samplesOf<T>(f: Field<T>, items: Array<{ x: T; labels: string }>, now: number): Sample[] {
  const out: Sample[] = [];
  const k = scale(f as Field<unknown>);
  for (const { x, labels } of items) {
    if (f.type === 'histogram') {
      const h = f.histogram?.(x);
      if (h !== undefined) histogramSamples(h, labels, out);
    } else if (f.summary) {
      const s = f.summary(x);
      if (s === undefined) continue;
      out.push({ suffix: '_sum', labels, value: (s.totalMs / 1000) }, { suffix: '_count', labels, value: s.count });
    } else if (f.labelled) {
      for (const [lv, v] of f.labelled.values(x)) out.push({ suffix: '', labels: withLabel(labels, f.labelled.label, lv), value: v });
    } else if (f.value) {
      const v = f.value(x, now);
      if (typeof v === 'number') out.push({ suffix: '', labels, value: v * k });
    }
  }
  return out;
}

/** Cumulative _bucket series (le in seconds, then +Inf), _sum and _count, added to `out`. */
function histogramSamples(h: Histogram, labels: string, out: Sample[]): void {
  let seen = 0;
  for (let i = 0; i < h.counts.length; i++) {
    seen += h.counts[i]!;
    const le = i < h.boundsMs.length ? num(h.boundsMs[i]! / 1000) : '+Inf';
    out.push({ suffix: '_bucket', labels: withLabel(labels, 'le', le), value: seen });
  }
  out.push({ suffix: '_sum', labels, value: h.sumMs / 1000 }, { suffix: '_count', labels, value: seen });
}

export function renderPrometheus(s: StatusSnapshot, opts: { openMetrics?: boolean } = {}): string {
  const w = new Writer(opts.openMetrics === true);
  const now = s.daemon.now;
  for (const m of DAEMON_METRICS) {
    const samples: Sample[] = [];
    for (const x of m.samples(s)) if (x.value !== undefined) samples.push({ suffix: '', labels: labelsOf(x.labels), value: x.value });
    w.family(m.metric, m.type, m.help, samples);
  }
  const pools = s.pools.map((p) => ({ x: p, labels: withLabel('', 'pool', p.name) }));
  for (const f of POOL_FIELDS) if (f.metric) w.family(f.metric, f.type, f.help, samplesOf(f, pools, now));
  const workers = s.pools.flatMap((p) => p.workers.map((x) => ({ x, labels: labelsOf([['pool', p.name], ['pid', String(x.pid)]]) })));
  for (const f of WORKER_FIELDS) if (f.metric) w.family(f.metric, f.type, f.help, samplesOf(f, workers, now));
  return w.text();
}
