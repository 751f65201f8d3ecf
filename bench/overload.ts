/**
 * The seeds' overload table: open-loop load (requests leave on schedule, a new
 * connection each, whatever happened to the earlier ones) at 0.5-2× capacity, through
 * one nginx, for
 *   php:    examples/php's SQLite workload page (db.php): fcgi-pm (php-cgi) beside php-fpm;
 *   django: a view of the Django example (--django-path, default its 8,750-byte /page/;
 *           /app/db/ is its SQLite workload): fcgi-pm with an exec pool
 *           and with a preload pool (FastCGI workers, nginx keep-alive) beside uWSGI.
 * nginx, fcgi-pm and php-fpm each run in a session of their own, as services do (with
 * autogroups each session is one entity the kernel shares the CPU between; until
 * 2026-12-03 nginx and fcgi-pm shared the load generator's).
 * Every server runs with its defaults for queueing (fcgi-pm: queue_max_wait, queue_limit,
 * queue_timeout; php-fpm: listen.backlog; uWSGI: listen 100), `--workers` workers each.
 * Capacity is the peer's (php-fpm, uWSGI) closed-loop rate (wrk, 2 connections per worker,
 * a new connection per request as in the open loop);
 * the rates are multiples of it, the same for every stack, windows interleaved.
 *
 *   node dist/bench/overload.js [--suites php,django] [--seconds 8] [--workers 4]
 *       [--rates 0.5,1,1.5,2] [--timeout 10] [--django-path /app/page/] [--daemon-view]
 *
 * Per window: served (2xx) and 503 counts, client errors (timeouts, resets), and
 * latency percentiles of the served requests and of the 503s. --daemon-view (php suite)
 * has fcgi-pm write an access line per request (status and time from its arrival in the
 * daemon to its end) and prints the same p99s as the daemon saw them: a 503 slow at the
 * client but quick inside waited before the daemon read it (nginx, the sockets, the
 * client's own loop), one slow inside waited in the daemon. The access log costs the
 * daemon a little CPU: the target figures are taken without it.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { start, stopAll, waitReady, type Started } from './compare-procs.js';
import { findPhpFpm, REPO, runNginx } from './compare-stacks.js';
import { runWrk } from './compare-wrk.js';
import { djangoDatabase, freePort, machineLine, startFcgiPmDjango, startUwsgi } from './django.js';

const PHP_PUBLIC = join(REPO, 'examples', 'php', 'public');

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1]! : def;
}

export interface OpenLoopResult {
  sent: number;
  served: number;
  refused: number;
  other: number;
  errors: number;
  /** Client errors by kind (timeout, ECONNRESET, ...). */
  errorKinds: Record<string, number>;
  servedMs: number[];
  refusedMs: number[];
}

/** `rate` requests a second for `seconds`, each on a new connection; resolves once every one is answered or failed. */
export async function openLoop(url: string, rate: number, seconds: number, timeoutMs: number): Promise<OpenLoopResult> {
  const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  const r: OpenLoopResult = { sent: 0, served: 0, refused: 0, other: 0, errors: 0, errorKinds: {}, servedMs: [], refusedMs: [] };
  const failed = (err: NodeJS.ErrnoException): void => {
    r.errors++;
    const kind = err.code ?? err.message;
    r.errorKinds[kind] = (r.errorKinds[kind] ?? 0) + 1;
  };
  const total = Math.round(rate * seconds);
  const pending: Array<Promise<void>> = [];
  const one = (): Promise<void> =>
    new Promise((resolve) => {
      const t0 = performance.now();
      const req = http.get(url, { agent, timeout: timeoutMs }, (res) => {
        res.resume();
        res.on('end', () => {
          const ms = performance.now() - t0;
          const s = res.statusCode ?? 0;
          if (s >= 200 && s < 300) {
            r.served++;
            r.servedMs.push(ms);
          } else if (s === 503) {
            r.refused++;
            r.refusedMs.push(ms);
          } else r.other++;
          resolve();
        });
        res.on('error', (err) => {
          failed(err);
          resolve();
        });
      });
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', (err) => {
        failed(err);
        resolve();
      });
    });
  const begin = performance.now();
  while (r.sent < total) {
    const due = Math.min(total, Math.floor(((performance.now() - begin) / 1000) * rate) + 1);
    for (; r.sent < due; r.sent++) pending.push(one());
    await new Promise((res) => setTimeout(res, 2));
  }
  await Promise.all(pending);
  agent.destroy();
  return r;
}

