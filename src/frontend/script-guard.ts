/**
 * Which SCRIPT_FILENAME a pool may be handed: the decision only, from the name and from
 * what the file system said about it (script-gate.ts does the looking and the logging).
 *
 * php-cgi runs any file it is given as PHP, and with cgi.fix_pathinfo it even walks a
 * name such as /uploads/image.jpg/x.php back to the image. PHP-FPM refuses names not
 * ending in security.limit_extensions; we do that, and more, before a worker is asked:
 * the name must be absolute, end in an allowed extension, name an existing regular file
 * (so the walk-back never happens), and resolve (.., symlinks) into every set of roots.
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
const NOT_ABSOLUTE = forbidden('SCRIPT_FILENAME is not an absolute path');
const BAD_EXTENSION = forbidden('extension not in limit_extensions');
const NOT_A_FILE = forbidden('SCRIPT_FILENAME is not a regular file');
const OUTSIDE = forbidden('SCRIPT_FILENAME resolves outside the script roots');

/**
 * True when the last segment of `name` is a name followed by one of `extensions`
 * ("x.php"; a bare ".php" is a dotfile). Case-sensitive, like PHP-FPM.
 */
export function hasAllowedExtension(name: string, extensions: readonly string[]): boolean {
  const base = name.slice(name.lastIndexOf('/') + 1);
  for (const e of extensions) if (base.length > e.length && base.endsWith(e)) return true;
  return false;
}

/** True when `real` is below one of `roots` (real paths, no trailing slash but "/"). */
export function isInside(real: string, roots: readonly string[]): boolean {
  for (const r of roots) {
    const prefix = r.endsWith('/') ? r : r + '/';
    if (real.length > prefix.length && real.startsWith(prefix)) return true;
  }
  return false;
}

/** What the name alone decides, before any disk access (cheap for scanners). */
export function judgeName(filename: string | undefined, rules: ScriptRules): ScriptRefusal | undefined {
  if (filename === undefined || filename === '') return NO_FILENAME;
  if (!filename.startsWith('/')) return NOT_ABSOLUTE;
  if (rules.extensions.length > 0 && !hasAllowedExtension(filename, rules.extensions)) return BAD_EXTENSION;
  return undefined;
}

/**
 * After the look-up: the file must exist, be a regular file and lie in each given set
 * of real roots (the pool's script_roots; an HTTP listener's document_root). A set may
 * be empty when none of its directories exists: then nothing is inside it.
 */
export function judgeFile(file: ResolvedPath, rootSets: ReadonlyArray<readonly string[]>): ScriptRefusal | undefined {
  if (file.kind === 'none' || file.real === undefined) return NOT_FOUND;
  if (file.kind !== 'file') return NOT_A_FILE;
  for (const roots of rootSets) if (!isInside(file.real, roots)) return OUTSIDE;
  return undefined;
}
