/**
 * The rows of the overload-as-users-expect-it table that are not open loops (those are
 * bench/overload.ts), each fcgi-pm beside PHP-FPM in the same run, through one nginx,
 * every server with its defaults for queueing:
 *
 *   closed     20 clients in a closed loop (each waits for its answer, kept-alive to
 *              nginx) on a pool of 4 workers of a 100 ms page: answers by status,
 *              latency p50/p99.
 *   noisy      a quiet pool (1 client, a small page) alone, then beside a noisy pool (30
 *              clients of a 20 ms CPU-bound page, from wrk), 4 workers each, one daemon
 *              (one php-fpm master): the quiet pool's p99 beside ÷ alone, and what the
 *              noisy pool was served; then where the quiet pool's requests waited for a
 *              CPU (run-queue wait per wakeup of nginx's worker, the daemon and the quiet
 *              workers, from /proc/PID/schedstat), the share of slow quiet requests at the
 *              client beside the share the daemon saw (its latency histogram: arrival to
 *              end), and where each process runs (its CPU cgroup, its autogroup). nginx, fcgi-pm and php-fpm each run in a session of
 *              their own, as services do (with autogroups each session is one entity the
 *              kernel shares the CPU between); the clients in one of their own too, raised
 *              above the servers as root (bench/load-generator.ts: users are on other
 *              machines); wrk, the noise, stays in this one. --variant
 *              "key: value" adds a second fcgi-pm whose pools have that key, or whose top
 *              level has it when it is a top-level key (an A/B of a setting in the same
 *              rounds: "busy_cpu_slice: 0", "daemon_cpu_weight: 0", "cpu_weight: 0").
 *   slowloris  a request head sent one byte every 0.5 s, header_timeout 3 s (nginx:
 *              client_header_timeout 3s): when each closes the connection, from the
 *              connect.
 *
 *   node dist/bench/fairness.js [--rows closed,noisy,slowloris] [--seconds 8] [--variant "cpu_weight: 0"]
 *       [--generator-inline] [--nginx-workers N] [--nginx-nice N] [--nginx-slice NS] [--noisy-pools N] [--noisy-nap]
 *       [--variant "key: value" --quiet-slice NS]
 *
 * --nginx-workers N, --nginx-nice N and --nginx-slice NS (the noisy row) are the A/Bs of
 * where the quiet request waits in the web server both stacks share: N worker processes
 * instead of 1; the autogroup of nginx's session at nice N instead of 0 (as root; what an
 * operator sets with the service's CPU weight); its processes' CPU slice NS ns (EEVDF custom
 * slices, Linux 6.12+, through fcgi-pm's addon; an operator's `chrt --other -T NS`, util-linux
 * 2.41+): whether a quiet request's wake-ups of nginx wait behind the noisy pool's workers
 * for their weight (nginx not yet eligible) or for their slice. --noisy-pools N puts N
 * noisy pools (30 clients each) beside the quiet one: N busy pools' cgroups at the v1 root
 * weigh N sessions beside nginx's one (one parent for them was tried on 2026-12-03 and
 * backed out: the quiet pool then waited for the parent's turn; docs/BENCHMARKS.md).
 * --noisy-nap has the noisy pool's page sleep its 20 ms instead of spinning: the daemon
 * relays the same traffic (30 clients queued on 4 workers, about 200 req/s) while the CPU
 * stays free, so the quiet pool's tail beside it is what the daemon's own work for the
 * noisy pool costs it (its event-loop turns, dispatch order), apart from the workers' CPU.
 * --quiet-slice NS gives the quiet pool's workers of the --variant stack a CPU slice of NS
 * ns, set from outside (100000: the shortest, as daemon_short_slice gives the daemon):
 * whether a quiet worker, woken on a CPU that a task with the kernel's default slice holds
 * (nginx, wrk, another service), waits for that slice or a tick (a waking task with a
 * shorter slice takes the CPU at once; the noisy workers' busy_cpu_slice is longer anyway).
 * Pass a --variant that changes nothing ("busy_cpu_slice: 10ms") to compare the slice alone.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { start, stopAll, waitReady, type Started } from './compare-procs.js';
import { findPhpFpm, REPO, runNginx } from './compare-stacks.js';
import { runWrk } from './compare-wrk.js';
import { freePort, machineLine } from './django.js';
import { childPids, processTree } from '../src/bench/proc-info.js';
import { controlRequest } from '../src/control/client.js';
import { LATENCY_BOUNDS_MS } from '../src/control/outcomes.js';
import type { Histogram, StatusSnapshot } from '../src/control/types.js';
import { TOP_KEYS } from '../src/config/keys.js';
import { closedLoop, closedLoopApart, type ClosedLoopResult } from './load-generator.js';
import { readSlice, setSlice } from '../src/memory/cpu-slice.js';
import { pct } from './overload.js';

/** The clients in a process and session of their own, or (--generator-inline, the A/B of that placement) in this one, as before 2026-12-03. */
const clients = process.argv.includes('--generator-inline') ? closedLoop : closedLoopApart;

