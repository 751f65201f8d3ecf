/**
 * A daemon (or any server) run as a child process for a measurement: started with a
 * command line, ready once its address accepts connections, stopped by pid (SIGTERM,
 * then SIGKILL after a grace period). Its output is kept (the last 64 KiB) to explain a
 * failed start.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import type { SocketAddress } from '../protocol/address.js';
import { processTree } from './proc-info.js';

export interface DaemonChild {
  pid: number;
  readonly running: boolean;
  output(): string;
  stop(graceMs?: number): Promise<void>;
}

const KEEP_OUTPUT = 64 * 1024;

function canConnect(a: SocketAddress): Promise<boolean> {
  return new Promise((resolve) => {
    const s = a.kind === 'tcp' ? connect({ host: a.host === '0.0.0.0' ? '127.0.0.1' : a.host, port: a.port }) : connect({ path: a.path });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls `pred` every 50 ms until it is true; false after timeoutMs or when `alive()` says the process is gone. */
export async function pollUntil(pred: () => boolean | Promise<boolean>, timeoutMs: number, alive: () => boolean = () => true): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await pred()) return true;
    if (!alive() || Date.now() >= deadline) return false;
    await sleep(50);
  }
}

export async function startDaemonChild(argv: string[], ready: SocketAddress, timeoutMs = 15_000, env: NodeJS.ProcessEnv = process.env): Promise<DaemonChild> {
  const proc: ChildProcess = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], env });
  let out = '';
  const keep = (b: Buffer): void => {
    out += b.toString('utf8');
    if (out.length > KEEP_OUTPUT) out = out.slice(-KEEP_OUTPUT);
  };
  proc.stdout!.on('data', keep);
  proc.stderr!.on('data', keep);
  let exited = false;
  const exit = new Promise<void>((resolve) => {
    proc.once('exit', () => {
      exited = true;
      resolve();
    });
    proc.once('error', (err) => {
      keep(Buffer.from(`${err.message}\n`));
      exited = true;
      resolve();
    });
  });
  const child: DaemonChild = {
    pid: proc.pid ?? -1,
    get running() {
      return !exited;
    },
    output: () => out,
    async stop(graceMs = 10_000) {
      if (exited || proc.pid === undefined) return;
      // Its workers, in case it has to be killed before it could stop them itself.
      const tree = processTree(proc.pid).slice(1);
      process.kill(proc.pid, 'SIGTERM');
      let killed = false;
      const t = setTimeout(() => {
        if (exited) return;
        killed = true;
        process.kill(proc.pid!, 'SIGKILL');
      }, graceMs);
      await exit;
      clearTimeout(t);
      if (!killed) return;
      for (const pid of tree) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // exited with the daemon, as it should
        }
      }
    },
  };
  const ok = await pollUntil(() => canConnect(ready), timeoutMs, () => !exited);
  if (!ok) {
    await child.stop(2000);
    throw new Error(`${argv.join(' ')}: not accepting on ${ready.text} after ${timeoutMs} ms${exited ? ' (it exited)' : ''}\n${out.slice(-4000)}`);
  }
  return child;
}
