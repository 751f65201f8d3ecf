/**
 * The seeds' overload table: open-loop load (requests leave on schedule, a new
 * connection each, whatever happened to the earlier ones; bench/load-generator.ts, a process
 * and session of its own, raised above the servers as root) at 0.5-2× capacity, through
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
 *       [--hops [--hops-dump PREFIX]] [--capacity REQ_PER_S] [--generator-inline]
 *       [--nginx-workers N] [--nginx-keepalive N] [--nginx-nice N] [--daemon-keys "key: value; ..."]
 *
 * Per window: served (2xx) and 503 counts, client errors (timeouts, resets), and
 * latency percentiles of the served requests and of the 503s. --daemon-view (php suite)
 * has fcgi-pm write an access line per request (status and time from its arrival in the
 * daemon to its end) and prints the same p99s as the daemon saw them: a 503 slow at the
 * client but quick inside waited before the daemon read it (nginx, the sockets, the
 * client's own loop), one slow inside waited in the daemon (how many 503s came from the
 * queue, and their p99 there, has a column of its own). The access log costs the
 * daemon a little CPU: the target figures are taken without it. --hops (php suite; implies
 * --daemon-view) also has nginx log each request's times and the generator tag each with
 * `?i=<id>`, and prints where the time of the requests at each class's p99 went, hop by
 * hop (hopsTable; the 503s also split into those refused at admission and those that came
 * from the queue, 1 ms or more in the daemon: shed from a growing queue's tail or timed
 * out); --hops-dump PREFIX writes every request's joined times as JSON. Each
 * window also prints the generator's own event-loop delay and CPU: a generator that lags
 * adds its lag to every figure at the client, and a second table the onset: the served and
 * 503 p99s of the requests due in the first 150 and 300 ms (while the growth is being
 * seen), up to 1 s, and after. --capacity fixes the rates' base (the same
 * offered load run after run); --generator-inline runs the generator in the bench's own
 * process and session, as before 2026-12-03 (the A/B of that change). --nginx-workers N
 * gives the one nginx in front of every stack N worker processes (1 by default): the A/B of
 * nginx's own delay to accept at 2× (one worker at nice 0 beside 4 busy workers).
 * --nginx-keepalive N: nginx's kept connections to each upstream (32). --nginx-nice N sets
 * the autogroup of nginx's session to nice N (as root; 0 by default, as a service starts):
 * the A/B of the web server at the daemon's weight (about −5), which docs/overload.md
 * tells operators to give it, since every 503 passes through nginx twice. --daemon-keys adds
 * top-level keys to fcgi-pm's config ("daemon_cpu_weight: 1000"). Each fcgi-pm window also
 * prints the daemon's front-end connections per request sent, its CPU per 1,000 sent, and
 * the run-queue wait (/proc/PID/schedstat) of the daemon and of nginx's workers over the
 * window and its drain: whether the 503s waited for a CPU before the daemon read them; and
 * how many requests a worker took after more than 200 and 500 ms in the pool's queue (its
 * queue-wait histogram): whether a served tail waited in the queue or outside it.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { start, stopAll, waitReady, type Started } from './compare-procs.js';
import { findPhpFpm, REPO, runNginx } from './compare-stacks.js';
import { runWrk } from './compare-wrk.js';
import { djangoDatabase, freePort, machineLine, startFcgiPmDjango, startUwsgi } from './django.js';
import { openLoop, openLoopApart, type ClientHop, type OpenLoopResult } from './load-generator.js';
import { childPids, cpuSeconds } from '../src/bench/proc-info.js';
import { controlRequest } from '../src/control/client.js';
import type { StatusSnapshot } from '../src/control/types.js';

const PHP_PUBLIC = join(REPO, 'examples', 'php', 'public');

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1]! : def;
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

/** fcgi-pm's access file for --daemon-view: status, milliseconds from arrival to end, the query (--hops: `i=<id>`), arrival and end (epoch s), one request a line. */
const DAEMON_VIEW_FORMAT = '%s %{milli}d %q %{msec}t %{msec}T';