/** The noisy pool's page: its 20 ms spun on the CPU, or (--noisy-nap) slept, which leaves the daemon the same traffic to relay without the workers' CPU. */
const noisyPage = process.argv.includes('--noisy-nap') ? 'nap.php' : 'cpu.php';

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1]! : def;
}

const PAGES: Record<string, string> = {
  'sleep.php': '<?php usleep(100000); echo "slept\\n";',
  'cpu.php': '<?php $t = hrtime(true) + 20000000; $x = 0; while (hrtime(true) < $t) { $x++; } echo "spun $x\\n";',
  'nap.php': '<?php usleep(20000); echo "napped\\n";',
  'small.php': '<?php echo "hello\\n";',
};

interface Pool {
  name: string;
  workers: number;
}

/** Marks a php-cgi worker's command line with its pool, so the bench finds it in /proc (php-fpm titles its own "php-fpm: pool NAME"). */
const POOL_MARK = 'fcgipm_bench.pool';

/**
 * One fcgi-pm with a FastCGI Unix listener per pool, pm static, every queue key at its
 * default (`keys`: pool keys added, "key: value"). `service`: in a session of its own.
 */
async function startFcgiPm(dir: string, pools: Pool[], keys: string[] = [], service = false): Promise<{ proc: Started; socks: Map<string, string>; control: string }> {
  mkdirSync(dir, { recursive: true });
  const socks = new Map(pools.map((p) => [p.name, join(dir, `${p.name}.sock`)]));
  const listen = pools.map((p) => `  - { protocol: fastcgi, address: "unix:${socks.get(p.name)}", pool: ${p.name} }`).join('\n');
  // A key of the top level (daemon_cpu_weight) goes there, any other to every pool.
  const top = new Set(TOP_KEYS.map((k) => k.key));
  const isTop = (k: string): boolean => top.has(k.slice(0, k.indexOf(':')).trim());
  const body = pools
    .map((p) => `  ${p.name}:\n    command: [/usr/bin/php-cgi, -d, "${POOL_MARK}=${p.name}"]\n    pm: static\n    max_children: ${p.workers}\n${keys.filter((k) => !isTop(k)).map((k) => `    ${k}\n`).join('')}`)
    .join('');
  writeFileSync(join(dir, 'fcgi-pm.yaml'), `listen:\n${listen}\npools:\n${body}${keys.filter(isTop).map((k) => `${k}\n`).join('')}log: { level: warn, access: false }\nruntime_dir: ${dir}\ncontrol_socket: ${dir}/control.sock\n`);
  const proc = start('fcgi-pm', join(REPO, 'bin', 'fcgi-pm'), ['run', '-c', join(dir, 'fcgi-pm.yaml'), '--allow-root'], { cwd: dir, detached: service });
  for (const s of socks.values()) await waitReady('fcgi-pm', { path: s }, proc);
  return { proc, socks, control: join(dir, 'control.sock') };
}

