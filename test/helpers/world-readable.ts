/**
 * Tests that run workers (or fcgi-pm itself) as www-data or nobody need what those users
 * read to be reachable by them. A checkout under /root (mode 0700), as CI's may be, is
 * not: these helpers return the path itself when every directory above it is
 * world-searchable, else a world-readable copy in a temp dir removed after the test.
 */
import { chmodSync, cpSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
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

/** Dev-only packages the CLI does not load at run time: left out of a copied checkout. */
const DEV_ONLY = new Set(['typescript', '@types', 'fast-check']);

/**
 * The fcgi-pm CLI (bin/fcgi-pm) another user can run: this checkout's, or a copy of
 * what it loads at run time (bin, dist/src, package.json, runtime node_modules).
 */
export function worldReadableBin(scope: Scope): string {
  if (othersCanReach(REPO_ROOT)) return FCGI_PM_BIN;
  const root = worldReadableTemp(scope);
  for (const part of ['bin', 'package.json', join('dist', 'src'), 'node_modules']) {
    cpSync(join(REPO_ROOT, part), join(root, part), {
      recursive: true,
      filter: (src) => !DEV_ONLY.has(relative(join(REPO_ROOT, 'node_modules'), src).split('/')[0]!),
    });
  }
  openUp(root);
  return join(root, relative(REPO_ROOT, FCGI_PM_BIN));
}
