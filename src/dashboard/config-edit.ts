/**
 * Changing a pool's settings in a config file the way a person would: the `yaml`
 * Document API edits the one key in place, so comments, order and layout stay. The new
 * text is validated by the same parser and schema as `fcgi-pm check` before anything is
 * written; problems come back as "file:line: key: message".
 */
import { isMap, parseDocument } from 'yaml';
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

export function editPoolText(text: string, label: string, source: string, pool: string, settings: PoolSettings): EditResult {
  const doc = parseDocument(text, { merge: true, uniqueKeys: true });
  const bad = Object.keys(settings).filter((k) => !(EDITABLE_KEYS as readonly string[]).includes(k));
  if (bad.length > 0) return { text, diff: [], problems: bad.map((k) => `${label}: pools.${pool}.${k}: not editable from the dashboard (editable: ${EDITABLE_KEYS.join(', ')})`) };
  if (!isMap(doc.getIn(['pools', pool]))) return { text, diff: [], problems: [`${label}: pools.${pool}: no such pool in this file`] };
  for (const [k, v] of Object.entries(settings)) {
    if (v === null || v === '') doc.deleteIn(['pools', pool, k]);
    else doc.setIn(['pools', pool, k], typed(v));
  }
  const next = doc.toString();
  let problems: string[] = [];
  try {
    parseConfigText(next, label, source);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    problems = err.problems;
  }
  return { text: next, diff: lineDiff(text, next), problems };
}