/** A pool's latency histogram (arrival to end, as the daemon saw it), from the status; undefined without a daemon. */
async function daemonLatency(control: string | undefined, pool: string): Promise<Histogram | undefined> {
  if (control === undefined) return undefined;
  const c = await controlRequest(control, { cmd: 'status' }, 10_000);
  c.end();
  if (!c.response.ok) throw new Error(`status: ${JSON.stringify(c.response.error)}`);
  const latency = (c.response.result as StatusSnapshot).pools.find((p) => p.name === pool)?.outcomes?.latency;
  // A pool that has finished nothing yet has no histogram: all zeros.
  return latency ?? { boundsMs: [...LATENCY_BOUNDS_MS], counts: new Array<number>(LATENCY_BOUNDS_MS.length + 1).fill(0), sumMs: 0 };
}

/** Share of the requests counted between two histograms that took longer than `ms` (a bound of the histogram), as "n.n %". */
function tailShare(a: Histogram | undefined, b: Histogram | undefined, ms: number): string {
  if (a === undefined || b === undefined) return '–';
  const d = b.counts.map((n, i) => n - a.counts[i]!);
  const total = d.reduce((x, y) => x + y, 0);
  const over = d.slice(b.boundsMs.indexOf(ms) + 1).reduce((x, y) => x + y, 0);
  return total === 0 ? '–' : `${((100 * over) / total).toFixed(1)} %`;
}

/** Share of `ms` longer than `limit`, as "n.n %". */
function overShare(ms: number[], limit: number): string {
  return ms.length === 0 ? '–' : `${((100 * ms.filter((v) => v > limit).length) / ms.length).toFixed(1)} %`;
}

/** One php-fpm master with a pool per entry, pm static, listen.backlog at its default (php-fpm makes a session of its own). */
async function startFpm(dir: string, pools: Pool[]): Promise<{ proc: Started; socks: Map<string, string> }> {
  mkdirSync(dir, { recursive: true });
  const root = process.getuid?.() === 0;
  const socks = new Map(pools.map((p) => [p.name, join(dir, `${p.name}.sock`)]));
  const conf = `[global]\npid = ${dir}/fpm.pid\nerror_log = ${dir}/fpm-error.log\ndaemonize = no\n` +
    pools.map((p) => `[${p.name}]\n${root ? 'user = root\n' : ''}listen = ${socks.get(p.name)}\npm = static\npm.max_children = ${p.workers}\n`).join('');
  writeFileSync(join(dir, 'php-fpm.conf'), conf);
  const proc = start('php-fpm', findPhpFpm(), ['-F', '-y', join(dir, 'php-fpm.conf'), '-p', dir, ...(root ? ['-R'] : [])], {}, 'SIGTERM');
  for (const s of socks.values()) await waitReady('php-fpm', { path: s }, proc);
  return { proc, socks };
}

/** nginx with one server per (stack, pool), each passing *.php to that pool's socket. `service`: in a session of its own. */
async function startFront(dir: string, doc: string, routes: Array<{ port: number; sock: string }>, service = false): Promise<Started> {
  const blocks = routes.map(
    (r, i) => `upstream u${i} { server unix:${r.sock}; }
  server { listen 127.0.0.1:${r.port} backlog=4096; root ${doc};
    location ~ \\.php$ { include /etc/nginx/fastcgi_params; fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name; fastcgi_pass u${i}; } }`,
  );
  const ngx = await runNginx(dir, blocks, routes.map((r) => r.port), { detached: service }, Number(arg('--nginx-workers', '1')));
  const nice = arg('--nginx-nice', '');
  // nginx leads its session (detached): its autogroup is its own, shared by its workers.
  if (service && nice !== '') writeFileSync(`/proc/${ngx.pid}/autogroup`, nice);
  return ngx;
}

function statusText(r: ClosedLoopResult): string {
  return Object.entries(r.statuses).map(([s, n]) => `${n} × ${s}`).join(', ') + (r.errors > 0 ? `, ${r.errors} client errors` : '');
}