export function pct(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

async function startPhpFpmDb(dir: string, workers: number, db: string): Promise<Started & { sock: string }> {
  mkdirSync(dir, { recursive: true });
  const sock = join(dir, 'fpm.sock');
  const conf = `[global]
pid = ${dir}/fpm.pid
error_log = ${dir}/fpm-error.log
daemonize = no
[bench]
${process.getuid?.() === 0 ? 'user = root\n' : ''}listen = ${sock}
pm = static
pm.max_children = ${workers}
pm.max_requests = 0
env[APP_DB_PATH] = ${db}
`;
  writeFileSync(join(dir, 'php-fpm.conf'), conf);
  const args = ['-F', '-y', join(dir, 'php-fpm.conf'), '-p', dir, ...(process.getuid?.() === 0 ? ['-R'] : [])];
  const p = start('php-fpm', findPhpFpm(), args, {}, 'SIGTERM');
  await waitReady('php-fpm', { path: sock }, p);
  return Object.assign(p, { sock });
}

/** fcgi-pm's access file for --daemon-view: status and milliseconds from arrival to end, one request a line. */
const DAEMON_VIEW_FORMAT = '%s %{milli}d';

async function startFcgiPmPhp(dir: string, workers: number, db: string, accessFile?: string): Promise<Started & { sock: string }> {
  mkdirSync(dir, { recursive: true });
  const sock = join(dir, 'fcgi-pm.sock');
  const log = accessFile === undefined ? '{ level: warn, access: false }' : `{ level: warn, access: true, access_file: ${accessFile}, access_format: "${DAEMON_VIEW_FORMAT}" }`;
  writeFileSync(
    join(dir, 'fcgi-pm.yaml'),
    `listen:
  - { protocol: fastcgi, address: "unix:${sock}", pool: php }
pools:
  php:
    command: [/usr/bin/php-cgi]
    env: { APP_DB_PATH: ${db} }
    pm: static
    max_children: ${workers}
log: ${log}
runtime_dir: ${dir}
`,
  );
  const p = start('fcgi-pm', join(REPO, 'bin', 'fcgi-pm'), ['run', '-c', join(dir, 'fcgi-pm.yaml'), '--allow-root'], { cwd: dir, detached: true });
  await waitReady('fcgi-pm', { path: sock }, p);
  return Object.assign(p, { sock });
}

/** The access lines written since `from` (a byte offset), as served and 503 durations; and the new offset. */
function daemonView(file: string, from: number): { served: number[]; refused: number[]; end: number } {
  let text: Buffer;
  try {
    text = readFileSync(file);
  } catch {
    return { served: [], refused: [], end: from };
  }
  const served: number[] = [];
  const refused: number[] = [];
  for (const line of text.subarray(from).toString('latin1').split('\n')) {
    const [status, ms] = line.split(' ');
    if (status === '503') refused.push(Number(ms));
    else if (status !== undefined && status.startsWith('2')) served.push(Number(ms));
  }
  return { served, refused, end: text.length };
}

interface Site {
  name: string;
  port: number;
  kind: 'php' | 'fastcgi' | 'uwsgi';
  sock: string;
  /** fcgi-pm's access file (--daemon-view). */
  accessFile?: string;
}

async function startNginx(dir: string, sites: Site[]): Promise<Started> {
  const blocks = sites.map((s, i) => {
    const up = `upstream up${i} { server unix:${s.sock}; keepalive 32; }`;
    const loc =
      s.kind === 'php'
        ? `root ${PHP_PUBLIC};
    location ~ \\.php$ { include /etc/nginx/fastcgi_params; fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name; fastcgi_keep_conn on; fastcgi_pass up${i}; }`
        : s.kind === 'fastcgi'
          ? `location /app/ { fastcgi_split_path_info ^(/app)(/.*)$; include /etc/nginx/fastcgi_params; fastcgi_param PATH_INFO $fastcgi_path_info; fastcgi_keep_conn on; fastcgi_pass up${i}; }`
          : `location ~ ^(?<p>/app)(?<rest>/.*)$ { include /etc/nginx/uwsgi_params; uwsgi_param SCRIPT_NAME $p; uwsgi_param PATH_INFO $rest; uwsgi_pass unix:${s.sock}; }`;
    return `${s.kind === 'uwsgi' ? '' : up}
  server { listen 127.0.0.1:${s.port} backlog=4096; ${loc} }`;
  });
  return runNginx(dir, blocks, sites.map((s) => s.port), { detached: true });
}

async function suite(name: string, tag: string, dir: string, sites: Site[], peer: string, path: string, workers: number, rates: number[], seconds: number, timeoutMs: number): Promise<void> {
  const ngx = await startNginx(join(dir, `nginx-${tag}`), sites);
  try {
    const url = (s: Site): string => `http://127.0.0.1:${s.port}${path}`;
    for (const s of sites) await runWrk(url(s), workers * 2, 3); // warm-up
    const caps = new Map<string, number>();
    for (const s of sites) caps.set(s.name, (await runWrk(url(s), workers * 2, 5, true)).rps);
    // The windows' access lines only: past the warm-up's and the capacity runs'.
    const offsets = new Map<Site, number>();
    for (const s of sites) if (s.accessFile !== undefined) offsets.set(s, daemonView(s.accessFile, 0).end);
    const capacity = caps.get(peer)!;
    process.stdout.write(
      `\n${name}: ${path}, ${workers} workers each; closed-loop capacity (wrk -c${workers * 2} -H 'Connection: close', 5 s): ${[...caps].map(([k, v]) => `${k} ${v.toFixed(0)}`).join(', ')} req/s; rates are multiples of ${peer}'s; ${machineLine()}\n`,
    );
    const viewed = sites.some((s) => s.accessFile !== undefined);
    const p99 = (xs: number[]): string => (xs.length > 0 ? pct(xs, 99).toFixed(0) : '–');
    process.stdout.write(
      `| load | stack | sent | served | 503 | other | client errors | served p50 ms | served p99 ms | 503 p99 ms |${viewed ? ' in the daemon: served p99 ms | 503 p99 ms |' : ''}\n|---|---|---|---|---|---|---|---|---|---|${viewed ? '---|---|' : ''}\n`,
    );
    for (const m of rates) {
      for (const s of sites) {
        const rate = Math.round(capacity * m);
        const r = await openLoop(url(s), rate, seconds, timeoutMs);
        // Let the queues empty before the next window (and the access lines reach the file).
        await new Promise((res) => setTimeout(res, 2000));
        let inside = viewed ? ' – | – |' : '';
        if (s.accessFile !== undefined) {
          const v = daemonView(s.accessFile, offsets.get(s) ?? 0);
          offsets.set(s, v.end);
          inside = ` ${p99(v.served)} | ${p99(v.refused)} |`;
        }
        process.stdout.write(
          `| ${m}× (${rate}/s) | ${s.name} | ${r.sent} | ${r.served} | ${r.refused} | ${r.other} | ${r.errors}${r.errors > 0 ? ` (${Object.entries(r.errorKinds).map(([k, v]) => `${k} ${v}`).join(', ')})` : ''} | ${pct(r.servedMs, 50).toFixed(0)} | ${p99(r.servedMs)} | ${p99(r.refusedMs)} |${inside}\n`,
        );
      }
    }
  } finally {
    await ngx.stop();
  }
}

async function main(): Promise<void> {
  const suites = arg('--suites', 'php,django').split(',');
  const seconds = Number(arg('--seconds', '8'));
  const workers = Number(arg('--workers', '4'));
  const rates = arg('--rates', '0.5,1,1.5,2').split(',').map(Number);
  const timeoutMs = Number(arg('--timeout', '10')) * 1000;
  const view = process.argv.includes('--daemon-view');
  const dir = mkdtempSync(join(tmpdir(), 'fcgi-pm-overload-'));
  try {
    if (suites.includes('php')) {
      const dbA = join(dir, 'php-a.sqlite3');
      const dbB = join(dir, 'php-b.sqlite3');
      const accessFile = view ? join(dir, 'fcgi-pm-access.log') : undefined;
      const fpm = await startFcgiPmPhp(join(dir, 'fcgi-pm-php'), workers, dbA, accessFile);
      const peer = await startPhpFpmDb(join(dir, 'php-fpm'), workers, dbB);
      try {
        const sites: Site[] = [
          { name: 'fcgi-pm', port: await freePort(), kind: 'php', sock: fpm.sock, ...(accessFile === undefined ? {} : { accessFile }) },
          { name: 'php-fpm', port: await freePort(), kind: 'php', sock: peer.sock },
        ];
        await suite('PHP + SQLite (examples/php db.php)', 'php', dir, sites, 'php-fpm', '/db.php', workers, rates, seconds, timeoutMs);
      } finally {
        await fpm.stop(10_000);
        await peer.stop();
      }
    }
    if (suites.includes('django')) {
      const db = djangoDatabase(dir);
      const fdir = join(dir, 'fcgi-pm-django');
      const exec = join(fdir, 'exec.sock');
      const pre = join(fdir, 'preload.sock');
      const fpm = await startFcgiPmDjango(fdir, db, workers, [{ name: 'exec', backend: 'fastcgi' }, { name: 'preload', backend: 'fastcgi', preload: true }], [
        { protocol: 'fastcgi', sock: exec, pool: 'exec' },
        { protocol: 'fastcgi', sock: pre, pool: 'preload' },
      ]);
      const uwsgi = await startUwsgi(join(dir, 'uwsgi'), db, workers);
      try {
        const sites: Site[] = [
          { name: 'fcgi-pm exec', port: await freePort(), kind: 'fastcgi', sock: exec },
          { name: 'fcgi-pm preload', port: await freePort(), kind: 'fastcgi', sock: pre },
          { name: 'uWSGI', port: await freePort(), kind: 'uwsgi', sock: uwsgi.sock },
        ];
        const path = arg('--django-path', '/app/page/');
        await suite(`Django (examples/django ${path})`, 'django', dir, sites, 'uWSGI', path, workers, rates, seconds, timeoutMs);
      } finally {
        await fpm.stop(10_000);
        await uwsgi.stop();
      }
    }
  } finally {
    await stopAll();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1]?.endsWith('overload.js')) {
  process.once('SIGINT', () => void stopAll().then(() => process.exit(130)));
  main().catch(async (err: unknown) => {
    process.stderr.write(`overload bench: ${err instanceof Error ? err.stack : String(err)}\n`);
    await stopAll();
    process.exit(1);
  });
}
