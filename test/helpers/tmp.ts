import { mkdtempSync, rmSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Scope } from './scope.js';

/** A fresh 0700 directory removed when the scope ends. Short names: Unix socket paths are limited to 107 bytes. */
export function makeTempDir(scope: Scope, prefix = 'fpm-it-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  chmodSync(dir, 0o700);
  scope.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
