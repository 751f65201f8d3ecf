/**
 * Where things are, found from this file's location so the compiled copy under dist/
 * and the source agree: the repo root is the nearest parent holding package.json.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function findRoot(start: string): string {
  let dir = start;
  for (;;) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'tsconfig.json'))) return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error(`no package.json above ${start}`);
    dir = up;
  }
}

export const REPO_ROOT = findRoot(dirname(fileURLToPath(import.meta.url)));
/** The CLI entry the daemon is started through. */
export const FCGI_PM_BIN = join(REPO_ROOT, 'bin', 'fcgi-pm');
/** PHP pages are served from the source tree (they are not compiled). */
export const PHP_FIXTURES = join(REPO_ROOT, 'test', 'fixtures', 'php');
export const PHP_CGI = '/usr/bin/php-cgi';
export const NGINX = '/usr/sbin/nginx';

/**
 * php-cgi flags every test uses: no body size limit (10 MB uploads are read through
 * php://input), no output buffering surprises, errors to stderr not to the page.
 */
export const PHP_FLAGS = [
  '-d', 'post_max_size=0',
  '-d', 'upload_max_filesize=0',
  '-d', 'memory_limit=512M',
  '-d', 'max_execution_time=0',
  '-d', 'display_errors=stderr',
  '-d', 'cgi.fix_pathinfo=1',
];