async function startFcgiPmPhp(dir: string, workers: number, db: string, accessFile?: string): Promise<Started & { sock: string; control: string }> {
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
control_socket: ${dir}/control.sock
${arg('--daemon-keys', '').split(';').filter((k) => k.trim() !== '').map((k) => `${k.trim()}\n`).join('')}`,
  );
  const p = start('fcgi-pm', join(REPO, 'bin', 'fcgi-pm'), ['run', '-c', join(dir, 'fcgi-pm.yaml'), '--allow-root'], { cwd: dir, detached: true });
  await waitReady('fcgi-pm', { path: sock }, p);
  return Object.assign(p, { sock, control: join(dir, 'control.sock') });
}

/** Run-queue wait (ms) of these threads so far (/proc/PID/schedstat: the main thread's). */
function runQueueWaitMs(pids: number[]): number {
  let ns = 0;
  for (const pid of pids) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/schedstat`, 'latin1').split(' ')[1]);
    } catch {
      // gone
    }
  }
  return ns / 1e6;
}

interface DaemonCost {
  cpu: number;
  accepted: number;
  /** Its run-queue wait, ms. */
  waitMs: number;
  /** Requests a worker took after waiting in a pool's queue more than 200 ms, and more than 500 ms (its queue-wait histograms). */
  queued200: number;
  queued500: number;
}

/** Of the pools' queue-wait histograms, the requests counted above `ms` (a bucket bound). */
function queuedOver(snap: StatusSnapshot, ms: number): number {
  let n = 0;
  for (const p of snap.pools) {
    const h = p.outcomes?.queueWait;
    if (h === undefined) continue;
    const from = h.boundsMs.indexOf(ms) + 1;
    for (let i = from; i < h.counts.length; i++) n += h.counts[i]!;
  }
  return n;
}

/** What the daemon has spent so far: its CPU seconds, the front-end connections its listeners took, its wait for a CPU. */
async function daemonCost(pid: number, control: string): Promise<DaemonCost> {
  const c = await controlRequest(control, { cmd: 'status' }, 10_000);
  c.end();
  if (!c.response.ok) throw new Error(`status: ${JSON.stringify(c.response.error)}`);
  const snap = c.response.result as StatusSnapshot;
  const accepted = snap.listeners.reduce((n, l) => n + l.accepted, 0);
  return { cpu: cpuSeconds(pid) ?? NaN, accepted, waitMs: runQueueWaitMs([pid]), queued200: queuedOver(snap, 200), queued500: queuedOver(snap, 500) };
}

/** The onset's spans (ms of due time from the window's first request): the first sub-windows of 50 ms, while the growth is being seen, then the rest. */
const ONSET_SPANS: Array<[number, number]> = [[0, 150], [150, 300], [300, 1000], [1000, Infinity]];

/** Served and 503 counts and p99s of the requests due in each onset span, as table cells. */
function onsetCells(r: OpenLoopResult): string {
  const cell = (ms: number[], due: number[], [from, to]: [number, number]): string => {
    const xs = ms.filter((_, i) => due[i]! >= from && due[i]! < to);
    return xs.length === 0 ? '0' : `${xs.length}: ${pct(xs, 99).toFixed(0)}`;
  };
  return ONSET_SPANS.map((span) => `${cell(r.servedMs, r.servedDue, span)} / ${cell(r.refusedMs, r.refusedDue, span)}`).join(' | ');
}

/**
 * A 503 that spent this long in the daemon or more came from the queue (shed from a growing
 * queue's tail, or timed out); one refused at admission is answered in the turn that read it.
 */
const QUEUED_503_MS = 1;

/** fcgi-pm's access rows as served and 503 durations; `queued`: the 503s that came from the queue. */
function daemonView(rows: string[][]): { served: number[]; refused: number[]; queued: number[] } {
  const served: number[] = [];
  const refused: number[] = [];
  for (const [status, ms] of rows) {
    if (status === '503') refused.push(Number(ms));
    else if (status !== undefined && status.startsWith('2')) served.push(Number(ms));
  }
  return { served, refused, queued: refused.filter((ms) => ms >= QUEUED_503_MS) };
}

interface Site {
  name: string;
  port: number;
  kind: 'php' | 'fastcgi' | 'uwsgi';
  sock: string;
  /** fcgi-pm's access file (--daemon-view). */
  accessFile?: string;
  /** nginx's access file for this site (--hops). */
  nginxFile?: string;
  /** fcgi-pm's pid and control socket: its CPU and connections per request, each window. */
  daemon?: { pid: number; control: string };
}

/** nginx's access line for --hops: the request's id, then when nginx's request ended (epoch s) and its times (s). */
const NGINX_HOPS_FORMAT = 'log_format hops \'$arg_i $status $msec $request_time $upstream_connect_time $upstream_header_time $upstream_response_time $connection_time\';';

interface Hop {
  client: ClientHop;
  /** nginx: request start and end, connect time to the upstream (epoch ms, ms). */
  nginx?: { accepted: number; start: number; end: number; connect: number; header: number };
  /** fcgi-pm: arrival (params complete) and end (epoch ms). */
  daemon?: { start: number; end: number };
}

