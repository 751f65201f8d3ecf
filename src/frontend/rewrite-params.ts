/**
 * Rewrite rules on a FastCGI or SCGI request (the HTTP listener rewrites the URL before
 * splitting it): the path is SCRIPT_NAME + PATH_INFO as the front end split it, and the
 * new SCRIPT_FILENAME lies under DOCUMENT_ROOT (the site's on a vhosts listener). The
 * front controller asks the listener's stat cache whether SCRIPT_FILENAME is a file.
 */
import type { RewriteRule } from '../config/types.js';
import type { CgiParams } from '../protocol/params.js';
import { frontController, joinQuery, rewriteByRules } from './rewrite.js';
import type { PathKind, StatCache } from './script-path.js';

/** Rewrites `p` in place; a Promise when the front controller had to look the file up. */
export function rewriteParams(p: CgiParams, rules: readonly RewriteRule[], cache: StatCache): void | Promise<void> {
  const root = p.get('DOCUMENT_ROOT') ?? '';
  const path = (p.get('SCRIPT_NAME') ?? '') + (p.get('PATH_INFO') ?? '');
  const r = rewriteByRules(rules, path);
  if (r !== undefined) {
    setScript(p, root, r.path, '');
    p.set('QUERY_STRING', joinQuery(r.query, p.get('QUERY_STRING') ?? ''));
    return;
  }
  const front = frontController(rules);
  if (front === undefined) return;
  const file = p.get('SCRIPT_FILENAME');
  const decide = (kind: PathKind | undefined): void => {
    if (kind !== 'file') setScript(p, root, front, path);
  };
  if (file === undefined) return decide(undefined);
  const known = cache.peek(file, Date.now());
  if (known !== undefined) return decide(known);
  return cache.stat(file).then(decide);
}

function setScript(p: CgiParams, root: string, script: string, info: string): void {
  p.set('SCRIPT_NAME', script);
  p.set('SCRIPT_FILENAME', root + script);
  p.set('PATH_INFO', info);
  if (info === '') p.delete('PATH_TRANSLATED');
  else p.set('PATH_TRANSLATED', root + info);
}
