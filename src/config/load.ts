/**
 * Reads a config file (YAML, or JSON: the YAML parser accepts it) and validates it.
 * The only file I/O in src/config. Keeps each node's line so every problem names
 * "file:line: key.path".
 */
import { readFileSync } from 'node:fs';
import * as nodePath from 'node:path';
import { isAlias, isMap, isPair, isScalar, isSeq, LineCounter, parseDocument, type Document, type Node } from 'yaml';
import { ConfigError } from '../errors.js';
import type { Config } from './types.js';
import { configFromObject, validateConfig, type ConfigValidation, type KeyPath, type Locator } from './schema.js';

/** Reads, parses and validates `file`. Throws ConfigError with every problem found. */
export function loadConfig(file: string): Config {
  return parseConfigText(readConfigText(file), file, nodePath.resolve(file));
}

/**
 * Reads and parses `file` and validates it without throwing on its problems: `check`
 * runs the host checks on what validated and reports everything at once. Throws
 * ConfigError only when the file cannot be read or is not YAML.
 */
export function validateConfigFile(file: string): ConfigValidation {
  const { obj, locate } = parseYamlText(readConfigText(file), file, NEEDS);
  return validateConfig(obj, nodePath.resolve(file), { label: file, locate });
}

const NEEDS = 'at least "listen" and "pools"';

function readConfigText(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const why = e.code === 'ENOENT' ? 'no such file' : e.code === 'EACCES' ? 'permission denied' : e.code === 'EISDIR' ? 'is a directory' : e.message;
    throw new ConfigError([`${file}: cannot read config: ${why}`]);
  }
}

/**
 * Parses and validates config text. `label` names the file in messages (as the user
 * wrote it); `source` is the absolute path kept in Config.source, whose directory
 * relative paths in the file are resolved against.
 */
export function parseConfigText(text: string, label: string, source: string): Config {
  const { obj, locate } = parseYamlText(text, label, NEEDS);
  return configFromObject(obj, source, { label, locate });
}

/** YAML text to a plain object and the line of each key; throws ConfigError ("label:line: ...") on bad YAML. `needs`: what an empty file lacks. */
export function parseYamlText(text: string, label: string, needs: string): { obj: unknown; locate: Locator } {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, merge: true, uniqueKeys: true });
  const lineAt = (offset: number): number => lines.linePos(offset).line;
  const yamlProblems = [...doc.errors, ...doc.warnings].map((e) => `${label}:${lineAt(e.pos[0])}: ${firstLine(e.message)}`);
  if (yamlProblems.length > 0) throw new ConfigError(yamlProblems);
  if (doc.contents === null) throw new ConfigError([`${label}: the file is empty; it needs ${needs}`]);

  let obj: unknown;
  try {
    obj = doc.toJS({ maxAliasCount: 1000 });
  } catch (err) {
    throw new ConfigError([`${label}: ${(err as Error).message}`]);
  }
  return { obj, locate: locatorFor(doc, lineAt) };
}

function firstLine(s: string): string {
  const i = s.indexOf('\n');
  return i < 0 ? s : s.slice(0, i);
}

/** Maps key paths to where they are written, by walking the YAML node tree once. */
function locatorFor(doc: Document, lineAt: (offset: number) => number): Locator {
  const lines = new Map<string, number>();
  const raws = new Map<string, string>();
  const keyOf = (path: KeyPath): string => path.join('\0');

  const visit = (node: Node | null | undefined, path: KeyPath, depth: number): void => {
    if (!node || depth > 64) return;
    if (isAlias(node)) return; // values come from toJS(); the alias's own line is already recorded
    if (isScalar(node)) {
      if (typeof node.source === 'string') raws.set(keyOf(path), node.source);
      return;
    }
    if (isMap(node)) {
      for (const pair of node.items) {
        if (!isPair(pair)) continue;
        const k = pair.key;
        const name = isScalar(k) ? String(k.value) : undefined;
        if (name === undefined) continue;
        const p = [...path, name];
        const at = (k as Node).range?.[0];
        if (at !== undefined && !lines.has(keyOf(p))) lines.set(keyOf(p), lineAt(at));
        visit(pair.value as Node | null, p, depth + 1);
      }
      return;
    }
    if (isSeq(node)) {
      node.items.forEach((item, i) => {
        const p = [...path, i];
        const at = (item as Node | null)?.range?.[0];
        if (at !== undefined) lines.set(keyOf(p), lineAt(at));
        visit(item as Node | null, p, depth + 1);
      });
    }
  };
  const root = doc.contents as Node | null;
  if (root?.range) lines.set(keyOf([]), lineAt(root.range[0]));
  visit(root, [], 0);

  return {
    line: (path) => lines.get(keyOf(path)),
    raw: (path) => raws.get(keyOf(path)),
  };
}