/** Lines of a log file past `from`, split on spaces; and the new offset. */
function linesFrom(file: string, from: number): { rows: string[][]; end: number } {
  let text: Buffer;
  try {
    text = readFileSync(file);
  } catch {
    return { rows: [], end: from };
  }
  return { rows: text.subarray(from).toString('latin1').split('\n').filter((l) => l !== '').map((l) => l.split(' ')), end: text.length };
}

/** The client's, nginx's and the daemon's times of each request joined by its id. */
function joinHops(client: Map<number, ClientHop>, nginxRows: string[][], daemonRows: string[][]): Hop[] {
  const hops = new Map<number, Hop>();
  for (const [id, c] of client) hops.set(id, { client: c });
  for (const [id, , msec, rt, uct, uht, , ct] of nginxRows) {
    const h = hops.get(Number(id));
    if (h === undefined) continue;
    const end = Number(msec) * 1000;
    h.nginx = { accepted: end - Number(ct) * 1000, start: end - Number(rt) * 1000, end, connect: Number(uct) * 1000, header: Number(uht) * 1000 };
  }
  for (const [, , q, t, tEnd] of daemonRows) {
    const h = q?.startsWith('i=') ? hops.get(Number(q.slice(2))) : undefined;
    if (h !== undefined) h.daemon = { start: Number(t) * 1000, end: Number(tEnd) * 1000 };
  }
  return [...hops.values()];
}

/**
 * Where the time of the slowest requests went, hop by hop: the client's schedule (due →
 * sent), client → nginx (sent → nginx's request start: connect, accept, first read),
 * nginx → daemon (→ the daemon's arrival: nginx's upstream connect and write, the daemon's
 * accept and read), the daemon (arrival → end), daemon → nginx (→ nginx's end), nginx →
 * client (→ the client's end). Each figure is the median of that hop over the requests at
 * or past the class's p99 at the client; "connect" and "header time" are nginx's
 * $upstream_connect_time and $upstream_header_time (from its connect to the upstream to the
 * response's header: when nginx → daemon is long and this short, nginx was late to begin
 * the upstream; when this is long too, the request waited on the daemon's side).
 */
function hopsTable(label: string, hops: Hop[]): string {
  const lines: string[] = [];
  const inDaemon = (h: Hop): number => (h.daemon === undefined ? 0 : h.daemon.end - h.daemon.start);
  const classes: [string, (h: Hop) => boolean][] = [
    ['served', (h) => h.client.status >= 200 && h.client.status < 300],
    ['503', (h) => h.client.status === 503],
    ['503 at admission', (h) => h.client.status === 503 && h.daemon !== undefined && inDaemon(h) < QUEUED_503_MS],
    ['503 from the queue', (h) => h.client.status === 503 && inDaemon(h) >= QUEUED_503_MS],
  ];
  for (const [cls, ok] of classes) {
    const all = hops.filter((h) => ok(h) && h.nginx !== undefined);
    if (all.length === 0) continue;
    const total = (h: Hop): number => h.client.endAt - h.client.sentAt;
    const p99 = pct(all.map(total), 99);
    const tail = all.filter((h) => total(h) >= p99);
    const med = (f: (h: Hop) => number | undefined): string => {
      const xs = tail.map(f).filter((x): x is number => x !== undefined && Number.isFinite(x));
      return xs.length === 0 ? '–' : pct(xs, 50).toFixed(0);
    };
    lines.push(
      `| ${label} | ${cls} | ${all.length} | ${p99.toFixed(0)} | ${tail.length} | ${med((h) => h.client.sentAt - h.client.dueAt)} | ${med((h) => h.nginx!.accepted - h.client.sentAt)} | ${med((h) => h.nginx!.start - h.nginx!.accepted)} | ${med((h) => h.nginx!.connect)} | ${med((h) => h.nginx!.header)} | ${med((h) => (h.daemon === undefined ? undefined : h.daemon.start - h.nginx!.start))} | ${med((h) => (h.daemon === undefined ? undefined : h.daemon.end - h.daemon.start))} | ${med((h) => (h.daemon === undefined ? undefined : h.nginx!.end - h.daemon.end))} | ${med((h) => h.client.endAt - h.nginx!.end)} |`,
    );
  }
  return lines.join('\n');
}

