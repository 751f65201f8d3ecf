/**
 * The seeds' Django workload side by side: the example's /page/ (8,750 bytes) or its
 * SQLite page /db/ behind one nginx, served by fcgi-pm (proxy: FastCGI and SCGI front
 * ends, FastCGI and SCGI workers through fcgi-pm-wsgi, exec and preload pools) and by
 * uWSGI (Debian's uwsgi-core + python3 plugin, one master whose workers accept on a
 * uwsgi, an SCGI and a FastCGI socket), the same number of workers each, in interleaved
 * windows of kept-alive wrk clients. Prints req/s, latency and CPU per request of each
 * part (fcgi-pm's daemon, the workers, nginx, the whole stack).
 *
 *   node dist/bench/django.js [--seconds 10] [--rounds 3] [--workers 4] [--clients 1,10]
 *       [--paths /page/,/db/] [--stacks df,ds,ff,ss,pf,ps,uscgi,ufcgi,uwsgi] [--cpu-prof [--keep DIR]]
 *
 * Stacks (front end → fcgi-pm → workers): ff = nginx FastCGI (fastcgi_keep_conn, upstream
 * keepalive) → FastCGI workers (kept connections), ss = nginx SCGI → SCGI workers, fs / sf
 * the two crossings, pf / ps = ff / ss with a preload pool (fcgi-pm-wsgi --preload forks
 * the workers); df / ds = nginx FastCGI / SCGI straight to an `accept: direct` preload
 * pool's socket (the forks accept nginx's connections; the daemon's listener is only
 * nginx's backup); uWSGI: uscgi = nginx scgi_pass → uWSGI --scgi-socket, ufcgi = nginx
 * fastcgi_pass → uWSGI --fastcgi-socket, uwsgi = nginx uwsgi_pass → uWSGI --socket.
 * --clients and --paths take lists: every (path, clients) pair gets its own interleaved
 * rounds and table. --cpu-prof runs the daemon under node --cpu-prof and prints where its
 * time went.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cpuSeconds, processTree } from '../src/bench/proc-info.js';
import { summarise } from './cpuprofile-top.js';
import { sleep, start, stopAll, waitReady, type Started } from './compare-procs.js';
import { REPO, runNginx } from './compare-stacks.js';
import { runWrk, type WrkResult } from './compare-wrk.js';

const PYTHON = '/usr/bin/python3';
const DJANGO = join(REPO, 'examples', 'django');
const ADAPTER = join(REPO, 'bin', 'fcgi-pm-wsgi');

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1]! : def;
}

export function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** CPU seconds of pid and its live descendants (those that exit during a window are lost: none should). */
export function treeCpu(pid: number, exclude?: number): number {
  let sum = 0;
  for (const p of processTree(pid)) if (p !== exclude) sum += cpuSeconds(p) ?? 0;
  return sum;
}

