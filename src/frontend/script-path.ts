/**
 * From a URL path to SCRIPT_NAME and PATH_INFO, the way lighttpd does it: the longest
 * prefix of the path that is a regular file under the document root is the script, the
 * rest is PATH_INFO; a directory gets the index script appended; when nothing matches,
 * the whole path is the script and the backend answers 404.
 *
 * Paths here are latin1 strings (one char per byte), like every CGI variable, so bytes
 * of any encoding survive the trip to the backend and to the file system unchanged.
 */
import { realpath, stat } from 'node:fs/promises';

export type PathKind = 'file' | 'dir' | 'none' | 'other';

/** A path with `..` and symlinks resolved (latin1); real is undefined when nothing is there. */
export interface ResolvedPath {
  kind: PathKind;
  real: string | undefined;
}

export interface ScriptSplit {
  /** The decoded, normalized path (DOCUMENT_URI). */
  path: string;
  scriptName: string;
  pathInfo: string;
  /** True when scriptName is a regular file that was found. */
  found: boolean;
}

/** Percent-decodes a latin1 path into a latin1 string of the bytes; undefined on a bad escape. */
export function percentDecode(s: string): string | undefined {
  let i = s.indexOf('%');
  if (i < 0) return s;
  let out = s.slice(0, i);
  let last = i;
  while (i >= 0) {
    const hi = hexValue(s.charCodeAt(i + 1));
    const lo = hexValue(s.charCodeAt(i + 2));
    if (hi < 0 || lo < 0) return undefined;
    out += s.slice(last, i) + String.fromCharCode((hi << 4) | lo);
    last = i + 3;
    i = s.indexOf('%', last);
  }
  return out + s.slice(last);
}

function hexValue(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 65 && c <= 70) return c - 55;
  if (c >= 97 && c <= 102) return c - 87;
  return -1;
}

/**
 * Collapses "//", "." and "..". Returns undefined when ".." would climb above the root,
 * which under a document root means a path escaping it.
 */
export function normalizePath(path: string): { segs: string[]; trailingSlash: boolean } | undefined {
  const segs: string[] = [];
  const parts = path.split('/');
  for (const p of parts) {
    if (p === '' || p === '.') continue;
    if (p === '..') {
      if (segs.length === 0) return undefined;
      segs.pop();
      continue;
    }
    segs.push(p);
  }
  const lastPart = parts[parts.length - 1];
  const trailingSlash = segs.length > 0 && (lastPart === '' || lastPart === '.' || lastPart === '..');
  return { segs, trailingSlash };
}

/** fs.stat and realpath results kept for a few seconds so the hot path rarely touches the disk. */
export class StatCache {
  private readonly ttlMs: number;
  private readonly maxEntries: number;
  private readonly kinds = new Map<string, { value: PathKind; until: number }>();
  private readonly resolved = new Map<string, { value: ResolvedPath; until: number }>();
  /** The clock entries expire by (tests give a fake one). */
  readonly now: () => number;

  constructor(ttlMs = 2000, maxEntries = 10_000, now: () => number = Date.now) {
    this.ttlMs = ttlMs;
    this.maxEntries = maxEntries;
    this.now = now;
  }

  peek(path: string, now: number): PathKind | undefined {
    return this.get(this.kinds, path, now);
  }

  async stat(path: string): Promise<PathKind> {
    return this.put(this.kinds, path, await kindOf(Buffer.from(path, 'latin1')));
  }

  peekResolved(path: string, now: number): ResolvedPath | undefined {
    return this.get(this.resolved, path, now);
  }

  /** realpath, then the kind of what it names. */
  async resolve(path: string): Promise<ResolvedPath> {
    let r: ResolvedPath;
    try {
      const real = await realpath(Buffer.from(path, 'latin1'), { encoding: 'buffer' });
      r = { kind: await kindOf(real), real: real.toString('latin1') };
    } catch {
      r = { kind: 'none', real: undefined };
    }
    return this.put(this.resolved, path, r);
  }

  private get<V>(map: Map<string, { value: V; until: number }>, path: string, now: number): V | undefined {
    const e = map.get(path);
    if (e === undefined) return undefined;
    if (e.until < now) {
      map.delete(path);
      return undefined;
    }
    return e.value;
  }

  private put<V>(map: Map<string, { value: V; until: number }>, path: string, value: V): V {
    // Unique URLs (scanners) must not grow this without bound.
    if (map.size >= this.maxEntries) map.clear();
    map.set(path, { value, until: this.now() + this.ttlMs });
    return value;
  }
}

async function kindOf(path: Buffer): Promise<PathKind> {
  try {
    const st = await stat(path);
    return st.isFile() ? 'file' : st.isDirectory() ? 'dir' : 'other';
  } catch {
    return 'none';
  }
}

/** What the walk needs next: an answer, or the kind of one more path. */
type Walk = ScriptSplit | { missing: string };

/**
 * Splits `path` (decoded) under `root` (latin1, no trailing slash). Synchronous when
 * every path it needs is cached; otherwise a promise. `undefined`: the path escapes.
 */
export function splitScript(root: string, path: string, index: string, cache: StatCache): ScriptSplit | Promise<ScriptSplit> | undefined {
  const norm = normalizePath(path);
  if (norm === undefined) return undefined;
  const { segs, trailingSlash } = norm;
  const now = cache.now();
  const w = walk(root, segs, trailingSlash, index, (p) => cache.peek(p, now));
  if (!('missing' in w)) return w;
  return walkAsync(root, segs, trailingSlash, index, cache, w.missing);
}

async function walkAsync(root: string, segs: string[], trailingSlash: boolean, index: string, cache: StatCache, first: string): Promise<ScriptSplit> {
  // Results of this resolution, so an entry expiring meanwhile cannot make it loop.
  const local = new Map<string, PathKind>();
  const now = cache.now();
  let missing = first;
  for (;;) {
    local.set(missing, await cache.stat(missing));
    const w = walk(root, segs, trailingSlash, index, (p) => local.get(p) ?? cache.peek(p, now));
    if (!('missing' in w)) return w;
    missing = w.missing;
  }
}

function walk(root: string, segs: string[], trailingSlash: boolean, index: string, kindOf: (abs: string) => PathKind | undefined): Walk {
  const full = '/' + segs.join('/') + (trailingSlash ? '/' : '');
  for (let i = segs.length; i >= 0; i--) {
    const rel = '/' + segs.slice(0, i).join('/');
    const abs = i === 0 ? root || '/' : root + rel;
    const kind = kindOf(abs);
    if (kind === undefined) return { missing: abs };
    if (kind === 'none') continue;
    if (kind === 'file' && i > 0) {
      const rest = i < segs.length ? '/' + segs.slice(i).join('/') + (trailingSlash ? '/' : '') : '';
      return { path: full, scriptName: rel, pathInfo: rest, found: true };
    }
    if (kind === 'dir' && i === segs.length) {
      const scriptName = (i === 0 ? '/' : rel + '/') + index;
      const k = kindOf(root + scriptName);
      if (k === undefined) return { missing: root + scriptName };
      if (k === 'file') return { path: full, scriptName, pathInfo: '', found: true };
    }
    break; // an existing directory whose next component is missing, or a special file
  }
  return { path: full, scriptName: full, pathInfo: '', found: false };
}
