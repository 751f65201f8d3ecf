/**
 * Processes the comparison starts: each is registered by pid the moment it exists and
 * stopped by pid (SIGTERM, then SIGKILL) at the end, on Ctrl-C, or when the script
 * dies of an error. Nothing is ever stopped by name.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { connect, createServer } from 'node:net';

const live = new Map<number, { name: string; signal: NodeJS.Signals }>();

export function track(pid: number, name: string, signal: NodeJS.Signals = 'SIGTERM'): void {
  live.set(pid, { name, signal });
}

export function untrack(pid: number): void {
  live.delete(pid);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** SIGTERM (or the process's own stop signal), SIGKILL after graceMs. */
export async function stopPid(pid: number, graceMs = 5000): Promise<void> {
  const entry = live.get(pid);
  try {
    process.kill(pid, entry?.signal ?? 'SIGTERM');
  } catch {
    untrack(pid);
    return;
  }
  const deadline = Date.now() + graceMs;
  while (alive(pid) && Date.now() < deadline) await sleep(20);
  if (alive(pid)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  untrack(pid);
}

export async function stopAll(): Promise<void> {
  await Promise.all([...live.keys()].map((pid) => stopPid(pid, 3000)));
}

// Last resort if the script exits without stopAll (an exception): SIGKILL what is left.
process.on('exit', () => {
  for (const pid of live.keys()) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
});

export interface Started {
  proc: ChildProcess;
  pid: number;
  output(): string;
  exited(): boolean;
  stop(graceMs?: number): Promise<void>;
}

/** Spawns and tracks a process whose output is kept for error messages. */
export function start(name: string, file: string, args: string[], opts: SpawnOptions = {}, signal: NodeJS.Signals = 'SIGTERM'): Started {
  const proc = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
  if (proc.pid === undefined) throw new Error(`${name}: could not start ${file}`);
  const pid = proc.pid;
  track(pid, name, signal);
  let out = '';
  let done = false;
  const keep = (b: Buffer): void => {
    out = (out + b.toString('utf8')).slice(-20_000);
  };
  proc.stdout?.on('data', keep);
  proc.stderr?.on('data', keep);
  proc.once('exit', () => {
    done = true;
    untrack(pid);
  });
  return { proc, pid, output: () => out, exited: () => done, stop: (g) => stopPid(pid, g) };
}

export function canConnect(target: { path: string } | { port: number }): Promise<boolean> {
  return new Promise((resolve) => {
    const s = 'path' in target ? connect(target.path) : connect(target.port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

export async function waitReady(what: string, target: { path: string } | { port: number }, p: Started | undefined, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await canConnect(target))) {
    if (p !== undefined && p.exited()) throw new Error(`${what} exited during start:\n${p.output()}`);
    if (Date.now() > deadline) throw new Error(`${what} not ready after ${timeoutMs} ms\n${p?.output() ?? ''}`);
    await sleep(20);
  }
}

/** A loopback TCP port free at the time of asking. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export { sleep };
