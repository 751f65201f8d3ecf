/**
 * Tests that run workers (or fcgi-pm itself) as www-data or nobody need what those users
 * read to be reachable by them. A checkout under /root (mode 0700), as CI's may be, is
 * not: these helpers return the path itself when every directory above it is
 * world-searchable, else a world-readable copy in a temp dir removed after the test.
 */
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative } from 'node:path';
import { FCGI_PM_BIN, REPO_ROOT } from './paths.js';
import type { Scope } from './scope.js';

/** True when others may enter every directory from / down to `path`, and read it. */
export function othersCanReach(path: string): boolean {
  for (let d = path; ; d = dirname(d)) {
    const st = statSync(d);
    const need = st.isDirectory() ? 0o005 : 0o004;
    if ((st.mode & need) !== need) return false;
    if (dirname(d) === d) return true;
  }
}

function openUp(p: string): void {
  const isDir = statSync(p).isDirectory();
  chmodSync(p, isDir ? 0o755 : (statSync(p).mode & 0o111) !== 0 ? 0o755 : 0o644);
  if (isDir) for (const e of readdirSync(p)) openUp(join(p, e));
}

function worldReadableTemp(scope: Scope): string {
  const dir = mkdtempSync(join(tmpdir(), 'fpm-www-'));
  chmodSync(dir, 0o755);
  scope.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** `dir` itself, or a world-readable copy of it (same basename). */
export function worldReadableDir(scope: Scope, dir: string): string {
  if (othersCanReach(dir)) return dir;
  const copy = join(worldReadableTemp(scope), basename(dir));
  cpSync(dir, copy, { recursive: true });
  openUp(copy);
  return copy;
}

/** node_modules/<name> of packages package-lock.json marks dev-only: the CLI does not load them. */
function devOnlyPackages(): Set<string> {
  const lock = JSON.parse(readFileSync(join(REPO_ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
  return new Set(Object.entries(lock.packages).filter(([p, v]) => p !== '' && v.dev === true).map(([p]) => p));
}

/**
 * The fcgi-pm CLI (bin/fcgi-pm) another user can run: this checkout's, or a copy of
 * what it loads at run time (bin, dist/src, package.json, runtime node_modules).
 */
export function worldReadableBin(scope: Scope): string {
  if (othersCanReach(REPO_ROOT)) return FCGI_PM_BIN;
  const root = worldReadableTemp(scope);
  const dev = devOnlyPackages();
  for (const part of ['bin', 'fcgi_pm_wsgi', 'package.json', join('dist', 'src'), 'node_modules']) {
    cpSync(join(REPO_ROOT, part), join(root, part), { recursive: true, filter: (src) => !dev.has(relative(REPO_ROOT, src)) });
  }
  openUp(root);
  return join(root, relative(REPO_ROOT, FCGI_PM_BIN));
}

/**
 * bin/fcgi-pm-wsgi that another user can run: this checkout's, or a world-readable copy of
 * it beside its package (fcgi_pm_wsgi/), which it finds from its own real path.
 */
export function worldReadableAdapter(scope: Scope): string {
  const adapter = join(REPO_ROOT, 'bin', 'fcgi-pm-wsgi');
  if (othersCanReach(adapter) && othersCanReach(join(REPO_ROOT, 'fcgi_pm_wsgi'))) return adapter;
  const root = worldReadableTemp(scope);
  mkdirSync(join(root, 'bin'));
  cpSync(adapter, join(root, 'bin', 'fcgi-pm-wsgi'));
  cpSync(join(REPO_ROOT, 'fcgi_pm_wsgi'), join(root, 'fcgi_pm_wsgi'), { recursive: true, filter: (src) => basename(src) !== '__pycache__' });
  openUp(root);
  return join(root, 'bin', 'fcgi-pm-wsgi');
}
