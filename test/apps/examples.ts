/**
 * Example fcgi-pm configs made runnable in a test: listener addresses swapped for free
 * loopback ports, relative `cwd` made absolute (the test writes the config elsewhere),
 * and per-pool overrides (a short idle_timeout, a database in the temp dir). The
 * examples' `user: www-data` becomes root: the databases live in the tests' private 0700
 * temp dirs (test/integration/run-as-user.test.ts is about users).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { EXAMPLES } from './templates.js';

export const PYTHON = '/usr/bin/python3';
export const DJANGO_DIR = join(EXAMPLES, 'django');
export const PHP_DIR = join(EXAMPLES, 'php');
export const PHP_PUBLIC = join(PHP_DIR, 'public');

export interface ExampleConfigOptions {
  /** Listener address as written in the example → address to use. Each must exist. */
  listen: Record<string, string>;
  /** Keys merged into each named pool; `env` is merged into the pool's env. */
  pools?: Record<string, Record<string, unknown>>;
}

export function exampleConfig(rel: string, opts: ExampleConfigOptions): Record<string, any> {
  const file = join(EXAMPLES, rel);
  const cfg = parseYaml(readFileSync(file, 'utf8')) as Record<string, any>;
  const seen = new Set<string>();
  for (const l of cfg.listen as Array<Record<string, unknown>>) {
    const to = opts.listen[String(l.address)];
    if (to === undefined) throw new Error(`examples/${rel}: no replacement for listener ${String(l.address)}`);
    seen.add(String(l.address));
    l.address = to;
  }
  for (const a of Object.keys(opts.listen)) if (!seen.has(a)) throw new Error(`examples/${rel}: no listener ${a}`);
  for (const [name, pool] of Object.entries(cfg.pools as Record<string, Record<string, any>>)) {
    if (typeof pool.cwd === 'string' && !isAbsolute(pool.cwd)) pool.cwd = resolve(dirname(file), pool.cwd);
    if (pool.user !== undefined) pool.user = 'root';
    const over = opts.pools?.[name];
    if (!over) continue;
    const { env, ...rest } = over as { env?: Record<string, string> };
    Object.assign(pool, rest);
    if (env) pool.env = { ...(pool.env ?? {}), ...env };
  }
  for (const name of Object.keys(opts.pools ?? {})) if (!(name in cfg.pools)) throw new Error(`examples/${rel}: no pool ${name}`);
  return cfg;
}

/** `manage.py migrate` for the Django example against the SQLite file `db`. */
export function migrateDjango(db: string): void {
  execFileSync(PYTHON, ['-B', 'manage.py', 'migrate', '--noinput', '-v', '0'], {
    cwd: DJANGO_DIR,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', DJANGO_DB_PATH: db, PYTHONDONTWRITEBYTECODE: '1', LANG: 'C.UTF-8' },
    timeout: 60_000,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** What the workload page (Django's /db/, PHP's db.php) answers when every statement did its part. */
export const WORKLOAD_COUNTS = {
  inserts: 10,
  updates: 10,
  selects: 10,
  value_sum: 1045,
  select_all_rows: 50,
  like_rows: 50,
  deleted: 10,
} as const;

/** Seconds the concurrency soak runs: FCGIPM_SOAK_SECONDS (default 10; the bench figure is 30). */
export function soakSeconds(): number {
  const v = Number(process.env.FCGIPM_SOAK_SECONDS ?? '10');
  return Number.isFinite(v) && v > 0 ? v : 10;
}