async function startNginx(dir: string, sites: Site[]): Promise<Started> {
  const blocks = sites.map((s, i) => {
    const up = `upstream up${i} { server unix:${s.sock}; keepalive ${arg('--nginx-keepalive', '32')}; }`;
    const loc =
      s.kind === 'php'
        ? `root ${PHP_PUBLIC};
    location ~ \\.php$ { include /etc/nginx/fastcgi_params; fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name; fastcgi_keep_conn on; fastcgi_pass up${i}; }`
        : s.kind === 'fastcgi'
          ? `location /app/ { fastcgi_split_path_info ^(/app)(/.*)$; include /etc/nginx/fastcgi_params; fastcgi_param PATH_INFO $fastcgi_path_info; fastcgi_keep_conn on; fastcgi_pass up${i}; }`
          : `location ~ ^(?<p>/app)(?<rest>/.*)$ { include /etc/nginx/uwsgi_params; uwsgi_param SCRIPT_NAME $p; uwsgi_param PATH_INFO $rest; uwsgi_pass unix:${s.sock}; }`;
    const log = s.nginxFile === undefined ? '' : `access_log ${s.nginxFile} hops; `;
    return `${s.kind === 'uwsgi' ? '' : up}
  server { listen 127.0.0.1:${s.port} backlog=4096; ${log}${loc} }`;
  });
  if (sites.some((s) => s.nginxFile !== undefined)) blocks.unshift(NGINX_HOPS_FORMAT);
  return runNginx(dir, blocks, sites.map((s) => s.port), { detached: true }, Number(arg('--nginx-workers', '1')));
}

