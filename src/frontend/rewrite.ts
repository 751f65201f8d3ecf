/**
 * Rewrite rules, the common cases of nginx try_files and mod_rewrite (docs/vhosts.md):
 *   { match: "^/post/(\d+)$", to: "/post.php?id=$1" }: the first matching rule gives the
 *     path (then split and checked as any other) and a query put before the request's own;
 *   { front_controller: "/index.php" }: a path that names no existing file runs that
 *     script, with the path as PATH_INFO and the query kept.
 * Pure; patterns are compiled once (there are as many as the config and sites have).
 */
import type { RewriteRule } from '../config/types.js';

const compiled = new Map<string, RegExp>();

function regexOf(source: string): RegExp {
  let re = compiled.get(source);
  if (re === undefined) {
    re = new RegExp(source);
    compiled.set(source, re);
  }
  return re;
}

export interface Rewritten {
  path: string;
  /** The rule's query, to go before the request's own ('' when the rule has none). */
  query: string;
}

/** The first regex rule matching `path`, applied; undefined when none does. */
export function rewriteByRules(rules: readonly RewriteRule[], path: string): Rewritten | undefined {
  for (const r of rules) {
    if (!('match' in r)) continue;
    const m = regexOf(r.match).exec(path);
    if (m === null) continue;
    const target = r.to.replace(/\$(\d)/g, (_, d: string) => m[Number(d)] ?? '');
    const q = target.indexOf('?');
    return q < 0 ? { path: target, query: '' } : { path: target.slice(0, q), query: target.slice(q + 1) };
  }
  return undefined;
}

/** The front controller script of the rules, if one is set (the first). */
export function frontController(rules: readonly RewriteRule[]): string | undefined {
  for (const r of rules) if ('frontController' in r) return r.frontController;
  return undefined;
}

/** The rule's query first, then the request's. */
export function joinQuery(rule: string, request: string): string {
  return rule === '' ? request : request === '' ? rule : `${rule}&${request}`;
}
