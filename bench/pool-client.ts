/**
 * The in-process client the process benches drive pools with (bench/process-model.ts,
 * bench/cold-start.ts): a sink that keeps the status and the start of the body, and a
 * complete PoolConfig from a few settings, so every variant pays the same client cost;
 * and the Django example made ready to run in a temp dir.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PoolConfig } from '../src/config/types.js';
import type { ProxyError } from '../src/errors.js';
import type { ResponseSink } from '../src/protocol/exchange.js';

export class Sink implements ResponseSink {
  status = 0;
  /** The first 4 KiB of the body, for messages. */
  text = '';
  readonly done: Promise<void>;
  private resolve!: () => void;
  constructor() {
    this.done = new Promise((r) => (this.resolve = r));
  }
  head(h: { status: number }): void {
    this.status = h.status;
  }
  body(chunk: Buffer): boolean {
    if (this.text.length < 4096) this.text += chunk.toString('latin1');
    return true;
  }
  stderr(): void {}
  end(): void {
    this.resolve();
  }
  fail(err: ProxyError): number {
    this.status = err.status;
    this.resolve();
    return 0;
  }
}

/** The schema's defaults for the keys a bench does not set (ondemand, 4 children, long timeouts). */
export function benchPoolConfig(over: Partial<PoolConfig>): PoolConfig {
  return {
    name: 'bench', backend: 'fastcgi', backends: [], maxConnsPerBackend: 16, backendDownTime: 5000, connectTimeout: 5000, readTimeout: 60_000, keepAlive: true,
    command: undefined, socket: 'fd0', env: {}, inheritEnv: [], cwd: undefined, user: undefined, group: undefined,
    pm: 'ondemand', maxChildren: 4, startChildren: 0, minSpare: 1, maxSpare: 3, maxSpawnRate: 32, spawnTimeout: 30_000, idleTimeout: 600_000,
    maxRequests: 0, maxRequestsJitter: 0, maxLifetime: 0, requestTimeout: 0, slowRequest: 0, killTimeout: 2000, crashLimit: 5, crashWindow: 60_000,
    queueLimit: 1024, queueTimeout: 30_000, ...over,
  } as PoolConfig;
}

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** Debian's python3, which has Django (a python3 first on PATH may not). */
export const SYSTEM_PYTHON = '/usr/bin/python3';

export interface DjangoExample {
  /** Temp dir (removed by the caller): the database, and run/ for worker sockets. */
  dir: string;
  run: string;
  /** examples/django, the workers' cwd. */
  app: string;
  env: Record<string, string>;
  /** bin/fcgi-pm-wsgi */
  adapter: string;
  /** CGI params of GET /app/page/. */
  page: Record<string, string>;
}

/** examples/django with a fresh migrated SQLite database in a temp dir. */
export function djangoExample(prefix: string): DjangoExample {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const run = join(dir, 'run');
  mkdirSync(run, { mode: 0o700 });
  const app = join(REPO_ROOT, 'examples', 'django');
  const env = { PATH: '/usr/bin:/bin', DJANGO_SETTINGS_MODULE: 'mysite.settings', DJANGO_DB_PATH: join(dir, 'db.sqlite3'), PYTHONDONTWRITEBYTECODE: '1', LANG: 'C.UTF-8' };
  execFileSync(SYSTEM_PYTHON, ['-B', 'manage.py', 'migrate', '--noinput', '-v', '0'], { cwd: app, env });
  return { dir, run, app, env, adapter: join(REPO_ROOT, 'bin', 'fcgi-pm-wsgi'), page: { SCRIPT_NAME: '/app', PATH_INFO: '/page/', REQUEST_URI: '/app/page/' } };
}
