/**
 * First-response latency of a worker that is not there yet, for docs/BENCHMARKS.md: fcgi-pm
 * (its defaults and each warm-start candidate) beside php-fpm ondemand and uWSGI in one
 * run. Prints figures, asserts nothing.
 *
 *   npx tsc -p . && node dist/bench/cold-start.js [--tries 20] [--classes 400] [--only php|django]
 *
 * Two cases, --tries times each after one warm-up request:
 *   from zero    every worker has stopped for idleness (the pool, php-fpm's pm ondemand or
 *                uWSGI's --idle cheap mode scaled to nothing); time one request.
 *   others busy  one worker is held busy (a POST whose one byte of body is held back);
 *                time one request, which needs a second worker.
 * Apps: a generated framework-like PHP app (--classes classes of ~4 KB, index.php requires
 * them all) and the Django example (examples/django, page /page/).
 * Every variant is driven through the same in-process client (createPool; php-fpm and
 * uWSGI as external backends, a new connection per request), so no web server is in the
 * path. p99 of 20 tries is the slowest of them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import type { PoolConfig } from '../src/config/types.js';
import type { Logger } from '../src/log/log.js';
import { parseSmapsRollup } from '../src/memory/proc.js';
import { createPool, type Pool } from '../src/pool/index.js';
import { Exchange } from '../src/protocol/exchange.js';
import { CgiParams } from '../src/protocol/params.js';
import { childrenOf } from '../src/worker/children.js';
import { generatePhpApp } from './php-app.js';
import { benchPoolConfig, djangoExample, Sink, SYSTEM_PYTHON } from './pool-client.js';

const arg = (name: string, def: string): string => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1]! : def;
};
const TRIES = Number(arg('--tries', '20'));
const CLASSES = Number(arg('--classes', '400'));
const ONLY = arg('--only', 'all');
const PY = SYSTEM_PYTHON;
const MiB = 1024 * 1024;
const IS_ROOT = process.geteuid?.() === 0;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

// ---- client ---------------------------------------------------------------------------

const CGI = { SERVER_PROTOCOL: 'HTTP/1.1', SERVER_NAME: 'localhost', SERVER_PORT: '80', REMOTE_ADDR: '127.0.0.1', GATEWAY_INTERFACE: 'CGI/1.1' };

function exchange(params: Record<string, string>, sink: Sink): Exchange {
  return new Exchange(CgiParams.fromObject({ ...CGI, ...params }), sink, 'bench', performance.now());
}

/** One GET to its end: ms taken. Throws on a non-200 answer. */
async function timedGet(pool: Pool, params: Record<string, string>): Promise<number> {
  const sink = new Sink();
  const ex = exchange({ REQUEST_METHOD: 'GET', CONTENT_LENGTH: '0', ...params }, sink);
  ex.endBody();
  const t0 = performance.now();
  pool.dispatch(ex);
  await sink.done;
  const ms = performance.now() - t0;
  if (sink.status !== 200) throw new Error(`status ${sink.status}: ${sink.text.slice(0, 300)}`);
  return ms;
}

/**
 * Occupies one worker until release(). PHP: a POST whose one-byte body is held back
 * (php-cgi reads the body before it runs the script). Django reads a body only when the
 * view asks, so there the hold is a large streamed response that is not read (the
 * worker blocks writing it once the socket buffers are full).
 */
function hold(pool: Pool, params: Record<string, string>, how: 'body' | 'response'): { release(): Promise<void> } {
  let paused = true;
  const sink = new Sink();
  sink.body = () => !paused;
  const ex = how === 'body'
    ? exchange({ REQUEST_METHOD: 'POST', CONTENT_LENGTH: '1', CONTENT_TYPE: 'application/x-www-form-urlencoded', ...params }, sink)
    : exchange({ REQUEST_METHOD: 'GET', CONTENT_LENGTH: '0', ...params }, sink);
  if (how === 'response') ex.endBody();
  pool.dispatch(ex);
  return {
    release: async () => {
      paused = false;
      if (how === 'body') {
        ex.pushBody(Buffer.from('x'));
        ex.endBody();
      } else ex.responseDrained();
      await sink.done;
    },
  };
}