async function rowClosed(dir: string, doc: string, seconds: number): Promise<void> {
  const pools = [{ name: 'app', workers: 4 }];
  const fpm = await startFpm(join(dir, 'fpm-closed'), pools);
  const ours = await startFcgiPm(join(dir, 'ours-closed'), pools);
  const [pf, po] = [await freePort(), await freePort()];
  const ngx = await startFront(join(dir, 'nginx-closed'), doc, [{ port: pf, sock: fpm.socks.get('app')! }, { port: po, sock: ours.socks.get('app')! }]);
  process.stdout.write(`\nclosed loop: 20 clients (kept-alive to nginx) on 4 workers of a 100 ms page, ${seconds} s each, windows interleaved; ${machineLine()}\n`);
  process.stdout.write('| stack | answers | req/s | p50 ms | p99 ms |\n|---|---|---|---|---|\n');
  for (let round = 0; round < 2; round++) {
    for (const [name, port] of [['php-fpm', pf], ['fcgi-pm', po]] as const) {
      const r = await clients(`http://127.0.0.1:${port}/sleep.php`, 20, seconds);
      process.stdout.write(`| ${name} | ${statusText(r)} | ${(r.ms.length / seconds).toFixed(1)} | ${pct(r.ms, 50).toFixed(0)} | ${pct(r.ms, 99).toFixed(0)} |\n`);
    }
  }
  await ngx.stop();
  await fpm.proc.stop();
  await ours.proc.stop();
}

/** A thread's CPU time and run-queue wait (ns) and its time slices, from /proc/PID/schedstat. */
interface Sched {
  runNs: number;
  waitNs: number;
  slices: number;
}

function schedOf(pids: number[]): Sched {
  const t: Sched = { runNs: 0, waitNs: 0, slices: 0 };
  for (const pid of pids) {
    try {
      const [run, wait, n] = readFileSync(`/proc/${pid}/schedstat`, 'utf8').trim().split(' ').map(Number);
      t.runNs += run!;
      t.waitNs += wait!;
      t.slices += n!;
    } catch {
      // gone
    }
  }
  return t;
}

/** Run-queue wait per slice (µs) and CPU (s) between two readings. */
function schedDelta(a: Sched, b: Sched): { waitUs: number; cpuS: number } {
  return { waitUs: (b.waitNs - a.waitNs) / Math.max(1, b.slices - a.slices) / 1000, cpuS: (b.runNs - a.runNs) / 1e9 };
}

/** The processes of one stack the quiet pool's requests pass through, and the noisy pool's workers. */
interface StackPids {
  daemon: number | undefined;
  quiet: number[];
  noisy: number[];
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
}

/** Workers found by command line: fcgi-pm's php-cgi carry POOL_MARK, php-fpm's are titled "php-fpm: pool NAME". */
function stackPids(root: number, daemon: boolean): StackPids {
  const tree = processTree(root).slice(1);
  const of = (pool: string): number[] => tree.filter((p) => cmdline(p).includes(`${POOL_MARK}=${pool}`) || cmdline(p).startsWith(`php-fpm: pool ${pool}`));
  return { daemon: daemon ? root : undefined, quiet: of('quiet'), noisy: of('noisy') };
}

/** Where a process runs, as the scheduler sees it: its CPU cgroup (v1 cpu, else v2) and its autogroup with its nice. */
function placement(pid: number | undefined): string {
  if (pid === undefined) return '–';
  try {
    const cg = readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n');
    const cpu = cg.find((l) => /^\d+:([^:]*,)?cpu(,[^:]*)?:/.test(l)) ?? cg.find((l) => l.startsWith('0::'));
    let auto = '';
    try {
      auto = readFileSync(`/proc/${pid}/autogroup`, 'utf8').trim();
    } catch {
      // no autogroups on this kernel
    }
    return `${cpu?.slice(cpu.lastIndexOf(':') + 1) ?? '?'}${auto ? ` ${auto}` : ''}`;
  } catch {
    return '?';
  }
}

