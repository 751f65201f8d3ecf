/**
 * The process model's figures for docs/BENCHMARKS.md: preload (Django) and php-cgi
 * groups against plain exec'd workers and PHP-FPM. Prints figures, asserts nothing.
 *
 *   npx tsc -p . && node dist/bench/process-model.js [--rounds 5] [--seconds 8] [--requests 50]
 *
 * 1. Django (examples/django, /usr/bin/python3): spawn-to-ready of a new worker, exec vs
 *    preload with the parent warm, and a cold start with no parent; PSS of one worker
 *    alone and of 4 workers that have each served --requests requests (pages /page/ and /db/).
 * 2. PHP: PSS per php-cgi child in a group of 4 vs per php-fpm child (pm static 4) after
 *    the same requests; throughput of a group of 4 vs 4 single php-cgi workers, 8
 *    requests at a time for --seconds each, run twice alternately.
 * Pools are driven in-process through createPool (the same client cost for every
 * variant); nginx is not in the path.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PoolConfig } from '../src/config/types.js';
import { pino } from 'pino';
import type { Logger } from '../src/log/log.js';
import { createPool, type Pool } from '../src/pool/index.js';
import { CgiParams } from '../src/protocol/params.js';
import { Exchange } from '../src/protocol/exchange.js';
import { parseSmapsRollup } from '../src/memory/proc.js';
import { childrenOf } from '../src/worker/children.js';
import { benchPoolConfig, djangoExample, Sink, SYSTEM_PYTHON } from './pool-client.js';

const arg = (name: string, def: number): number => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
};
const ROUNDS = arg('--rounds', 5);
const SECONDS = arg('--seconds', 8);
/** Requests each of the 4 Django workers serves before its PSS is read. */
const REQUESTS = arg('--requests', 50);
const PY = SYSTEM_PYTHON;
const MiB = 1024 * 1024;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const mib = (n: number): string => (n / MiB).toFixed(1);
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

function pss(pid: number): number {
  return parseSmapsRollup(readFileSync(`/proc/${pid}/smaps_rollup`, 'latin1'))?.pss ?? NaN;
}

/** The pool's log lines, parsed (spawnMs comes from "worker N ready after M ms"). */
function logged(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) }) as unknown as Logger;
  return { logger, lines };
}

async function get(pool: Pool, params: Record<string, string>): Promise<number> {
  const sink = new Sink();
  const ex = new Exchange(CgiParams.fromObject({ REQUEST_METHOD: 'GET', CONTENT_LENGTH: '0', SERVER_PROTOCOL: 'HTTP/1.1', SERVER_NAME: 'localhost', SERVER_PORT: '80', REMOTE_ADDR: '127.0.0.1', ...params }), sink, 'bench', performance.now());
  ex.endBody();
  pool.dispatch(ex);
  await sink.done;
  return sink.status;
}

const base = benchPoolConfig;

// ---- Django ---------------------------------------------------------------------------