async function suite(name: string, tag: string, dir: string, sites: Site[], peer: string, path: string, workers: number, rates: number[], seconds: number, timeoutMs: number): Promise<void> {
  const ngx = await startNginx(join(dir, `nginx-${tag}`), sites);
  // nginx leads its session: its autogroup is its own, shared by its workers.
  const nice = arg('--nginx-nice', '');
  if (nice !== '') writeFileSync(`/proc/${ngx.pid}/autogroup`, nice);
  try {
    const url = (s: Site): string => `http://127.0.0.1:${s.port}${path}`;
    for (const s of sites) await runWrk(url(s), workers * 2, 3); // warm-up
    const caps = new Map<string, number>();
    for (const s of sites) caps.set(s.name, (await runWrk(url(s), workers * 2, 5, true)).rps);
    // The windows' access lines only: past the warm-up's and the capacity runs'.
    const offsets = new Map<string, number>();
    const fresh = (file: string | undefined): string[][] => {
      if (file === undefined) return [];
      const l = linesFrom(file, offsets.get(file) ?? 0);
      offsets.set(file, l.end);
      return l.rows;
    };
    for (const s of sites) {
      fresh(s.accessFile);
      fresh(s.nginxFile);
    }
    const inline = process.argv.includes('--generator-inline');
    const onsetLines: string[] = [];
    let nextId = 0;
    let generator = '';
    const hopLines: string[] = [];
    // --capacity: the same offered load run after run (an A/B on a busy machine), whatever was measured.
    const fixed = arg('--capacity', '');
    const capacity = fixed === '' ? caps.get(peer)! : Number(fixed);
    process.stdout.write(
      `\n${name}: ${path}, ${workers} workers each; closed-loop capacity (wrk -c${workers * 2} -H 'Connection: close', 5 s): ${[...caps].map(([k, v]) => `${k} ${v.toFixed(0)}`).join(', ')} req/s; rates are multiples of ${fixed === '' ? `${peer}'s` : `${fixed} req/s (--capacity)`}; ${machineLine()}\n`,
    );
    const viewed = sites.some((s) => s.accessFile !== undefined);
    const p99 = (xs: number[]): string => (xs.length > 0 ? pct(xs, 99).toFixed(0) : '–');
    process.stdout.write(
      `| load | stack | sent | served | 503 | other | client errors | served p50 ms | served p99 ms | 503 p99 ms |${viewed ? ' in the daemon: served p99 ms | 503 p99 ms | 503s from the queue (≥ 1 ms in the daemon): count, p99 ms |' : ''} the client's loop delay p99 / max ms, CPU | the daemon: connections a request, CPU ms a 1,000 sent | run-queue wait ms: daemon / nginx's workers | served after a queue wait > 200 / > 500 ms |\n|---|---|---|---|---|---|---|---|---|---|${viewed ? '---|---|---|' : ''}---|---|---|---|\n`,
    );
    for (const m of rates) {
      for (const s of sites) {
        const rate = Math.round(capacity * m);
        const before = s.daemon === undefined ? undefined : await daemonCost(s.daemon.pid, s.daemon.control);
        const nginxBefore = runQueueWaitMs(childPids(ngx.pid));
        const r = inline ? await openLoop(url(s), rate, seconds, timeoutMs, s.nginxFile !== undefined, nextId) : await openLoopApart(url(s), rate, seconds, timeoutMs, s.nginxFile !== undefined, nextId);
        onsetLines.push(`| ${m}× | ${s.name} | ${onsetCells(r)} |`);
        generator = `the load generator: ${inline ? "in the bench's process (--generator-inline)" : 'a process and session of its own'}, ${r.client.autogroup}`;
        nextId += r.sent;
        // Let the queues empty before the next window (and the access lines reach the file).
        await new Promise((res) => setTimeout(res, 2000));
        let cost = '–';
        const nginxWait = (runQueueWaitMs(childPids(ngx.pid)) - nginxBefore).toFixed(0);
        let waits = `– / ${nginxWait}`;
        let queued = '–';
        if (s.daemon !== undefined && before !== undefined) {
          const after = await daemonCost(s.daemon.pid, s.daemon.control);
          cost = `${((after.accepted - before.accepted) / r.sent).toFixed(2)}, ${((1e6 * (after.cpu - before.cpu)) / r.sent).toFixed(0)}`;
          waits = `${(after.waitMs - before.waitMs).toFixed(0)} / ${nginxWait}`;
          queued = `${after.queued200 - before.queued200} / ${after.queued500 - before.queued500}`;
        }
        let inside = viewed ? ' – | – | – |' : '';
        const daemonRows = fresh(s.accessFile);
        if (s.accessFile !== undefined) {
          const v = daemonView(daemonRows);
          inside = ` ${p99(v.served)} | ${p99(v.refused)} | ${v.queued.length} (${((100 * v.queued.length) / Math.max(1, v.refused.length)).toFixed(1)} %), ${p99(v.queued)} |`;
        }
        if (r.trace !== undefined) {
          const joined = joinHops(r.trace, fresh(s.nginxFile), daemonRows);
          hopLines.push(hopsTable(`${m}× ${s.name}`, joined));
          const dump = arg('--hops-dump', '');
          if (dump !== '') writeFileSync(`${dump}-${m}-${s.name}.json`, JSON.stringify(joined));
        }
        process.stdout.write(
          `| ${m}× (${rate}/s) | ${s.name} | ${r.sent} | ${r.served} | ${r.refused} | ${r.other} | ${r.errors}${r.errors > 0 ? ` (${Object.entries(r.errorKinds).map(([k, v]) => `${k} ${v}`).join(', ')})` : ''} | ${pct(r.servedMs, 50).toFixed(0)} | ${p99(r.servedMs)} | ${p99(r.refusedMs)} |${inside} ${r.client.loopP99.toFixed(0)} / ${r.client.loopMax.toFixed(0)}, ${r.client.cpu.toFixed(0)} % | ${cost} | ${waits} | ${queued} |\n`,
        );
      }
    }
    process.stdout.write(`(${generator})\n`);
    process.stdout.write(
      `\nThe onset: by when each request was due (ms from the window's first), served and 503s as "count: p99 ms" at the client\n| load | stack | ${ONSET_SPANS.map(([a, b]) => `${a}–${b === Infinity ? 'end' : b}: served / 503`).join(' | ')} |\n|---|---|${ONSET_SPANS.map(() => '---|').join('')}\n${onsetLines.join('\n')}\n`,
    );
    if (hopLines.length > 0) {
      process.stdout.write(
        `\nWhere the slowest requests' time went (--hops): medians over the requests at or past the p99 at the client, ms\n| window | class | requests | p99 at the client | past it | due → sent | sent → nginx's accept | accept → nginx's request | nginx's upstream connect | nginx's upstream header time | nginx → daemon | in the daemon | daemon → nginx | nginx → client |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n${hopLines.join('\n')}\n`,
      );
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
  const hops = process.argv.includes('--hops');
  const view = hops || process.argv.includes('--daemon-view');
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
          { name: 'fcgi-pm', port: await freePort(), kind: 'php', sock: fpm.sock, daemon: { pid: fpm.pid, control: fpm.control }, ...(accessFile === undefined ? {} : { accessFile }), ...(hops ? { nginxFile: join(dir, 'nginx-fcgi-pm.log') } : {}) },
          { name: 'php-fpm', port: await freePort(), kind: 'php', sock: peer.sock, ...(hops ? { nginxFile: join(dir, 'nginx-php-fpm.log') } : {}) },
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
