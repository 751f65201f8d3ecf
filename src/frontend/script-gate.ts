/**
 * The check every front end makes before a pool with script rules sees a request: asks
 * the file system (through the listener's StatCache, so a hot script costs no I/O),
 * lets script-guard.ts decide, and answers refusals with one rate-limited warning (the
 * HTTP listener's other refusals, dotfiles and bad paths, share that limit).
 */
import { ErrorCodes, ProxyError } from '../errors.js';
import type { Logger } from '../log/log.js';
import type { Exchange } from '../protocol/exchange.js';
import type { ScriptRules } from '../pool/types.js';
import { TokenBucket } from '../util/token-bucket.js';
import { isInside, judgeFile, judgeName, runTarget, type ScriptRefusal } from './script-guard.js';
import { StatCache, type ResolvedPath } from './script-path.js';

export type ScriptVerdict = ScriptRefusal | undefined;

const STATIC_OUTSIDE: ScriptRefusal = { status: 403, code: ErrorCodes.HTTP_FORBIDDEN, reason: 'static file resolves outside document_root' };

/** Config paths are UTF-8 text; CGI variables are latin1 strings of bytes. */
export function latin1Path(p: string): string {
  return Buffer.from(p.length > 1 ? p.replace(/\/+$/, '') : p, 'utf8').toString('latin1');
}

export class ScriptGate {
  readonly cache: StatCache;
  /** The HTTP listener's document_root (latin1), which scripts must resolve into too. */
  readonly documentRoot: string | undefined;
  private readonly latin1Roots = new WeakMap<ScriptRules, string[]>();
  private readonly rootSets = new WeakMap<ScriptRules, RootSets>();
  /** A scanner must not flood the log: a burst of lines, then one a second with a count. */
  private readonly logBucket = new TokenBucket({ ratePerSec: 1, burst: 10 });

  constructor(documentRoot: string | undefined, cache = new StatCache()) {
    this.documentRoot = documentRoot === undefined ? undefined : latin1Path(documentRoot);
    this.cache = cache;
  }

  /** undefined: it may run. Synchronous when the cache knows every path it needs. */
  check(filename: string | undefined, rules: ScriptRules): ScriptVerdict | Promise<ScriptVerdict> {
    const early = judgeName(filename, rules);
    if (early !== undefined) return early;
    const now = Date.now();
    const t = runTarget(filename!, (p) => this.cache.peekResolved(p, now));
    if ('missing' in t) return this.walk(filename!, t.missing).then((found) => this.judge(found, rules, Date.now()));
    return this.judge(t, rules, now);
  }

  /** A static file (HTTP listener, latin1 path under `root`: document_root or a site's) must not be reached through a symlink out of it. */
  checkStatic(file: string, root = this.documentRoot!): ScriptVerdict | Promise<ScriptVerdict> {
    return this.thenAll([file, root], ([f, r]) =>
      f!.kind === 'file' && isInside(f!.real!, realDirs([r!])) ? undefined : STATIC_OUTSIDE,
    );
  }

  /** Answers the exchange with the refusal and logs it (rate-limited). */
  refuse(log: Logger, ex: Exchange, r: ScriptRefusal): void {
    ex.respondError(new ProxyError(r.code, r.status, r.reason));
    this.warn(log, r, ex.params.get('SCRIPT_FILENAME'), ex.params.get('REQUEST_URI'), ex.params.get('REMOTE_ADDR'));
  }

  /** One warning line, unless the burst is used up; the next line counts what was left out. */
  warn(log: Logger, r: ScriptRefusal, script: string | undefined, uri: string | undefined, remote: string | undefined): void {
    const fields = this.logBucket.lineFields();
    if (fields !== undefined) log.warn({ code: r.code, status: r.status, script, uri, remote, ...fields }, `refused: ${r.reason}`);
  }