async function django(): Promise<void> {
  const { dir, run, app, env, adapter, page } = djangoExample('fpm-pm-bench-');
  const dbPage = { SCRIPT_NAME: '/app', PATH_INFO: '/db/', REQUEST_URI: '/app/db/' };
  const make = (preload: boolean, extra: Partial<PoolConfig> = {}) => {
    const { logger, lines } = logged();
    const cmd = [PY, adapter, ...(preload ? ['--preload'] : []), '--fastcgi', 'mysite.wsgi:application'];
    const pool = createPool(base({ command: cmd, cwd: app, env, preload, preloadIdleTimeout: 600_000, ...extra }), { logger, runtimeDir: run });
    return { pool, lines };
  };
  const spawnTimes = (lines: Array<Record<string, unknown>>): number[] => lines.filter((l) => typeof l.spawnMs === 'number').map((l) => l.spawnMs as number);

  const out: string[] = [];
  for (const preload of [false, true]) {
    const label = preload ? 'preload, parent warm' : 'exec';
    const { pool, lines } = make(preload, { maxChildren: 1, idleTimeout: 100 });
    await pool.start();
    const firstMs: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const t0 = performance.now();
      await get(pool, page);
      firstMs.push(performance.now() - t0);
      // Wait for the idle stop, so the next request needs a new worker.
      while (pool.snapshot().workers.length > 0) await sleep(20);
    }
    await pool.stop(2000);
    out.push(`Django ${label}: spawn→ready median ${median(spawnTimes(lines)).toFixed(1)} ms (${spawnTimes(lines).map((x) => x.toFixed(0)).join(', ')}); first request ${median(firstMs).toFixed(0)} ms`);
  }
  {
    // Cold: the parent stops when idle (preload_idle_timeout 50 ms) and must start again.
    const { pool, lines } = make(true, { maxChildren: 1, idleTimeout: 100, preloadIdleTimeout: 50 });
    await pool.start();
    await sleep(200);
    const firstMs: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      while (pool.snapshot().workers.length > 0) await sleep(20);
      await sleep(200);
      const t0 = performance.now();
      await get(pool, page);
      firstMs.push(performance.now() - t0);
    }
    await pool.stop(2000);
    out.push(`Django preload, cold (no parent): spawn→ready median ${median(spawnTimes(lines)).toFixed(1)} ms (${spawnTimes(lines).map((x) => x.toFixed(0)).join(', ')}); first request ${median(firstMs).toFixed(0)} ms`);
  }
  for (const preload of [false, true]) {
    const { pool } = make(preload);
    await pool.start();
    // Four at a time until four workers served REQUESTS requests each.
    for (let i = 0; i < REQUESTS; i++) await Promise.all([page, dbPage, page, dbPage].map((p) => get(pool, p)));
    await sleep(300);
    const pids = pool.snapshot().workers.map((w) => w.pid);
    const each = pids.map(pss);
    const parent = preload ? Number(readFileSync(`/proc/${pids[0]}/stat`, 'latin1').split(') ')[1]!.split(' ')[1]) : undefined;
    const parentPss = parent !== undefined ? pss(parent) : 0;
    const total = each.reduce((a, b) => a + b, 0);
    out.push(`Django ${preload ? 'preload' : 'exec'}: ${pids.length} workers PSS ${each.map(mib).join(' + ')} = ${mib(total)} MiB${preload ? `; parent ${mib(parentPss)} MiB; workers + parent ${mib(total + parentPss)} MiB` : ''}`);
    await pool.stop(2000);
  }
  {
    const { pool } = make(false, { maxChildren: 1 });
    await pool.start();
    for (let i = 0; i < 100; i++) await get(pool, i % 2 ? page : dbPage);
    await sleep(300);
    out.push(`Django exec: one worker alone after 100 requests PSS ${mib(pss(pool.snapshot().workers[0]!.pid))} MiB`);
    await pool.stop(2000);
  }
  rmSync(dir, { recursive: true, force: true });
  for (const l of out) console.log(l);
}

// ---- PHP ------------------------------------------------------------------------------

