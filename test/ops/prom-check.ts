/**
 * A strict check of the Prometheus text exposition format (0.0.4) and of our naming
 * rules, returning every problem found (an empty list means it passes):
 *  - every line is a HELP, a TYPE or a sample; no other comments, no blank lines;
 *  - names match [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]*, label values
 *    are quoted with only \\ \" \n escapes, values parse as floats (or NaN, ±Inf);
 *  - each family has exactly one HELP and one TYPE, both before its samples, and its
 *    samples are contiguous; a series (name + labels) appears once;
 *  - counters end in _total (OpenMetrics: the family name is the sample name without it),
 *    summaries only have _sum and _count samples, histograms _bucket (with le) too, gauges
 *    none of those suffixes;
 *  - our metrics start with fcgipm_; the text ends with a newline (OpenMetrics: "# EOF").
 */
import { spawnSync } from 'node:child_process';

export interface ParsedSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface PromCheck {
  problems: string[];
  samples: ParsedSample[];
  types: Map<string, string>;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'summary', 'histogram', 'untyped']);

function parseValue(s: string): number | undefined {
  if (s === 'NaN') return NaN;
  if (s === '+Inf') return Infinity;
  if (s === '-Inf') return -Infinity;
  if (!/^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(s)) return undefined;
  return Number(s);
}

/** Parses `{a="x",b="y"}` starting at text[0] === '{'; returns labels and the rest. */
function parseLabels(text: string): { labels: Record<string, string>; rest: string } | string {
  const labels: Record<string, string> = {};
  let i = 1;
  for (;;) {
    if (text[i] === '}') return { labels, rest: text.slice(i + 1) };
    const eq = text.indexOf('=', i);
    if (eq < 0) return 'label without "="';
    const name = text.slice(i, eq);
    if (!LABEL.test(name)) return `bad label name ${JSON.stringify(name)}`;
    if (name in labels) return `label ${name} twice`;
    if (text[eq + 1] !== '"') return `label ${name}: value not quoted`;
    let j = eq + 2;
    let v = '';
    for (;;) {
      const c = text[j];
      if (c === undefined) return `label ${name}: unterminated value`;
      if (c === '\\') {
        const n = text[j + 1];
        if (n === '\\') v += '\\';
        else if (n === '"') v += '"';
        else if (n === 'n') v += '\n';
        else return `label ${name}: bad escape \\${n}`;
        j += 2;
        continue;
      }
      if (c === '"') break;
      if (c === '\n') return `label ${name}: raw newline`;
      v += c;
      j++;
    }
    labels[name] = v;
    i = j + 1;
    if (text[i] === ',') i++;
    else if (text[i] !== '}') return `expected "," or "}" after label ${name}`;
  }
}

