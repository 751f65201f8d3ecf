/**
 * Changing a pool's settings in a config file the way a person would. The `yaml`
 * Document finds where each key's value is written; only those bytes change (a new key
 * goes on a line of its own after the pool's last key, at the same indent; a removed
 * key's line goes), so every comment, quote style and flow list stays as it was. A
 * pool written as a flow mapping ({...}) is re-emitted by the Document API instead,
 * which keeps comments but may respace that mapping. The new text is validated by the
 * same parser and schema as `fcgi-pm check` before anything is written; problems come
 * back as "file:line: key: message".
 */
import { isMap, isPair, isScalar, parseDocument, type Node, type Pair, type YAMLMap } from 'yaml';
import { parseConfigText } from '../config/load.js';
import { ConfigError } from '../errors.js';
import { lineDiff, type DiffLine } from './diff.js';

/** The settings the page offers; anything else is refused (the file is the place for the rest). */
export const EDITABLE_KEYS = [
  'pm', 'max_children', 'start_children', 'min_spare', 'max_spare', 'idle_timeout', 'max_requests',
  'max_memory', 'max_memory_hard', 'memory_limit', 'queue_limit', 'queue_timeout',
] as const;

/** Key → new value; null or "" removes the key (back to its default). */
export type PoolSettings = Record<string, string | number | null>;

export interface EditResult {
  text: string;
  diff: DiffLine[];
  /** Empty when the new text passes `fcgi-pm check`'s schema. */
  problems: string[];
}

/** A number when the text is one (max_children: "8" → 8), so YAML writes it bare. */
function typed(v: string | number): string | number {
  if (typeof v === 'number') return v;
  const s = v.trim();
  return /^-?\d+$/.test(s) ? Number(s) : s;
}

/** As YAML would read it back: plain when safe ("10s", "64MiB", "dynamic"), else quoted. */
function scalarText(v: string | number): string {
  if (typeof v === 'number') return String(v);
  return /^[A-Za-z0-9][A-Za-z0-9._%-]*$/.test(v) && !/^(true|false|yes|no|on|off|null|~)$/i.test(v) ? v : JSON.stringify(v);
}

interface Splice {
  at: number;
  end: number;
  text: string;
}

function lineStart(text: string, i: number): number {
  return text.lastIndexOf('\n', i - 1) + 1;
}

function lineEnd(text: string, i: number): number {
  const n = text.indexOf('\n', i);
  return n < 0 ? text.length : n;
}

/** Byte splices for a block mapping; undefined when the map is a flow one. */
function blockSplices(text: string, map: YAMLMap, settings: PoolSettings): Splice[] | undefined {
  if (map.flow === true) return undefined;
  const pairs = map.items.filter((p): p is Pair<Node, Node> => isPair(p) && isScalar(p.key));
  const first = pairs[0]?.key.range;
  if (first == null) return undefined;
  const indent = ' '.repeat(first[0] - lineStart(text, first[0]));
  const splices: Splice[] = [];
  const added: string[] = [];
  for (const [k, raw] of Object.entries(settings)) {
    const pair = pairs.find((p) => String((p.key as { value: unknown }).value) === k);
    const remove = raw === null || raw === '';
    if (pair === undefined) {
      if (!remove) added.push(`${indent}${k}: ${scalarText(typed(raw))}`);
      continue;
    }
    const vr = pair.value?.range ?? undefined;
    const kr = pair.key.range!;
    if (remove) {
      const from = lineStart(text, kr[0]);
      const to = lineEnd(text, vr?.[1] ?? kr[1]);
      splices.push({ at: from, end: Math.min(text.length, to + 1), text: '' });
    } else if (vr === undefined || !isScalar(pair.value)) return undefined;
    else splices.push({ at: vr[0], end: vr[1], text: scalarText(typed(raw)) });
  }
  if (added.length > 0) {
    const last = pairs[pairs.length - 1]!;
    const end = lineEnd(text, last.value?.range?.[1] ?? last.key.range![1]);
    splices.push({ at: end, end, text: '\n' + added.join('\n') });
  }
  return splices;
}

/** A config file's pool: `pools.NAME`. */
export const configPoolPath = (pool: string): string[] => ['pools', pool];
/** A vhosts site file's pool settings: `pool` (made when the file has none). */
export const SITE_POOL_PATH: readonly string[] = ['pool'];

export function editPoolText(text: string, label: string, source: string, pool: string, settings: PoolSettings): EditResult {
  return editSettingsText(text, label, configPoolPath(pool), settings, (next) => {
    try {
      parseConfigText(next, label, source);
      return [];
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      return err.problems;
    }
  });
}

/**
 * The settings of the mapping at `path` changed in `text` (only those bytes), then the
 * new text judged by `validate` (the checks the daemon makes when it loads that file).
 */
export function editSettingsText(text: string, label: string, path: readonly string[], settings: PoolSettings, validate: (next: string) => string[]): EditResult {
  const where = path.join('.');
  const bad = Object.keys(settings).filter((k) => !(EDITABLE_KEYS as readonly string[]).includes(k));
  if (bad.length > 0) return { text, diff: [], problems: bad.map((k) => `${label}: ${where}.${k}: not editable from the dashboard (editable: ${EDITABLE_KEYS.join(', ')})`) };
  const doc = parseDocument(text, { merge: true, uniqueKeys: true });
  const map = doc.getIn(path, true);
  const create = map === undefined && path === SITE_POOL_PATH;
  if (!isMap(map) && !create) return { text, diff: [], problems: [`${label}: ${where}: no such pool in this file`] };
  let next: string;
  const splices = isMap(map) ? blockSplices(text, map, settings) : undefined;
  if (splices !== undefined) {
    next = text;
    for (const s of splices.sort((a, b) => b.at - a.at)) next = next.slice(0, s.at) + s.text + next.slice(s.end);
  } else {
    for (const [k, v] of Object.entries(settings)) {
      if (v === null || v === '') doc.deleteIn([...path, k]);
      else doc.setIn([...path, k], typed(v));
    }
    next = doc.toString();
  }
  return { text: next, diff: lineDiff(text, next), problems: validate(next) };
}

/** The editable settings written at `path` (as text, the way the file says them); {} when none are. */
export function settingsAt(text: string, path: readonly string[]): Record<string, string> {
  const map = parseDocument(text, { merge: true }).getIn(path, true);
  const out: Record<string, string> = {};
  if (!isMap(map)) return out;
  for (const p of map.items) {
    if (!isPair(p) || !isScalar(p.key) || !isScalar(p.value)) continue;
    const k = String(p.key.value);
    if ((EDITABLE_KEYS as readonly string[]).includes(k)) out[k] = String(p.value.value);
  }
  return out;
}