async function until(what: string, cond: () => boolean, timeoutMs = 60_000): Promise<void> {
  const end = performance.now() + timeoutMs;
  while (!cond()) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}; our children: ${childrenOf(process.pid).map((p) => `${p} ${cmdline(p)}`).join('; ')}`);
    await sleep(20);
  }
}

function logger(): Logger {
  return pino({ level: 'warn' }, { write: (s: string) => void process.stderr.write(s) }) as unknown as Logger;
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'latin1').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}

function pss(pid: number): number {
  try {
    return parseSmapsRollup(readFileSync(`/proc/${pid}/smaps_rollup`, 'latin1'))?.pss ?? NaN;
  } catch {
    return NaN;
  }
}
const mib = (bytes: number): string => (bytes / MiB).toFixed(1);
const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
}

// ---- what is measured ----------------------------------------------------------------

/** One server variant: how to reach it and how to tell that it has scaled to zero. */
interface Variant {
  label: string;
  pool: Pool;
  /** No worker is left (the variant's own idle stop). Undefined: it never scales to zero. */
  atZero?: () => boolean;
  /** What stays when there are no workers (a master, a preload parent), PSS bytes. */
  heldPss: () => number;
  /** PSS of the workers now. */
  workerPss: () => number;
  /** The held request has a worker running it. */
  holding: () => boolean;
  /** fcgi-pm: mean spawn-to-ready of its workers so far (status spawnLatency), ms. */
  spawnMs?: () => number;
  stop(): Promise<void>;
}

interface Row {
  app: string;
  label: string;
  zero: number[];
  busy: number[];
  /** Requests to a worker already up, the reference the two cases are judged against. */
  warm: number[];
  held: number;
  worker: number;
  spawnMs: number;
}

interface HoldPage {
  params: Record<string, string>;
  how: 'body' | 'response';
}

async function measure(app: string, v: Variant, page: Record<string, string>, holdPage: HoldPage, cases: { busy: boolean }): Promise<Row> {
  const row: Row = { app, label: v.label, zero: [], busy: [], warm: [], held: NaN, worker: NaN, spawnMs: NaN };
  await timedGet(v.pool, page); // warm-up: compiles, fills caches
  for (let i = 0; i < Math.max(5, TRIES); i++) row.warm.push(await timedGet(v.pool, page));
  await sleep(100);
  row.worker = v.workerPss();
  for (let i = 0; i < TRIES; i++) {
    if (v.atZero !== undefined) await until(`${v.label} to scale to zero`, v.atZero);
    await sleep(50);
    if (i === 0) row.held = v.heldPss();
    row.zero.push(await timedGet(v.pool, page));
  }
  if (cases.busy) {
    for (let i = 0; i < TRIES; i++) {
      if (v.atZero !== undefined) await until(`${v.label} to scale to zero`, v.atZero);
      const h = hold(v.pool, holdPage.params, holdPage.how);
      await until(`${v.label} to run the held request`, v.holding);
      await sleep(50);
      row.busy.push(await timedGet(v.pool, page));
      await h.release();
    }
  }
  row.spawnMs = v.spawnMs?.() ?? NaN;
  await v.stop();
  const f = (xs: number[]): string => (xs.length === 0 ? '–' : `${pct(xs, 50).toFixed(1)} / ${pct(xs, 99).toFixed(1)}`);
  console.log(`${app}\t${v.label}\twarm p50 ${pct(row.warm, 50).toFixed(1)} ms\tfrom zero p50/p99 ${f(row.zero)} ms\tothers busy ${f(row.busy)} ms\theld at zero ${mib(row.held)} MiB\tworker ${mib(row.worker)} MiB`);
  return row;
}

function poolConfig(over: Partial<PoolConfig>): PoolConfig {
  return benchPoolConfig({ idleTimeout: 300, crashLimit: 50, ...over });
}

function fcgiPmVariant(label: string, cfg: PoolConfig, runtimeDir: string, opts: { zero: boolean; parentGone?: boolean } = { zero: true }): Variant {
  const pool = createPool(cfg, { logger: logger(), runtimeDir });
  const pids = (): number[] => pool.snapshot().workers.map((w) => w.pid).filter((p): p is number => p !== undefined);
  const tree = (): number[] => pids().flatMap((p) => [p, ...childrenOf(p)]);
  /** A preload pool's parent: the parent of its workers, or the child of ours that is not one. */
  const others = (): number[] => childrenOf(process.pid).filter((p) => !pids().includes(p) && !cmdline(p).includes('fcgi-pm-watchdog'));
  return {
    label,
    pool,
    atZero: opts.zero ? () => pool.snapshot().workers.length === 0 && (opts.parentGone !== true || others().length === 0) : undefined,
    // Kept warm, what is held is the workers themselves.
    // At zero: the parent and what it keeps beside it (a preload spare, a resident parent's kept child).
    // (Children it ended are zombies until it runs again: no memory, no smaps_rollup.)
    heldPss: () => sum((opts.zero ? others().flatMap((p) => [p, ...childrenOf(p)]) : tree()).map(pss).filter(Number.isFinite)),
    workerPss: () => sum(tree().map(pss)),
    holding: () => pool.snapshot().workers.some((w) => w.state === 'busy' || (w.busySlots ?? 0) > 0),
    spawnMs: () => {
      const l = pool.snapshot().spawnLatency;
      return l === undefined || l.count === 0 ? NaN : l.totalMs / l.count;
    },
    stop: () => pool.stop(2000),
  };
}

/** An external server (php-fpm, uWSGI) reached through an external pool, one connection per request. */
function externalVariant(label: string, sock: string, server: ChildProcess, runtimeDir: string, zero: boolean): Variant {
  const pool = createPool(poolConfig({ name: label, backends: [{ kind: 'unix', path: sock, text: `unix:${sock}` }] as PoolConfig['backends'], keepAlive: false }), { logger: logger(), runtimeDir });
  const kids = (): number[] => childrenOf(server.pid!);
  return {
    label,
    pool,
    atZero: zero ? () => kids().length === 0 : undefined,
    heldPss: () => pss(server.pid!),
    workerPss: () => sum(kids().map(pss)),
    holding: () => kids().length > 0,
    stop: async () => {
      await pool.stop(1000);
      await stopProcess(server, 'SIGQUIT');
    },
  };
}

async function stopProcess(p: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return;
  const gone = new Promise<void>((r) => p.once('exit', () => r()));
  p.kill(signal);
  const t = setTimeout(() => p.kill('SIGKILL'), 5000);
  await gone;
  clearTimeout(t);
}

async function listening(sock: string, p: ChildProcess, what: string): Promise<void> {
  await until(`${what} to listen on ${sock}`, () => {
    if (p.exitCode !== null) throw new Error(`${what} exited ${p.exitCode}`);
    return existsSync(sock);
  }, 20_000);
  await sleep(200);
}

// ---- PHP ------------------------------------------------------------------------------

async function php(rows: Row[]): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'fpm-cold-php-'));
  const run = join(dir, 'run');
  mkdirSync(run, { mode: 0o700 });
  const app = join(dir, 'app');
  generatePhpApp(app, CLASSES);
  const bytes = sum(readdirSync(join(app, 'src')).map((f) => readFileSync(join(app, 'src', f)).length));
  console.log(`PHP app: ${CLASSES + 10} classes, ${(bytes / MiB).toFixed(2)} MiB of source`);
  const page = { SCRIPT_FILENAME: join(app, 'index.php'), SCRIPT_NAME: '/index.php', REQUEST_URI: '/index.php' };
  const holdPage: HoldPage = { params: { SCRIPT_FILENAME: join(app, 'hold.php'), SCRIPT_NAME: '/hold.php', REQUEST_URI: '/hold.php' }, how: 'body' };
  const php = ['/usr/bin/php-cgi'];
  const env = { PHP_FCGI_CHILDREN: '0', PHP_FCGI_MAX_REQUESTS: '0' };
  const preload = ['-d', `opcache.preload=${join(app, 'preload.php')}`, ...(IS_ROOT ? ['-d', 'opcache.preload_user=root'] : [])];
  let n = 0;
  const variant = (label: string, over: Partial<PoolConfig>, opts?: { zero: boolean }): Variant =>
    fcgiPmVariant(label, poolConfig({ name: `php${n++}`, command: php, env, ...over }), run, opts);

  rows.push(await measure('PHP', variant('fcgi-pm, no file cache (before)', { opcacheFileCache: false }), page, holdPage, { busy: true }));
  rows.push(await measure('PHP', variant('fcgi-pm cold zero (default: exec, file cache)', {}), page, holdPage, { busy: true }));
  rows.push(await measure('PHP', variant('fcgi-pm warm zero (resident_parent: one php-cgi group, its parent paused)', { residentParent: true }), page, holdPage, { busy: true }));
  rows.push(await measure('PHP', variant('fcgi-pm, file cache + opcache.preload', { command: [...php, ...preload] }), page, holdPage, { busy: true }));
  rows.push(await measure('PHP', variant('fcgi-pm, opcache.preload alone', { command: [...php, ...preload], opcacheFileCache: false }), page, holdPage, { busy: true }));
  // Kept warm: one worker kept (what "last one out waits" gives while it waits), and a
  // group of 4 whose parent's opcache its children share, kept whole.
  rows.push(await measure('PHP', variant('fcgi-pm, one worker kept warm', { pm: 'dynamic', minSpare: 1, maxSpare: 1, startChildren: 1 }, { zero: false }), page, holdPage, { busy: true }));
  rows.push(await measure('PHP', variant('fcgi-pm, group of 4 kept warm', { pm: 'static', maxChildren: 4, groupSize: 4, env: { PHP_FCGI_MAX_REQUESTS: '0' } }, { zero: false }), page, holdPage, { busy: true }));

  // php-fpm ondemand: its master keeps the opcache (shared memory) while it has no children.
  const sock = join(dir, 'fpm.sock');
  writeFileSync(join(dir, 'fpm.conf'), `[global]
