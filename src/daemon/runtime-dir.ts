/**
 * The daemon's private directory for worker sockets. php-cgi -b binds its socket with
 * mode 0777, so the directory itself must keep others out: it is always a fresh
 * mkdtemp (mode 0700) made by this process and removed on exit. A configured
 * runtime_dir is only its parent, which may hold listener sockets nginx must reach,
 * so its own mode is left alone.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as nodePath from 'node:path';

export function makeRuntimeDir(parent: string | undefined): string {
  if (parent === undefined) return mkdtempSync(nodePath.join(os.tmpdir(), 'fcgi-pm-'));
  mkdirSync(parent, { recursive: true, mode: 0o755 });
  return mkdtempSync(nodePath.join(parent, `fcgi-pm.${process.pid}.`));
}

/** Synchronous so it can run from a process 'exit' handler too. */
export function removeRuntimeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}