async function rowNoisy(dir: string, doc: string, seconds: number, variant: string | undefined): Promise<void> {
  // --noisy-pools N: N noisy pools (noisy, noisy2, ...), 30 clients each: whether N busy pools weigh N services beside nginx's.
  const noisyNames = Array.from({ length: Number(arg('--noisy-pools', '1')) }, (_, k) => (k === 0 ? 'noisy' : `noisy${k + 1}`));
  const pools = [{ name: 'quiet', workers: 4 }, ...noisyNames.map((name) => ({ name, workers: 4 }))];
  const fpm = await startFpm(join(dir, 'fpm-noisy'), pools);
  const ours = await startFcgiPm(join(dir, 'ours-noisy'), pools, [], true);
  const alt = variant === undefined ? undefined : await startFcgiPm(join(dir, 'alt-noisy'), pools, [variant], true);
  const stacks = [
    { name: 'php-fpm', s: fpm, daemon: false },
    { name: 'fcgi-pm', s: ours, daemon: true },
    ...(alt === undefined ? [] : [{ name: `fcgi-pm (${variant})`, s: alt, daemon: true }]),
  ];
  const ports = await Promise.all(stacks.map(async () => ({ quiet: await freePort(), noisy: await Promise.all(noisyNames.map(() => freePort())) })));
  const ngx = await startFront(
    join(dir, 'nginx-noisy'),
    doc,
    stacks.flatMap((st, i) => [
      { port: ports[i]!.quiet, sock: st.s.socks.get('quiet')! },
      ...noisyNames.map((n, k) => ({ port: ports[i]!.noisy[k]!, sock: st.s.socks.get(n)! })),
    ]),
    true,
  );
  // nginx's master listens before its workers are forked: wait for them, or the run-queue
  // waits of nginx read 0 (as in a run of 2026-12-03).
  let ngxWorkers = childPids(ngx.pid);
  for (let tries = 0; ngxWorkers.length < Number(arg('--nginx-workers', '1')) && tries < 50; tries++) {
    await new Promise((r) => setTimeout(r, 20));
    ngxWorkers = childPids(ngx.pid);
  }
  const slice = arg('--nginx-slice', '');
  if (slice !== '') {
    const err = setSlice(ngx.pid, Number(slice));
    if (err !== undefined) throw new Error(`--nginx-slice: ${err}`);
  }
  const pids = stacks.map((st) => stackPids(st.s.proc.pid, st.daemon));
  const quietSlice = arg('--quiet-slice', '');
  if (quietSlice !== '') {
    if (alt === undefined) throw new Error('--quiet-slice: with --variant only (its stack is the one changed)');
    for (const pid of pids[2]!.quiet) {
      const err = setSlice(pid, Number(quietSlice));
      if (err !== undefined) throw new Error(`--quiet-slice: ${err}`);
    }
  }
  process.stdout.write(`\nnoisy neighbour: quiet pool (1 client, small page) alone, then beside ${noisyNames.length === 1 ? 'a noisy pool' : `${noisyNames.length} noisy pools`} (30 clients each of a 20 ms CPU-bound page), 4 workers each, ${seconds} s windows; ${machineLine()}\n`);
  process.stdout.write('where each runs (CPU cgroup, autogroup and its nice): ' + `nginx worker${ngxWorkers.length > 1 ? `s (${ngxWorkers.length})` : ''} ${placement(ngxWorkers[0])}${slice !== '' ? ` slice ${readSlice(ngxWorkers[0]!) ?? '?'} ns` : ''}; ` + stacks.map((st, i) => `${st.name}: daemon ${placement(pids[i]!.daemon)}, quiet ${placement(pids[i]!.quiet[0])}${quietSlice !== '' ? ` slice ${readSlice(pids[i]!.quiet[0]!) ?? '?'} ns` : ''}, noisy ${placement(pids[i]!.noisy[0])}`).join('; ') + '\n');
  process.stdout.write('| stack | quiet p99 alone ms | quiet p99 beside ms | ratio | noisy served req/s | noisy answers |\n|---|---|---|---|---|---|\n');
  const waits: string[] = [];
  let quietClient = '';
  const us = (n: number | undefined): string => (n === undefined ? '–' : n.toFixed(0));
  for (let round = 0; round < 2; round++) {
    for (let i = 0; i < stacks.length; i++) {
      const st = stacks[i]!;
      const p = ports[i]!;
      const quietUrl = `http://127.0.0.1:${p.quiet}/small.php`;
      const readAll = (): Sched[] => [schedOf(ngxWorkers), schedOf(pids[i]!.daemon === undefined ? [] : [pids[i]!.daemon!]), schedOf(pids[i]!.quiet), schedOf(pids[i]!.noisy)];
      const control = 'control' in st.s ? (st.s.control as string) : undefined;
      const h0 = await daemonLatency(control, 'quiet');
      const s0 = readAll();
      const alone = await clients(quietUrl, 1, seconds);
      quietClient = alone.client.autogroup;
      const s1 = readAll();
      const h1 = await daemonLatency(control, 'quiet');
      // The noise from wrk, a process of its own: timed in the quiet client's, its answers
      // would wait behind the event loop's handling of 30 noisy ones.
      const [beside, ...noises] = await Promise.all([clients(quietUrl, 1, seconds), ...p.noisy.map((port) => runWrk(`http://127.0.0.1:${port}/${noisyPage}`, 30, seconds))]);
      const noise = noises.reduce((x, y) => ({ ...x, requests: x.requests + y.requests, non2xx: x.non2xx + y.non2xx, errors: x.errors + y.errors }));
      const s2 = readAll();
      const h2 = await daemonLatency(control, 'quiet');
      const a = pct(alone.ms, 99);
      const b = pct(beside.ms, 99);
      const answers = `${noise.requests - noise.non2xx} × 200${noise.non2xx > 0 ? `, ${noise.non2xx} other` : ''}${noise.errors > 0 ? `, ${noise.errors} socket errors` : ''}`;
      process.stdout.write(`| ${st.name} | ${a.toFixed(1)} | ${b.toFixed(1)} | ${(b / a).toFixed(1)}× | ${((noise.requests - noise.non2xx) / seconds).toFixed(0)} | ${answers} |\n`);
      for (const [w, x, y, ms, ha, hb] of [['alone', s0, s1, alone.ms, h0, h1], ['beside', s1, s2, beside.ms, h1, h2]] as const) {
        const d = x.map((v, k) => schedDelta(v, y[k]!));
        const daemon = st.daemon ? d[1] : undefined;
        waits.push(`| ${st.name} | ${w} | ${pct(ms, 50).toFixed(2)} / ${pct(ms, 99).toFixed(1)} | ${overShare(ms, 2)} / ${tailShare(ha, hb, 2)} | ${overShare(ms, 5)} / ${tailShare(ha, hb, 5)} | ${us(d[0]!.waitUs)} / ${us(daemon?.waitUs)} / ${us(d[2]!.waitUs)} | ${daemon === undefined ? '–' : daemon.cpuS.toFixed(2)} / ${d[2]!.cpuS.toFixed(2)} / ${d[3]!.cpuS.toFixed(2)} |`);
      }
    }
  }
  process.stdout.write('\nwhere the quiet requests waited: the share over 2 ms and over 5 ms at the client and inside fcgi-pm (from its arrival to its end: the daemon and the worker; the rest is nginx, the client and the sockets between); run-queue wait per wakeup (/proc/PID/schedstat) of nginx\'s worker, the daemon and the quiet pool\'s workers; CPU used in the window\n');
  process.stdout.write('| stack | window | quiet p50 / p99 ms | > 2 ms: client / inside | > 5 ms: client / inside | wait µs: nginx / daemon / quiet workers | CPU s: daemon / quiet / noisy workers |\n|---|---|---|---|---|---|---|\n');
  process.stdout.write(waits.join('\n') + '\n');
  process.stdout.write(`(the quiet client: ${clients === closedLoop ? "in the bench's process (--generator-inline)" : 'a process and session of its own'}, ${quietClient})\n`);
  await ngx.stop();
  await fpm.proc.stop();
  await ours.proc.stop();
  await alt?.proc.stop();
}