error_log = ${join(dir, 'fpm.log')}
daemonize = no
[www]
listen = ${sock}
pm = ondemand
pm.max_children = 4
pm.process_idle_timeout = 1s
${IS_ROOT ? 'user = root\ngroup = root\n' : ''}`);
  const fpm = spawn('/usr/sbin/php-fpm8.2', ['-y', join(dir, 'fpm.conf'), '-F', ...(IS_ROOT ? ['-R'] : [])], { stdio: 'ignore' });
  await listening(sock, fpm, 'php-fpm');
  rows.push(await measure('PHP', externalVariant('php-fpm ondemand (idle 1 s)', sock, fpm, run, true), page, holdPage, { busy: true }));
  rmSync(dir, { recursive: true, force: true });
}

// ---- Django ---------------------------------------------------------------------------

async function django(rows: Row[]): Promise<void> {
  const { dir, run, app, env, adapter, page } = djangoExample('fpm-cold-dj-');
  const holdPage: HoldPage = { params: { SCRIPT_NAME: '/app', PATH_INFO: '/stream/', QUERY_STRING: 'mb=16', REQUEST_URI: '/app/stream/?mb=16' }, how: 'response' };
  let n = 0;
  const variant = (label: string, preload: boolean, over: Partial<PoolConfig> = {}, args: string[] = []): Variant => {
    const cmd = [PY, adapter, ...(preload ? ['--preload'] : []), ...args, '--fastcgi', 'mysite.wsgi:application'];
    return fcgiPmVariant(label, poolConfig({ name: `dj${n++}`, command: cmd, cwd: app, env, preload, preloadIdleTimeout: 600_000, ...over }), run, { zero: true, parentGone: over.preloadIdleTimeout !== undefined });
  };
  rows.push(await measure('Django', variant('fcgi-pm exec', false), page, holdPage, { busy: true }));
  // The warm fork's parts: no spare (each worker forked when asked for), the default
  // spare, and the spare that also ran a request of the page (`--warm-request`).
  rows.push(await measure('Django', variant('fcgi-pm preload, parent warm, --spares 0', true, {}, ['--spares', '0']), page, holdPage, { busy: true }));
  rows.push(await measure('Django', variant('fcgi-pm preload, parent warm (a spare)', true), page, holdPage, { busy: true }));
  rows.push(await measure('Django', variant('fcgi-pm preload, parent warm, --warm-request /page/', true, {}, ['--warm-request', '/page/']), page, holdPage, { busy: true }));
  // The parent stops 50 ms after the last worker: every try starts it again (exec and import).
  rows.push(await measure('Django', variant('fcgi-pm preload, no parent', true, { preloadIdleTimeout: 50 }), page, holdPage, { busy: false }));

  // uWSGI: --cheap --idle puts it back into cheap mode (no workers) after 1 s idle; the
  // master imported the app (no --lazy-apps) and forks a worker on the next request.
  for (const [label, extra, busy] of [
    ['uWSGI --cheap --idle 1', ['--cheap', '--idle', '1'], false],
    ['uWSGI --cheaper 1 (busyness)', ['--cheaper', '1', '--cheaper-initial', '1', '--cheaper-overload', '1', '--cheaper-step', '1'], true],
  ] as const) {
    const sock = join(dir, `uwsgi${n++}.sock`);
    const uw = spawn('/usr/bin/uwsgi', ['--plugin', 'python3', '--master', '--fastcgi-socket', sock, '--processes', '4', '--chdir', app, '--module', 'mysite.wsgi:application', '--disable-logging', ...extra], { stdio: 'ignore', env });
    await listening(sock, uw, 'uwsgi');
    const v = externalVariant(label, sock, uw, run, busy === false);
    rows.push(await measure('Django', v, page, holdPage, { busy }));
  }
  rmSync(dir, { recursive: true, force: true });
}

// ---- report -----------------------------------------------------------------------------

function table(rows: Row[]): string {
  const f = (xs: number[], p: number): string => (xs.length === 0 ? '–' : pct(xs, p).toFixed(1));
  // "over warm": the case's median less the median of warm requests (the targets' measure).
  const over = (xs: number[], warm: number[]): string => (xs.length === 0 ? '–' : (pct(xs, 50) - pct(warm, 50)).toFixed(1));
  const lines = ['| app | server | warm p50 ms | from zero p50 ms | over warm | p99 | others busy p50 ms | over warm | p99 | spawn→ready mean ms | held at zero (MiB PSS) | worker after warm-up (MiB PSS) |', '|---|---|---|---|---|---|---|---|---|---|---|---|'];
  for (const r of rows) {
    lines.push(`| ${r.app} | ${r.label} | ${f(r.warm, 50)} | ${f(r.zero, 50)} | ${over(r.zero, r.warm)} | ${f(r.zero, 99)} | ${f(r.busy, 50)} | ${over(r.busy, r.warm)} | ${f(r.busy, 99)} | ${Number.isNaN(r.spawnMs) ? '–' : r.spawnMs.toFixed(1)} | ${Number.isNaN(r.held) ? '–' : mib(r.held)} | ${mib(r.worker)} |`);
  }
  return lines.join('\n');
}

console.log(`${new Date().toISOString()} load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}; ${TRIES} tries per case`);
const rows: Row[] = [];
if (ONLY !== 'django') await php(rows);
if (ONLY !== 'php') await django(rows);
console.log('');
console.log(table(rows));
console.log(`load average at the end ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
process.exit(0);