  /** The fix_pathinfo walk with look-ups, starting at the first path the cache did not know. */
  private async walk(filename: string, first: string): Promise<{ name: string; file: ResolvedPath }> {
    // This walk's own results, so an entry expiring meanwhile cannot make it loop.
    const local = new Map<string, ResolvedPath>();
    const now = Date.now();
    let missing = first;
    for (;;) {
      local.set(missing, await this.cache.resolve(missing));
      const t = runTarget(filename, (p) => local.get(p) ?? this.cache.peekResolved(p, now));
      if (!('missing' in t)) return t;
      missing = t.missing;
    }
  }

  /** Judges the file that would run against the extensions and every set of roots (their real paths), with the cache read at `now` (epoch ms). */
  private judge(t: { name: string; file: ResolvedPath }, rules: ScriptRules, now: number): ScriptVerdict | Promise<ScriptVerdict> {
    const rec = this.rootSetsOf(rules);
    const paths = rec.paths;
    // The roots' sets are made again only when a cache entry they came from changed: a
    // request to a pool with script rules then allocates nothing here.
    let same = true;
    for (let i = 0; i < paths.length; i++) {
      const r = this.cache.peekResolved(paths[i]!, now);
      if (r === undefined) return Promise.all(paths.map((q) => this.cache.resolve(q))).then((all) => judgeFile(t.name, t.file, rules, rootSets(rec, all)));
      if (r !== rec.resolved[i]) same = false;
    }
    if (!same) rootSets(rec, paths.map((q) => this.cache.peekResolved(q, now)!));
    return judgeFile(t.name, t.file, rules, rec.sets);
  }

  /** `decide` over the resolved `paths`: at once when all are cached, else after looking them up. */
  private thenAll(paths: string[], decide: (all: ResolvedPath[]) => ScriptVerdict): ScriptVerdict | Promise<ScriptVerdict> {
    const now = Date.now();
    const known: ResolvedPath[] = [];
    for (const p of paths) {
      const r = this.cache.peekResolved(p, now);
      if (r === undefined) return Promise.all(paths.map((q) => this.cache.resolve(q))).then(decide);
      known.push(r);
    }
    return decide(known);
  }

  /** The paths a pool's rules are judged against (its script_roots, then document_root), with the sets last made from them. */
  private rootSetsOf(rules: ScriptRules): RootSets {
    let rec = this.rootSets.get(rules);
    if (rec === undefined) {
      const roots = this.rootsOf(rules);
      const paths = this.documentRoot === undefined ? roots : [...roots, this.documentRoot];
      rec = { paths, roots: roots.length, resolved: [], sets: [] };
      this.rootSets.set(rules, rec);
    }
    return rec;
  }

  private rootsOf(rules: ScriptRules): string[] {
    let r = this.latin1Roots.get(rules);
    if (r === undefined) {
      r = rules.roots.map(latin1Path);
      this.latin1Roots.set(rules, r);
    }
    return r;
  }
}

/** The sets of real roots a pool's scripts must lie in, and the cache entries they were made from. */
interface RootSets {
  /** The pool's script_roots (the first `roots`), then the listener's document_root if any; latin1. */
  readonly paths: readonly string[];
  readonly roots: number;
  resolved: readonly ResolvedPath[];
  sets: string[][];
}

/** Makes rec's sets from the resolved `all` (one per path) and returns them. */
function rootSets(rec: RootSets, all: readonly ResolvedPath[]): string[][] {
  const n = rec.roots;
  const sets: string[][] = [];
  if (n > 0) sets.push(realDirs(all.slice(0, n)));
  if (rec.paths.length > n) sets.push(realDirs(all.slice(n)));
  rec.resolved = all;
  rec.sets = sets;
  return sets;
}

/** Real paths of the roots that are directories (a missing root contains nothing). */
function realDirs(roots: readonly ResolvedPath[]): string[] {
  const out: string[] = [];
  for (const r of roots) if (r.kind === 'dir' && r.real !== undefined) out.push(r.real);
  return out;
}
