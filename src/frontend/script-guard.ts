/**
 * Which SCRIPT_FILENAME a pool may be handed: the decision only, from the name and from
 * what the file system said about it (script-gate.ts does the looking and the logging).
 *
 * php-cgi runs any file it is given as PHP. With cgi.fix_pathinfo (the default) a
 * SCRIPT_FILENAME that names nothing is walked back to its longest prefix that is a
 * regular file: /uploads/image.jpg/x.php runs the image, and lighttpd's
 * broken-scriptfilename (/page.php/) or nginx without fastcgi_split_path_info
 * (/index.php/foo) rely on that walk. PHP-FPM checks the file the walk found against
 * security.limit_extensions; so do we, before a worker is asked: we make the same walk,
 * and the file found must be a regular file ending in an allowed extension and resolve
 * (.., symlinks) into every set of roots.
 *
 * Paths are latin1 strings of bytes, like every CGI variable.
 */
import { ErrorCodes, type ErrorCode } from '../errors.js';
import type { ScriptRules } from '../pool/types.js';
import type { ResolvedPath } from './script-path.js';

export interface ScriptRefusal {
  /** 404 when there is no such file (what php answers too), 403 when it may not run. */
  status: number;
  code: ErrorCode;
  /** For the log line; never sent to the client. */
  reason: string;
}

function forbidden(reason: string): ScriptRefusal {
  return { status: 403, code: ErrorCodes.SCRIPT_FORBIDDEN, reason };
}

const NO_FILENAME: ScriptRefusal = { status: 404, code: ErrorCodes.SCRIPT_NOT_FOUND, reason: 'no SCRIPT_FILENAME' };
const NOT_FOUND: ScriptRefusal = { status: 404, code: ErrorCodes.SCRIPT_NOT_FOUND, reason: 'SCRIPT_FILENAME names no file' };
const NOTHING: ResolvedPath = { kind: 'none', real: undefined };
const NOT_ABSOLUTE = forbidden('SCRIPT_FILENAME is not an absolute path');
const BAD_EXTENSION = forbidden('extension not in limit_extensions: not a script this pool runs (a static file or a directory is for the web server to serve; docs/vhosts.md)');
const NOT_A_FILE = forbidden('SCRIPT_FILENAME is not a regular file');
const OUTSIDE = forbidden('SCRIPT_FILENAME resolves outside the script roots');

/**
 * True when the last segment of `name` is a name followed by one of `extensions`
 * ("x.php"; a bare ".php" is a dotfile). Case-sensitive, like PHP-FPM.
 */
export function hasAllowedExtension(name: string, extensions: readonly string[]): boolean {
  return segmentAllowed(name, name.lastIndexOf('/') + 1, name.length, extensions);
}

/** name[start, end) ends in one of `extensions` and is more than it; no slice (this runs per request). */
function segmentAllowed(name: string, start: number, end: number, extensions: readonly string[]): boolean {
  for (const e of extensions) if (end - start > e.length && name.endsWith(e, end)) return true;
  return false;
}

/** True when `real` is below one of `roots` (real paths, no trailing slash but "/"). */
export function isInside(real: string, roots: readonly string[]): boolean {
  for (const r of roots) {
    // real starts with r + '/' (r itself when it ends in one), without building that string.
    const n = r.endsWith('/') ? r.length : r.length + 1;
    if (real.length > n && real.startsWith(r) && (n === r.length || real.charCodeAt(r.length) === 47)) return true;
  }
  return false;
}

/** True when some segment of `name` has an allowed extension: else no prefix php could run is allowed. */
function someSegmentAllowed(name: string, extensions: readonly string[]): boolean {
  let end = name.length;
  while (end > 0) {
    const start = name.lastIndexOf('/', end - 1);
    if (segmentAllowed(name, start + 1, end, extensions)) return true;
    end = start;
  }
  return false;
}

/** What the name alone decides, before any disk access (cheap for scanners). */
export function judgeName(filename: string | undefined, rules: ScriptRules): ScriptRefusal | undefined {
  if (filename === undefined || filename === '') return NO_FILENAME;
  if (!filename.startsWith('/')) return NOT_ABSOLUTE;
  if (rules.extensions.length > 0 && !someSegmentAllowed(filename, rules.extensions)) return BAD_EXTENSION;
  return undefined;
}

/** The file php-cgi would run, or the next path whose look-up is needed to know it. */
export type RunTarget = { name: string; file: ResolvedPath } | { missing: string };

/**
 * php's cgi.fix_pathinfo walk: SCRIPT_FILENAME itself when something is there; else its
 * longest prefix that is a regular file. An existing directory ends the walk (no shorter
 * prefix can be a file). `lookup` answers from a cache: undefined means not known yet.
 */
export function runTarget(filename: string, lookup: (path: string) => ResolvedPath | undefined): RunTarget {
  let name = filename;
  for (;;) {
    const file = lookup(name);
    if (file === undefined) return { missing: name };
    if (name === filename ? file.kind !== 'none' : file.kind === 'file') return { name, file };
    const cut = name.lastIndexOf('/');
    if (file.kind !== 'none' || cut <= 0) return { name: filename, file: NOTHING };
    name = name.slice(0, cut);
  }
}

/**
 * After the look-up of the file that would run (`name`, as php would name it): it must
 * exist, be a regular file, end in an allowed extension and lie in each given set of
 * real roots (the pool's script_roots; an HTTP listener's document_root). A set may be
 * empty when none of its directories exists: then nothing is inside it.
 */
export function judgeFile(name: string, file: ResolvedPath, rules: ScriptRules, rootSets: ReadonlyArray<readonly string[]>): ScriptRefusal | undefined {
  if (file.kind === 'none' || file.real === undefined) return NOT_FOUND;
  if (file.kind !== 'file') return NOT_A_FILE;
  if (rules.extensions.length > 0 && !hasAllowedExtension(name, rules.extensions)) return BAD_EXTENSION;
  for (const roots of rootSets) if (!isInside(file.real, roots)) return OUTSIDE;
  return undefined;
}