export function checkExposition(text: string, opts: { openMetrics?: boolean; prefix?: string } = {}): PromCheck {
  const problems: string[] = [];
  const samples: ParsedSample[] = [];
  const types = new Map<string, string>();
  const helps = new Set<string>();
  const finished = new Set<string>();
  const series = new Set<string>();
  let current: string | undefined;
  const prefix = opts.prefix ?? 'fcgipm_';
  if (!text.endsWith('\n')) problems.push('does not end with a newline');
  let lines = text.split('\n').slice(0, -1);
  if (opts.openMetrics) {
    if (lines[lines.length - 1] !== '# EOF') problems.push('OpenMetrics text must end with "# EOF"');
    else lines = lines.slice(0, -1);
  }
  const familyOf = (sample: string): string | undefined => {
    for (const f of [sample, sample.replace(/_(sum|count|total|bucket)$/, ''), sample.replace(/_(sum|count)$/, '')]) if (types.has(f)) return f;
    return undefined;
  };
  const enter = (family: string, n: number): void => {
    if (current === family) return;
    if (current !== undefined) finished.add(current);
    if (finished.has(family)) problems.push(`line ${n}: family ${family} continues after another family`);
    current = family;
  };
  lines.forEach((line, idx) => {
    const n = idx + 1;
    if (line === '') return void problems.push(`line ${n}: blank line`);
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) (.*)$/.exec(line);
      if (!m) return void problems.push(`line ${n}: comment that is neither HELP nor TYPE: ${line}`);
      const [, kind, name, rest] = m as unknown as [string, string, string, string];
      if (!NAME.test(name)) problems.push(`line ${n}: bad metric name ${name}`);
      enter(name, n);
      if (kind === 'HELP') {
        if (helps.has(name)) problems.push(`line ${n}: second HELP for ${name}`);
        if (/\\[^\\n]/.test(rest.replace(/\\\\/g, ''))) problems.push(`line ${n}: bad escape in HELP`);
        if (rest.trim() === '') problems.push(`line ${n}: empty HELP for ${name}`);
        helps.add(name);
      } else {
        if (types.has(name)) problems.push(`line ${n}: second TYPE for ${name}`);
        if (!TYPES.has(rest)) problems.push(`line ${n}: unknown type ${rest}`);
        if (samples.some((s) => familyOf(s.name) === name)) problems.push(`line ${n}: TYPE after samples of ${name}`);
        types.set(name, rest);
      }
      return;
    }
    const nm = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(.*)$/.exec(line);
    if (!nm) return void problems.push(`line ${n}: not a sample: ${line}`);
    const name = nm[1]!;
    let rest = nm[2]!;
    let labels: Record<string, string> = {};
    if (rest.startsWith('{')) {
      const p = parseLabels(rest);
      if (typeof p === 'string') return void problems.push(`line ${n}: ${p}: ${line}`);
      labels = p.labels;
      rest = p.rest;
    }
    const parts = rest.split(' ');
    if (parts[0] !== '' || parts.length < 2 || parts.length > 3) return void problems.push(`line ${n}: expected one space, a value and an optional timestamp: ${line}`);
    const value = parseValue(parts[1]!);
    if (value === undefined) return void problems.push(`line ${n}: bad value ${parts[1]}`);
    if (parts[2] !== undefined && !/^-?\d+$/.test(parts[2])) problems.push(`line ${n}: bad timestamp ${parts[2]}`);
    const family = familyOf(name);
    if (family === undefined) return void problems.push(`line ${n}: sample ${name} has no TYPE before it`);
    if (!helps.has(family)) problems.push(`line ${n}: sample ${name} has no HELP before it`);
    enter(family, n);
    const type = types.get(family)!;
    if (type === 'counter') {
      if (!name.endsWith('_total')) problems.push(`line ${n}: counter sample ${name} does not end in _total`);
      const expected = opts.openMetrics ? name.replace(/_total$/, '') : name;
      if (family !== expected) problems.push(`line ${n}: counter ${name} belongs to family ${family}, expected ${expected}`);
      if (value < 0) problems.push(`line ${n}: negative counter ${name}`);
    } else if (type === 'summary') {
      if (name !== `${family}_sum` && name !== `${family}_count` && name !== family) problems.push(`line ${n}: summary sample ${name} is not _sum/_count/quantile`);
    } else if (type === 'histogram') {
      if (![`${family}_sum`, `${family}_count`, `${family}_bucket`].includes(name)) problems.push(`line ${n}: histogram sample ${name} is not _bucket/_sum/_count`);
      if (name.endsWith('_bucket') && labels.le === undefined) problems.push(`line ${n}: histogram bucket without le`);
    } else if (type === 'gauge' && name !== family) {
      problems.push(`line ${n}: gauge sample ${name} does not carry the family name ${family}`);
    }
    if (!name.startsWith(prefix)) problems.push(`line ${n}: ${name} does not start with ${prefix}`);
    const key = `${name}{${Object.entries(labels).sort().map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(',')}}`;
    if (series.has(key)) problems.push(`line ${n}: duplicate series ${key}`);
    series.add(key);
    samples.push({ name, labels, value });
  });
  for (const [family] of types) if (!helps.has(family)) problems.push(`family ${family} has TYPE but no HELP`);
  return { problems, samples, types };
}

/** The value of the one sample `name` with these labels (undefined when absent). */
export function sampleValue(c: PromCheck, name: string, labels: Record<string, string> = {}): number | undefined {
  const want = Object.entries(labels);
  return c.samples.find((s) => s.name === name && want.every(([k, v]) => s.labels[k] === v))?.value;
}

/** `promtool check metrics` (Debian's prometheus package) on the text: its complaints, empty when it passes. */
export function promtool(text: string): string {
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 30_000 });
  if (r.error) throw r.error;
  return r.status === 0 ? '' : `${r.stdout}${r.stderr}`.trim() || `promtool exited ${r.status}`;
}