/** Connects, sends `head` one byte every `gapMs`; resolves with ms from connect to close (or to giving up). */
function trickle(port: number, head: Buffer, gapMs: number, giveUpMs: number): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let t0 = 0;
    let i = 0;
    let timer: NodeJS.Timeout | undefined;
    const giveUp = setTimeout(() => {
      s.destroy();
      resolve(`open after ${giveUpMs} ms`);
    }, giveUpMs);
    s.on('connect', () => {
      t0 = performance.now();
      timer = setInterval(() => i < head.length && s.write(head.subarray(i, ++i)), gapMs);
    });
    s.on('data', () => {});
    s.on('error', () => {});
    s.on('close', () => {
      clearInterval(timer);
      clearTimeout(giveUp);
      resolve(`${((performance.now() - t0) / 1000).toFixed(2)} s`);
    });
  });
}

async function rowSlowloris(dir: string, doc: string): Promise<void> {
  const d = join(dir, 'ours-slow');
  mkdirSync(d, { recursive: true });
  const [httpPort, fcgiPort, scgiPort, ngxPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const t = 'header_timeout: 3s';
  writeFileSync(
    join(d, 'fcgi-pm.yaml'),
    `listen:
  - { protocol: http, address: 127.0.0.1:${httpPort}, pool: app, document_root: ${doc}, ${t} }
  - { protocol: fastcgi, address: 127.0.0.1:${fcgiPort}, pool: app, ${t} }
  - { protocol: scgi, address: 127.0.0.1:${scgiPort}, pool: app, ${t} }
pools:
  app: { command: [/usr/bin/php-cgi], pm: ondemand, max_children: 1 }
log: { level: error }
runtime_dir: ${d}
control_socket: ${d}/control.sock
`,
  );
  const ours = start('fcgi-pm', join(REPO, 'bin', 'fcgi-pm'), ['run', '-c', join(d, 'fcgi-pm.yaml'), '--allow-root'], { cwd: d });
  await waitReady('fcgi-pm', { port: httpPort }, ours);
  const ngxDir = join(dir, 'nginx-slow');
  const ngx = await runNginx(ngxDir, [`server { listen 127.0.0.1:${ngxPort}; client_header_timeout 3s; root ${doc}; }`], [ngxPort]);
  const httpHead = Buffer.from(`GET /small.php HTTP/1.1\r\nHost: x\r\nX-Slow: ${'a'.repeat(40)}\r\n\r\n`, 'latin1');
  // FastCGI: BEGIN_REQUEST then a PARAMS record header, one byte at a time; SCGI: a netstring's head.
  const fcgiHead = Buffer.from('01010001000800000001000000000000010400010040000000', 'hex');
  const scgiHead = Buffer.from('100:CONTENT_LENGTH\u00000\u0000SCGI\u00001\u0000', 'latin1');
  process.stdout.write(`\nslowloris: a head sent one byte every 0.5 s, header_timeout 3 s; closed at, from the connect; ${machineLine()}\n`);
  process.stdout.write('| server | closed at |\n|---|---|\n');
  const rows = await Promise.all([
    trickle(ngxPort, httpHead, 500, 15_000).then((v) => `| nginx (client_header_timeout 3s) | ${v} |`),
    trickle(httpPort, httpHead, 500, 15_000).then((v) => `| fcgi-pm HTTP listener | ${v} |`),
    trickle(fcgiPort, fcgiHead, 500, 15_000).then((v) => `| fcgi-pm FastCGI listener | ${v} |`),
    trickle(scgiPort, scgiHead, 500, 15_000).then((v) => `| fcgi-pm SCGI listener | ${v} |`),
  ]);
  process.stdout.write(rows.join('\n') + '\n');
  await ngx.stop();
  await ours.stop();
}

async function main(): Promise<void> {
  const rows = arg('--rows', 'closed,noisy,slowloris').split(',');
  const seconds = Number(arg('--seconds', '8'));
  const dir = mkdtempSync(join(tmpdir(), 'fcgipm-fair-'));
  const doc = join(dir, 'doc');
  mkdirSync(doc);
  for (const [f, src] of Object.entries(PAGES)) writeFileSync(join(doc, f), src);
  try {
    if (rows.includes('closed')) await rowClosed(dir, doc, seconds);
    if (rows.includes('noisy')) await rowNoisy(dir, doc, seconds, process.argv.includes('--variant') ? arg('--variant', '') : undefined);
    if (rows.includes('slowloris')) await rowSlowloris(dir, doc);
  } finally {
    await stopAll();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch(async (err) => {
  process.stderr.write(`${(err as Error).stack ?? err}\n`);
  await stopAll();
  process.exit(1);
});