async function php(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'fpm-pm-php-'));
  const run = join(dir, 'run');
  mkdirSync(run, { mode: 0o700 });
  writeFileSync(join(dir, 'hello.php'), '<?php header("Content-Type: text/plain"); echo "hello from ", getmypid(), "\\n";');
  const params = { SCRIPT_FILENAME: join(dir, 'hello.php'), SCRIPT_NAME: '/hello.php', REQUEST_URI: '/hello.php', GATEWAY_INTERFACE: 'CGI/1.1' };
  const cmd = ['/usr/bin/php-cgi', '-d', 'opcache.enable_cli=0', '-d', 'opcache.enable=1'];
  const out: string[] = [];
  const load = async (pool: Pool): Promise<number> => {
    let n = 0;
    const until = performance.now() + SECONDS * 1000;
    await Promise.all(Array.from({ length: 8 }, async () => {
      while (performance.now() < until) {
        if ((await get(pool, params)) === 200) n++;
      }
    }));
    return n / SECONDS;
  };
  const group = () => createPool(base({ name: 'group', command: cmd, pm: 'static', maxChildren: 4, groupSize: 4, env: { PHP_FCGI_MAX_REQUESTS: '0' } }), { logger: logged().logger, runtimeDir: run });
  const singles = () => createPool(base({ name: 'singles', command: cmd, pm: 'static', maxChildren: 4, env: { PHP_FCGI_CHILDREN: '0', PHP_FCGI_MAX_REQUESTS: '0' } }), { logger: logged().logger, runtimeDir: run });
  const rates: Record<string, number[]> = { group: [], singles: [] };
  for (let round = 0; round < 2; round++) {
    for (const [name, make] of [['group', group], ['singles', singles]] as const) {
      const pool = make();
      await pool.start();
      for (let i = 0; i < 100; i++) await get(pool, params);
      rates[name]!.push(await load(pool));
      if (round === 0) {
        await sleep(300);
        const w = pool.snapshot().workers;
        const pids = name === 'group' ? childrenOf(w[0]!.pid) : w.map((x) => x.pid);
        const each = pids.map(pss);
        out.push(`php-cgi ${name}: ${pids.length} processes PSS ${each.map(mib).join(', ')} MiB (mean ${mib(each.reduce((a, b) => a + b, 0) / each.length)})${name === 'group' ? `; parent ${mib(pss(w[0]!.pid))} MiB` : ''}`);
      }
      await pool.stop(2000);
    }
  }
  out.push(`throughput, 8 at a time, ${SECONDS} s: group of 4 ${rates.group!.map((r) => r.toFixed(0)).join(', ')} req/s; 4 single php-cgi ${rates.singles!.map((r) => r.toFixed(0)).join(', ')} req/s; ratio ${(rates.group!.reduce((a, b) => a + b) / rates.singles!.reduce((a, b) => a + b)).toFixed(3)}`);

  // php-fpm, pm static 4, same page and opcache settings.
  const sock = join(dir, 'fpm.sock');
  writeFileSync(join(dir, 'fpm.conf'), `[global]\nerror_log = ${join(dir, 'fpm.log')}\ndaemonize = no\n[www]\nlisten = ${sock}\npm = static\npm.max_children = 4\nphp_admin_value[opcache.enable] = 1\n`);
  const fpm = spawn('/usr/sbin/php-fpm8.2', ['-y', join(dir, 'fpm.conf'), '-R', '-F'], { stdio: 'ignore' });
  await sleep(1000);
  const { createEndpoint } = await import('../src/upstream/endpoint.js');
  const ext = createPool(base({ name: 'fpm', command: undefined, backends: [{ kind: 'unix', path: sock, text: `unix:${sock}` }] as never, maxConnsPerBackend: 4 }), { logger: logged().logger, runtimeDir: run, endpointFactory: createEndpoint });
  await ext.start();
  for (let i = 0; i < 100; i++) await Promise.all([get(ext, params), get(ext, params), get(ext, params), get(ext, params)]);
  await sleep(300);
  const kids = childrenOf(fpm.pid!);
  const each = kids.map(pss);
  out.push(`php-fpm static 4: children PSS ${each.map(mib).join(', ')} MiB (mean ${mib(each.reduce((a, b) => a + b, 0) / each.length)}); master ${mib(pss(fpm.pid!))} MiB`);
  await ext.stop(1000);
  fpm.kill('SIGQUIT');
  await sleep(500);
  rmSync(dir, { recursive: true, force: true });
  for (const l of out) console.log(l);
}

console.log(`${new Date().toISOString()} load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
await django();
await php();
console.log(`load average at the end ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
process.exit(0);
