/**
 * Runs the real daemon: `node bin/fcgi-pm run -c FILE` as a child process, with its
 * JSON log lines (pino, stdout) parsed and searchable, ready once every listener in
 * the config accepts connections, and stopped by pid when the scope ends.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { opcacheRoot } from '../../src/config/opcache-path.js';
import { ManagedChild, type ExitInfo } from './child.js';
import { FCGI_PM_BIN, REPO_ROOT } from './paths.js';
import { descendantsMatching } from './proc.js';
import type { Scope } from './scope.js';
import { makeTempDir } from './tmp.js';
import { canConnect, sleep, targetOf, WaitAborted, waitFor } from './wait.js';

/** One parsed stdout line. Non-JSON lines are kept as { raw }. */
export type LogLine = Record<string, unknown> & { level?: number; msg?: string };

export const LogLevel = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 } as const;

interface LogWaiter {
  pred: (l: LogLine) => boolean;
  resolve: (l: LogLine) => void;
}

export class Daemon {
  readonly child: ManagedChild;
  readonly configPath: string;
  readonly config: Record<string, any>;
  readonly logs: LogLine[] = [];
  /** The same lines as written (JSON.parse hides duplicate keys; these do not). */
  readonly rawLogs: string[] = [];
  private partial = '';
  private waiters: LogWaiter[] = [];

  constructor(child: ManagedChild, configPath: string, config: Record<string, any>) {
    this.child = child;
    this.configPath = configPath;
    this.config = config;
    child.proc.stdout!.setEncoding('utf8');
    child.proc.stdout!.on('data', (s: string) => this.onStdout(s));
  }

  get pid(): number {
    return this.child.pid;
  }

  get running(): boolean {
    return this.child.running;
  }

  get stderr(): string {
    return this.child.stderr;
  }

  /** Index to pass as `since` so later waits only look at newer lines. */
  mark(): number {
    return this.logs.length;
  }

  logsSince(since = 0): LogLine[] {
    return this.logs.slice(since);
  }

  /** Lines at warn level or above since `since`. */
  warningsSince(since = 0): LogLine[] {
    return this.logs.slice(since).filter((l) => typeof l.level === 'number' && l.level >= LogLevel.warn);
  }

  findLog(pred: (l: LogLine) => boolean, since = 0): LogLine | undefined {
    for (let i = since; i < this.logs.length; i++) if (pred(this.logs[i]!)) return this.logs[i];
    return undefined;
  }

  /** Resolves with the first line (at index ≥ since) matching pred; rejects after timeout. */
  waitForLog(pred: (l: LogLine) => boolean, opts: { since?: number; timeout?: number; what?: string } = {}): Promise<LogLine> {
    const found = this.findLog(pred, opts.since ?? 0);
    if (found) return Promise.resolve(found);
    const timeout = opts.timeout ?? 5000;
    return new Promise((resolve, reject) => {
      const w: LogWaiter = {
        pred,
        resolve: (l) => {
          clearTimeout(timer);
          resolve(l);
        },
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((x) => x !== w);
        const tail = this.logs.slice(-15).map((l) => JSON.stringify(l)).join('\n  ');
        reject(new Error(`no daemon log line ${opts.what ?? 'matching'} within ${timeout} ms; last lines:\n  ${tail}`));
      }, timeout);
      this.waiters.push(w);
    });
  }

  /** Text dump for assertion messages. */
  dump(since = 0, max = 40, keep: (l: LogLine) => boolean = () => true): string {
    return this.logs.slice(since).filter(keep).slice(-max).map((l) => JSON.stringify(l)).join('\n') + (this.stderr ? `\nstderr: ${this.stderr.slice(-2000)}` : '');
  }

  /** Live processes below the daemon whose command line contains `needle`. */
  descendants(needle: string): number[] {
    return descendantsMatching(this.pid, needle).map((p) => p.pid).sort((a, b) => a - b);
  }

  signal(sig: NodeJS.Signals): void {
    this.child.signal(sig);
  }

  /** SIGTERM, SIGKILL after graceMs; then SIGKILLs any descendant that outlived it. */
  stop(graceMs = 15_000): Promise<ExitInfo> {
    return this.child.stop(graceMs);
  }

  private onStdout(s: string): void {
    const text = this.partial + s;
    const lines = text.split('\n');
    this.partial = lines.pop()!;
    for (const line of lines) {
      if (line.trim() === '') continue;
      this.rawLogs.push(line);
      let entry: LogLine;
      try {
        const v = JSON.parse(line) as unknown;
        entry = v !== null && typeof v === 'object' ? (v as LogLine) : { raw: line };
      } catch {
        entry = { raw: line };
      }
      this.logs.push(entry);
      if (this.waiters.length > 0) {
        const still: LogWaiter[] = [];
        for (const w of this.waiters) {
          let hit = false;
          try {
            hit = w.pred(entry);
          } catch {
            hit = false;
          }
          if (hit) w.resolve(entry);
          else still.push(w);
        }
        this.waiters = still;
      }
    }
  }
}

