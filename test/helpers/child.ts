/**
 * A child process a helper started: output captured, exit awaited, stopped by pid
 * (SIGTERM, then SIGKILL after a grace period), and registered for the exit hook.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { descendantsMatching, isAlive } from './proc.js';
import { trackPid, untrackPid } from './scope.js';

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export class ManagedChild {
  readonly proc: ChildProcess;
  readonly pid: number;
  readonly name: string;
  readonly exited: Promise<ExitInfo>;
  exit: ExitInfo | undefined;
  stderr = '';

  constructor(name: string, command: string, args: string[], opts: SpawnOptions, exitSignal: NodeJS.Signals = 'SIGKILL') {
    this.name = name;
    this.proc = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
    if (this.proc.pid === undefined) throw new Error(`${name}: spawn ${command} failed`);
    this.pid = this.proc.pid;
    trackPid(this.pid, exitSignal);
    this.proc.stderr?.setEncoding('utf8');
    this.proc.stderr?.on('data', (s: string) => {
      if (this.stderr.length < 1_000_000) this.stderr += s;
    });
    this.exited = new Promise((resolve) => {
      this.proc.once('exit', (code, signal) => {
        this.exit = { code, signal };
        untrackPid(this.pid);
        resolve(this.exit);
      });
    });
  }

  get running(): boolean {
    return this.exit === undefined;
  }

  signal(sig: NodeJS.Signals): void {
    if (this.exit) return;
    try {
      process.kill(this.pid, sig);
    } catch {
      // already gone
    }
  }

  /**
   * SIGTERM (or `sig`), then SIGKILL if it is still running after graceMs. Descendants
   * seen before the signal that outlive it (reparented orphans) are SIGKILLed too.
   */
  async stop(graceMs = 5000, sig: NodeJS.Signals = 'SIGTERM'): Promise<ExitInfo> {
    if (this.exit) return this.exit;
    const before = descendantsMatching(this.pid, '');
    this.signal(sig);
    let timer: NodeJS.Timeout | undefined;
    const r = await Promise.race([this.exited, new Promise<undefined>((res) => (timer = setTimeout(() => res(undefined), graceMs)))]);
    clearTimeout(timer);
    if (!r) this.signal('SIGKILL');
    const exit = await this.exited;
    for (const p of before) {
      if (!isAlive(p.pid)) continue;
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
    return exit;
  }
}
