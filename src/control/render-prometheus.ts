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

interface Sample {
  suffix: string;
  labels: Labels;
  value: number;
}

function escapeLabel(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
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

function labelText(labels: Labels): string {
  if (labels.length === 0) return '';
  return `{${labels.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(',')}}`;
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

function samplesOf<T>(f: Field<T>, items: Array<{ x: T; labels: Labels }>, now: number): Sample[] {
  const out: Sample[] = [];
  const k = scale(f as Field<unknown>);
  for (const { x, labels } of items) {
    if (f.type === 'histogram') {
      const h = f.histogram?.(x);
      if (h !== undefined) out.push(...histogramSamples(h, labels));
    } else if (f.summary) {
      const s = f.summary(x);
      if (s === undefined) continue;
      out.push({ suffix: '_sum', labels, value: (s.totalMs / 1000) }, { suffix: '_count', labels, value: s.count });
    } else if (f.labelled) {
      for (const [lv, v] of f.labelled.values(x)) out.push({ suffix: '', labels: [...labels, [f.labelled.label, lv]], value: v });
    } else if (f.value) {
      const v = f.value(x, now);
      if (typeof v === 'number') out.push({ suffix: '', labels, value: v * k });
    }
  }
  return out;
}

/** Cumulative _bucket series (le in seconds, then +Inf), _sum and _count. */
function histogramSamples(h: Histogram, labels: Labels): Sample[] {
  const out: Sample[] = [];
  let seen = 0;
  for (let i = 0; i < h.counts.length; i++) {
    seen += h.counts[i]!;
    const le = i < h.boundsMs.length ? num(h.boundsMs[i]! / 1000) : '+Inf';
    out.push({ suffix: '_bucket', labels: [...labels, ['le', le]], value: seen });
  }
  out.push({ suffix: '_sum', labels, value: h.sumMs / 1000 }, { suffix: '_count', labels, value: seen });
  return out;
}

export function renderPrometheus(s: StatusSnapshot, opts: { openMetrics?: boolean } = {}): string {
  const w = new Writer(opts.openMetrics === true);
  const now = s.daemon.now;
  for (const m of DAEMON_METRICS) {
    const samples: Sample[] = [];
    for (const x of m.samples(s)) if (x.value !== undefined) samples.push({ suffix: '', labels: x.labels, value: x.value });
    w.family(m.metric, m.type, m.help, samples);
  }
  const pools = s.pools.map((p) => ({ x: p, labels: [['pool', p.name]] as Labels }));
  for (const f of POOL_FIELDS) if (f.metric) w.family(f.metric, f.type, f.help, samplesOf(f, pools, now));
  const workers = s.pools.flatMap((p) => p.workers.map((x) => ({ x, labels: [['pool', p.name], ['pid', String(x.pid)]] as Labels })));
  for (const f of WORKER_FIELDS) if (f.metric) w.family(f.metric, f.type, f.help, samplesOf(f, workers, now));
  return w.text();
}