/** A migrated copy of the example's database. */
export function djangoDatabase(dir: string): string {
  const db = join(dir, 'db.sqlite3');
  execFileSync(PYTHON, ['-B', 'manage.py', 'migrate', '--noinput', '-v', '0'], {
    cwd: DJANGO,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', DJANGO_DB_PATH: db, PYTHONDONTWRITEBYTECODE: '1', LANG: 'C.UTF-8' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return db;
}

export interface DjangoPool {
  name: string;
  backend: 'fastcgi' | 'scgi';
  preload?: boolean;
  /** accept: direct, its socket at directSocket(dir, name). */
  direct?: boolean;
  /** Extra pool keys, YAML lines ("    key: value"). */
  extra?: string;
}

/** Where a direct pool of startFcgiPmDjango(dir, …) has its workers' socket. */
export function directSocket(dir: string, pool: string): string {
  return join(dir, `${pool}.direct.sock`);
}

/** fcgi-pm with the Django example's pools; `listen` lines as YAML flow maps. */
export async function startFcgiPmDjango(
  dir: string,
  db: string,
  workers: number,
  pools: DjangoPool[],
  listen: Array<{ protocol: 'fastcgi' | 'scgi' | 'http'; sock: string; pool: string }>,
  nodeArgs: string[] = [],
): Promise<Started> {
  mkdirSync(dir, { recursive: true });
  const poolYaml = pools
    .map(
      (p) => `  ${p.name}:
    backend: ${p.backend}
    command: [${PYTHON}, ${ADAPTER},${p.preload ? ' --preload,' : ''} --${p.backend}, mysite.wsgi:application]
    cwd: ${DJANGO}
    socket: fd0
    env: { DJANGO_SETTINGS_MODULE: mysite.settings, DJANGO_DB_PATH: ${db}, PYTHONDONTWRITEBYTECODE: "1" }
    pm: static
    max_children: ${workers}
${p.preload ? '    preload: true\n' : ''}${p.direct ? `    accept: direct\n    direct_listen: "unix:${directSocket(dir, p.name)}"\n    direct_socket_mode: "0666"\n` : ''}${p.extra ?? ''}`,
    )
    .join('\n');
  const conf = `listen:
${listen.map((l) => `  - { protocol: ${l.protocol}, address: "${l.sock.startsWith('127.') ? l.sock : `unix:${l.sock}`}", pool: ${l.pool} }`).join('\n')}
pools:
${poolYaml}
log: { level: warn, access: false }
runtime_dir: ${dir}
`;
  writeFileSync(join(dir, 'fcgi-pm.yaml'), conf);
  const bin = join(REPO, 'bin', 'fcgi-pm');
  const args = ['run', '-c', join(dir, 'fcgi-pm.yaml'), '--allow-root'];
  const p = nodeArgs.length > 0 ? start('fcgi-pm', process.execPath, [...nodeArgs, bin, ...args], { cwd: dir }) : start('fcgi-pm', bin, args, { cwd: dir });
  for (const l of listen) await waitReady('fcgi-pm', l.sock.startsWith('127.') ? { port: Number(l.sock.split(':')[1]) } : { path: l.sock }, p);
  return p;
}

/**
 * uWSGI's master and `workers` processes with the example's application, accepting on a
 * uwsgi socket (`sock`) and, when asked, an SCGI and a FastCGI socket too (same workers).
 */
export async function startUwsgi(
  dir: string,
  db: string,
  workers: number,
  extra: string[] = [],
): Promise<Started & { sock: string; scgiSock: string; fcgiSock: string }> {
  mkdirSync(dir, { recursive: true });
  const sock = join(dir, 'uwsgi.sock');
  const scgiSock = join(dir, 'uwsgi-scgi.sock');
  const fcgiSock = join(dir, 'uwsgi-fcgi.sock');
  const args = [
    '--plugin', 'python3', '--master', '--processes', String(workers), '--socket', sock, '--scgi-socket', scgiSock,
    '--fastcgi-socket', fcgiSock, '--chdir', DJANGO,
    '--module', 'mysite.wsgi:application', '--env', 'DJANGO_SETTINGS_MODULE=mysite.settings', '--env', `DJANGO_DB_PATH=${db}`,
    '--env', 'PYTHONDONTWRITEBYTECODE=1', '--disable-logging', '--die-on-term', '--need-app', '--listen', '1024', ...extra,
  ];
  const p = start('uwsgi', '/usr/bin/uwsgi-core', args, { cwd: dir }, 'SIGTERM');
  for (const s of [sock, scgiSock, fcgiSock]) await waitReady('uwsgi', { path: s }, p, 30_000);
  return Object.assign(p, { sock, scgiSock, fcgiSock });
}

export interface DjangoSite {
  port: number;
  kind: 'fastcgi' | 'scgi' | 'uwsgi';
  sock: string;
  /** FastCGI: nginx keeps its connections (fastcgi_keep_conn and an upstream keepalive). Default true. */
  keepConn?: boolean;
  /** nginx's backup server behind `sock` (a direct pool's overflow listener). */
  backup?: string;
}

/** One nginx, a server per site, Django mounted under /app as in examples/django. */
export async function startNginxDjango(dir: string, sites: DjangoSite[]): Promise<Started> {
  const blocks = sites.map((s, i) => {
    let loc: string;
    let up = '';
    if (s.kind === 'fastcgi') {
      const keep = s.keepConn !== false && s.backup === undefined;
      up = `upstream up${i} { server unix:${s.sock}${s.backup === undefined ? '' : ` max_fails=0; server unix:${s.backup} backup`};${keep ? ' keepalive 16;' : ''} }`;
      loc = `location /app/ {
      fastcgi_split_path_info ^(/app)(/.*)$;
      include /etc/nginx/fastcgi_params;
      fastcgi_param PATH_INFO $fastcgi_path_info;
      ${keep ? 'fastcgi_keep_conn on;' : ''}
      fastcgi_pass up${i};
    }`;
    } else if (s.kind === 'scgi') {
      if (s.backup !== undefined) up = `upstream up${i} { server unix:${s.sock} max_fails=0; server unix:${s.backup} backup; }`;
      loc = `location ~ ^(?<app_prefix>/app)(?<app_path>/.*)$ {
      include /etc/nginx/scgi_params;
      scgi_param SCRIPT_NAME $app_prefix;
      scgi_param PATH_INFO $app_path;
      scgi_pass ${s.backup === undefined ? `unix:${s.sock}` : `up${i}`};
    }`;
    } else {
      loc = `location ~ ^(?<app_prefix>/app)(?<app_path>/.*)$ {
      include /etc/nginx/uwsgi_params;
      uwsgi_param SCRIPT_NAME $app_prefix;
      uwsgi_param PATH_INFO $app_path;
      uwsgi_pass unix:${s.sock};
    }`;
    }
    return `${up}
  server {
    listen 127.0.0.1:${s.port} backlog=4096;
    ${loc}
  }`;
  });
  return runNginx(dir, blocks, sites.map((s) => s.port));
}

/** Load average and the hour, for the record. */
export function machineLine(): string {
  const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  return `${new Date().toISOString()}, load average ${load}, ${readdirSync('/sys/devices/system/cpu').filter((f) => /^cpu\d+$/.test(f)).length} CPUs`;
}

interface Window {
  stack: string;
  r: WrkResult;
  daemonUs: number;
  workersUs: number;
  nginxUs: number;
  stackUs: number;
}

const STACK_NAMES: Record<string, string> = {
  ff: 'fcgi-pm FastCGI → FastCGI workers',
  ss: 'fcgi-pm SCGI → SCGI workers',
  fs: 'fcgi-pm FastCGI → SCGI workers',
  sf: 'fcgi-pm SCGI → FastCGI workers',
  pf: 'fcgi-pm FastCGI → FastCGI workers, preload pool',
  ps: 'fcgi-pm SCGI → SCGI workers, preload pool',
  df: 'direct: nginx FastCGI → preload workers accepting themselves',
  ds: 'direct: nginx SCGI → preload workers accepting themselves',
  uscgi: 'uWSGI --scgi-socket (scgi_pass)',
  ufcgi: 'uWSGI --fastcgi-socket (fastcgi_pass)',
  uwsgi: 'uWSGI --socket (uwsgi_pass)',
};

const UWSGI_STACKS = new Set(['uscgi', 'ufcgi', 'uwsgi']);

/** An fcgi-pm stack: the front end's protocol and the pool behind it. */
function fpmStack(s: string): { front: 'fastcgi' | 'scgi'; pool: DjangoPool } {
  const front = s[0] === 's' || s === 'ps' ? 'scgi' : 'fastcgi';
  if (s === 'pf') return { front, pool: { name: 'dj_pre_f', backend: 'fastcgi', preload: true } };
  if (s === 'ps') return { front: 'scgi', pool: { name: 'dj_pre_s', backend: 'scgi', preload: true } };
  if (s === 'df' || s === 'ds') {
    const backend = s === 'df' ? 'fastcgi' : 'scgi';
    return { front: backend, pool: { name: `dj_direct_${backend}`, backend, preload: true, direct: true } };
  }
  return { front, pool: s[1] === 'f' ? { name: 'dj_fcgi', backend: 'fastcgi' } : { name: 'dj_scgi', backend: 'scgi' } };
}

/** The medians of each stack's windows; "× uWSGI" against uWSGI's SCGI socket (the issue's reference), else its uwsgi one. */
function printMedians(windows: Window[], stacks: string[]): void {
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const med = (s: string, f: (w: Window) => number): number => median(windows.filter((w) => w.stack === s).map(f));
  const ref = ['uscgi', 'uwsgi', 'ufcgi'].find((s) => stacks.includes(s));
  const uRps = ref === undefined ? NaN : med(ref, (w) => w.r.rps);
  const uStack = ref === undefined ? NaN : med(ref, (w) => w.stackUs);
  const lines = [
    `medians over the rounds (× uWSGI: against ${ref === undefined ? 'none' : STACK_NAMES[ref]}):`,
    '| stack | req/s | × uWSGI | p50 ms | p99 ms | errors | daemon µs/req | workers µs/req | nginx µs/req | stack µs/req | stack × uWSGI |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const s of stacks) {
    const rps = med(s, (w) => w.r.rps);
    const st = med(s, (w) => w.stackUs);
    const errors = windows.filter((w) => w.stack === s).reduce((n, w) => n + w.r.errors + w.r.non2xx, 0);
    lines.push(
      `| ${STACK_NAMES[s]} | ${rps.toFixed(0)} | ${(rps / uRps).toFixed(2)} | ${med(s, (w) => w.r.p50Ms).toFixed(2)} | ${med(s, (w) => w.r.p99Ms).toFixed(2)} | ${errors} | ${UWSGI_STACKS.has(s) ? '–' : med(s, (w) => w.daemonUs).toFixed(0)} | ${med(s, (w) => w.workersUs).toFixed(0)} | ${med(s, (w) => w.nginxUs).toFixed(0)} | ${st.toFixed(0)} | ${(st / uStack).toFixed(2)} |`,
    );
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

const numbers = (v: string): number[] => v.split(',').map(Number);

async function main(): Promise<void> {
  const seconds = Number(arg('--seconds', '10'));
  const rounds = Number(arg('--rounds', '3'));
  const workers = Number(arg('--workers', '4'));
  const clientsList = numbers(arg('--clients', '1'));
  const paths = arg('--paths', arg('--path', '/page/')).split(',');
  const stacks = arg('--stacks', 'df,ds,ff,ss,pf,ps,uscgi,ufcgi,uwsgi').split(',');
  for (const s of stacks) if (STACK_NAMES[s] === undefined) throw new Error(`unknown stack ${s}; known: ${Object.keys(STACK_NAMES).join(', ')}`);
  const prof = process.argv.includes('--cpu-prof');
  const dir = mkdtempSync(join(tmpdir(), 'fcgi-pm-django-bench-'));
  const db = djangoDatabase(dir);
  const profDir = join(dir, 'prof');
  const fpmStacks = stacks.filter((s) => !UWSGI_STACKS.has(s));
  const pools = new Map<string, DjangoPool>();
  for (const s of fpmStacks) pools.set(fpmStack(s).pool.name, fpmStack(s).pool);
  const socks = new Map<string, string>(fpmStacks.map((s) => [s, join(dir, 'fcgi-pm', `${s}.sock`)]));
  const sites: DjangoSite[] = [];
  const ports = new Map<string, number>();
  for (const s of stacks) ports.set(s, await freePort());
  let fpm: Started | undefined;
  let uwsgi: Awaited<ReturnType<typeof startUwsgi>> | undefined;
  try {
    if (fpmStacks.length > 0) {
      fpm = await startFcgiPmDjango(
        join(dir, 'fcgi-pm'),
        db,
        workers,
        [...pools.values()],
        fpmStacks.map((s) => ({ protocol: fpmStack(s).front, sock: socks.get(s)!, pool: fpmStack(s).pool.name })),
        prof ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : [],
      );
      for (const s of fpmStacks) {
        const { front, pool } = fpmStack(s);
        // A direct pool: nginx goes to the workers' socket, the daemon's listener is its backup.
        if (pool.direct === true) sites.push({ port: ports.get(s)!, kind: front, sock: directSocket(join(dir, 'fcgi-pm'), pool.name), backup: socks.get(s)! });
        else sites.push({ port: ports.get(s)!, kind: front, sock: socks.get(s)! });
      }
    }
    if (stacks.some((s) => UWSGI_STACKS.has(s))) {
      uwsgi = await startUwsgi(join(dir, 'uwsgi'), db, workers);
      if (stacks.includes('uwsgi')) sites.push({ port: ports.get('uwsgi')!, kind: 'uwsgi', sock: uwsgi.sock });
      if (stacks.includes('uscgi')) sites.push({ port: ports.get('uscgi')!, kind: 'scgi', sock: uwsgi.scgiSock });
      // uWSGI's FastCGI closes the connection after each request: nginx keeps none.
      if (stacks.includes('ufcgi')) sites.push({ port: ports.get('ufcgi')!, kind: 'fastcgi', sock: uwsgi.fcgiSock, keepConn: false });
    }
    const ngx = await startNginxDjango(join(dir, 'nginx'), sites);
    const url = (s: string, path: string): string => `http://127.0.0.1:${ports.get(s)}/app${path}`;
    const maxClients = Math.max(...clientsList, workers);
    for (const s of stacks) for (const path of paths) await runWrk(url(s, path), maxClients, 2); // warm-up: every worker imports Django
    for (const path of paths) {
      for (const clients of clientsList) {
        process.stdout.write(`\nDjango ${path}, ${workers} workers each, ${clients} kept-alive client(s), ${rounds} × ${seconds} s windows interleaved; ${machineLine()}\n`);
        const windows: Window[] = [];
        for (let round = 0; round < rounds; round++) {
          for (const s of stacks) {
            const server = UWSGI_STACKS.has(s) ? uwsgi! : fpm!;
            const daemon = UWSGI_STACKS.has(s) ? undefined : server.pid;
            const d0 = daemon === undefined ? 0 : cpuSeconds(daemon)!;
            const t0 = treeCpu(server.pid);
            const n0 = treeCpu(ngx.pid);
            const r = await runWrk(url(s, path), clients, seconds);
            const d1 = daemon === undefined ? 0 : cpuSeconds(daemon)!;
            const t1 = treeCpu(server.pid);
            const n1 = treeCpu(ngx.pid);
            const per = (x: number): number => (x * 1e6) / Math.max(1, r.requests);
            const w: Window = { stack: s, r, daemonUs: per(d1 - d0), workersUs: per(t1 - t0 - (d1 - d0)), nginxUs: per(n1 - n0), stackUs: per(t1 - t0 + n1 - n0) };
            windows.push(w);
            process.stdout.write(
              `  round ${round + 1} ${STACK_NAMES[s]}: ${r.rps.toFixed(0)} req/s, p50 ${r.p50Ms.toFixed(2)} ms, p99 ${r.p99Ms.toFixed(2)} ms, errors ${r.errors + r.non2xx}; CPU µs/request: daemon ${daemon === undefined ? '–' : w.daemonUs.toFixed(0)}, workers ${w.workersUs.toFixed(0)}, nginx ${w.nginxUs.toFixed(0)}, stack ${w.stackUs.toFixed(0)}\n`,
            );
          }
        }
        printMedians(windows, stacks);
      }
    }
    await ngx.stop();
  } finally {
    await uwsgi?.stop();
    await fpm?.stop(10_000);
    await stopAll();
  }
  if (prof) {
    for (let i = 0; i < 50 && (readdirSync(profDir, { withFileTypes: true }).length ?? 0) === 0; i++) await sleep(100);
    const file = readdirSync(profDir).find((f) => f.endsWith('.cpuprofile'));
    if (file !== undefined) {
      const s = summarise(JSON.parse(readFileSync(join(profDir, file), 'utf8')));
      const top = (xs: typeof s.costs, by: 'selfMs' | 'totalMs', n: number): typeof s.costs => [...xs].sort((a, b) => b[by] - a[by]).slice(0, n);
      const lines = [`\ndaemon profile: busy ${s.busyMs.toFixed(0)} ms, GC ${s.gcMs.toFixed(0)} ms; % of busy time`, '  self%  total%  function  (file:line)'];
      for (const c of top(s.costs, 'selfMs', 25)) lines.push(`  ${c.selfPct.toFixed(1).padStart(5)}  ${c.totalPct.toFixed(1).padStart(6)}  ${c.name}  ${c.where}`);
      lines.push('', "  total%  self%  fcgi-pm's own functions, inclusive");
      for (const c of top(s.costs.filter((x) => x.where.startsWith('dist/src/')), 'totalMs', 25)) lines.push(`  ${c.totalPct.toFixed(1).padStart(6)}  ${c.selfPct.toFixed(1).padStart(5)}  ${c.name}  ${c.where}`);
      process.stdout.write(`${lines.join('\n')}\n`);
      const keep = arg('--keep', '');
      if (keep !== '') {
        cpSync(join(profDir, file), join(keep, file));
        process.stdout.write(`\nprofile kept: ${join(keep, file)} (node dist/bench/cpuprofile-top.js FILE --callers NAME)\n`);
      }
    }
  }
  rmSync(dir, { recursive: true, force: true });
}

if (process.argv[1]?.endsWith('django.js')) {
  process.once('SIGINT', () => void stopAll().then(() => process.exit(130)));
  main().catch(async (err: unknown) => {
    process.stderr.write(`django bench: ${err instanceof Error ? err.stack : String(err)}\n`);
    await stopAll();
    process.exit(1);
  });
}