export interface StartDaemonOptions {
  /** Directory for the config file (default: a fresh temp dir). */
  dir?: string;
  /** Milliseconds to wait for every listener to accept (default 15 s). */
  readyTimeout?: number;
  env?: NodeJS.ProcessEnv;
  /** Skip the readiness wait (e.g. when the config is expected to fail). */
  noWait?: boolean;
  /**
   * Pass --allow-root (default true): tests run as root and most are not about which
   * user workers run as. false: the daemon applies the root refusal like a real one.
   */
  allowRoot?: boolean;
  /** A command the daemon runs under, e.g. ['prlimit', '--nofile=1024:4096']. */
  prefix?: string[];
  /** A cgroup's cgroup.procs: the daemon enters that cgroup before Node starts (test/helpers/cgroup.ts). */
  cgroupProcs?: string;
  /** Another bin/fcgi-pm than the repository's (a copy of the installed files, say). */
  bin?: string;
}

/** Starts `fcgi-pm run -c FILE` with `config` (an object written as YAML, or YAML text). */
export async function startDaemon(
  scope: Scope,
  config: Record<string, unknown> | string,
  opts: StartDaemonOptions = {},
): Promise<Daemon> {
  const dir = opts.dir ?? makeTempDir(scope, 'fpm-d-');
  const text = typeof config === 'string' ? config : stringifyYaml(config);
  const parsed = (typeof config === 'string' ? parseYaml(config) : config) as Record<string, any>;
  const configPath = join(dir, 'fcgi-pm.yaml');
  writeFileSync(configPath, text);
  const argv = [opts.bin ?? FCGI_PM_BIN, 'run', '-c', configPath, ...(opts.allowRoot === false ? [] : ['--allow-root'])];
  // The shell writes its own pid, then becomes node: the daemon's first allocation is already charged to that cgroup.
  const direct: [string, ...string[]] = opts.cgroupProcs === undefined ? [process.execPath, ...argv] : ['/bin/sh', '-c', 'echo $$ > "$0" && exec "$@"', opts.cgroupProcs, process.execPath, ...argv];
  const [cmd, ...args] = [...(opts.prefix ?? []), ...direct] as [string, ...string[]];
  const child = new ManagedChild('fcgi-pm', cmd, args, {
    cwd: REPO_ROOT,
    env: opts.env ?? process.env,
  });
  const d = new Daemon(child, configPath, parsed);
  scope.after(async () => {
    await d.stop();
    // As root, php-cgi pools keep their opcache file cache under /var/cache/fcgi-pm, one
    // directory per config file: this daemon's went with its temp config.
    const cache = parsed.opcache_dir === undefined ? opcacheRoot({ source: configPath }) : undefined;
    if (typeof cache === 'string') rmSync(cache, { recursive: true, force: true });
  });
  if (opts.noWait) return d;

  const listeners: Array<{ address: string }> = Array.isArray(parsed.listen) ? parsed.listen : [];
  const timeout = opts.readyTimeout ?? 15_000;
  try {
    for (const l of listeners) {
      const target = targetOf(String(l.address));
      await waitFor(
        async () => {
          if (!d.running) throw new WaitAborted(`daemon exited ${JSON.stringify(child.exit)}`);
          return canConnect(target);
        },
        { timeout, interval: 30, what: `fcgi-pm listener ${l.address}` },
      );
    }
  } catch (err) {
    await sleep(100);
    const msg = err instanceof Error ? err.message : String(err);
    throw new Error(`fcgi-pm did not become ready: ${msg}\nconfig:\n${text}\nlog:\n${d.dump()}`);
  }
  return d;
}
