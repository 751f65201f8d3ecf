/** Runs bin/fcgi-pm as a real child process, bounded in time. */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const BIN = fileURLToPath(new URL('../../../bin/fcgi-pm', import.meta.url));

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export function runBin(args: string[], opts: { bin?: string; timeoutMs?: number; cwd?: string } = {}): Promise<RunResult> {
  return new Promise((resolve) => {
    execFile(opts.bin ?? BIN, args, { timeout: opts.timeoutMs ?? 20_000, killSignal: 'SIGKILL', cwd: opts.cwd }, (err, stdout, stderr) => {
      const e = err as (NodeJS.ErrnoException & { code?: unknown; signal?: NodeJS.Signals }) | null;
      resolve({ code: e ? (typeof e.code === 'number' ? e.code : null) : 0, signal: e?.signal ?? null, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}
