/** Runs bin/fcgi-pm as a real child process, bounded in time. */
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { REPO_ROOT } from '../helpers/paths.js';

export const BIN = fileURLToPath(new URL('../../../bin/fcgi-pm', import.meta.url));

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * A copy under `dir` of what the CLI loads at run time, without native/build: an install
 * where no compiler built the addons. Returns its bin/fcgi-pm.
 */
export function installWithoutAddon(dir: string): string {
  const app = join(dir, 'app');
  mkdirSync(join(app, 'dist'), { recursive: true });
  cpSync(join(REPO_ROOT, 'bin'), join(app, 'bin'), { recursive: true });
  cpSync(join(REPO_ROOT, 'package.json'), join(app, 'package.json'));
  cpSync(join(REPO_ROOT, 'dist', 'src'), join(app, 'dist', 'src'), { recursive: true });
  symlinkSync(join(REPO_ROOT, 'node_modules'), join(app, 'node_modules'));
  return join(app, 'bin', 'fcgi-pm');
}

export function runBin(args: string[], opts: { bin?: string; timeoutMs?: number; cwd?: string } = {}): Promise<RunResult> {
  return new Promise((resolve) => {
    execFile(opts.bin ?? BIN, args, { timeout: opts.timeoutMs ?? 20_000, killSignal: 'SIGKILL', cwd: opts.cwd }, (err, stdout, stderr) => {
      const e = err as (NodeJS.ErrnoException & { code?: unknown; signal?: NodeJS.Signals }) | null;
      resolve({ code: e ? (typeof e.code === 'number' ? e.code : null) : 0, signal: e?.signal ?? null, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}
