/**
 * Side-by-side benchmark, interleaved so that ratios hold on a noisy machine: every
 * stack runs the same page at the same concurrency one after the other, round after
 * round (A B C D, A B C D, ...), with the starting stack rotated each round.
 *
 *   bench/compare.sh [--quick] [--rounds N] [--seconds S] [--workers 2,4] [--concurrency 10,50]
 *                    [--pages p100,p8750] [--stacks fcgipm,floor,fpm] [--only throughput,cold] [--cold-samples N] [--overload-seconds S]
 *                    [--baseline DIR] [--out FILE.md] [--json FILE]
 *
 * Stacks, at each worker count W:
 *   fcgipm    nginx → fcgi-pm → php-cgi (nginx keeps FastCGI connections: fastcgi_keep_conn);
 *             fcgi-pm started as operators start it, bin/fcgi-pm run (its heap flags)
 *   floor     nginx → bench/relay-floor → php-cgi: the least a relay can do (kept-alive
 *             php-cgi, bytes forwarded as read); fcgi-pm's honest limit on this machine
 *   fpm       nginx → php-fpm, pm static, W workers (new connection per request, the usual setup)
 *   spawn     nginx → spawn-fcgi, W php-cgi processes on one socket
 *   http      fcgi-pm's own HTTP listener → php-cgi (no nginx)
 *   direct    nginx → fcgi-pm accept: direct as docs/direct.md configures it (php-cgi accepts on
 *             the pool's socket; default backlog 511, max_requests 10000; the overflow listener
 *             as nginx's backup)
 *   direct511 (the name kept for scripts) the same with direct_backlog = max_children
 *   The direct-vs-php-fpm figures (issue targets): --stacks fpm,direct,direct511 --workers 2,4
 *   --concurrency 10,50 --pages p100,p8750; the closed loop: --stacks fpm,direct --workers 4
 *   --concurrency 20 --pages sleep100 (wrk's 20 connections are 20 clients in a closed loop).
 *   fcgipm-nk nginx → fcgi-pm without keep-alive (full runs only, or named in --stacks)
 *   floor-nk  nginx → relay floor without keep-alive: what a new connection per request costs
 *             a relay in Node (named in --stacks only)
 *   base, base-nk  the fcgipm and fcgipm-nk stacks run from another built checkout (--baseline
 *             DIR, e.g. `git worktree add /tmp/before COMMIT` then `npx tsc -p .` there): a
 *             before/after comparison of two builds within one interleaved run
 * Then: idle front-end connections and the daemon's memory, an overload run at twice
 * the measured capacity (fcgi-pm bench --rate), and cold start after scale-to-zero.
 * The HTTP load comes from wrk (-t1). php-fpm runs with its own config in a temp dir.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { buildReport, type BenchReport } from '../src/bench/report.js';
import { runBench, type BenchOptions } from '../src/bench/runner.js';
import { parseTarget } from '../src/bench/target.js';
import { childPids, cpuSeconds, rssAnon } from '../src/bench/proc-info.js';
import { listenFd0 } from '../src/worker/socket.js';
import { freePort, sleep, stopAll, track, untrack } from './compare-procs.js';
import { findPhpFpm, startFcgiPm, startFloor, startNginx, startPhpFpm, startSpawnFcgi, writePages, nginxErrors, type Server } from './compare-stacks.js';
import { runWrk, type WrkResult } from './compare-wrk.js';

// ---- options ----

interface Args {
  quick: boolean;
  rounds: number;
  seconds: number;
  workers: number[];
  concurrency: number[];
  out: string | undefined;
  json: string | undefined;
  coldSamples: number;
  overloadSeconds: number;
  /** Sections to run: throughput (with idle memory and overload) and cold. */
  only: Set<string>;
  pages: string[];
  /** Stack keys to run (default: all). */
  stacks: string[] | undefined;
  /** A built checkout whose fcgi-pm runs as the base stacks. */
  baseline: string | undefined;
}

function parseArgs(argv: string[]): Args {
  const get = (name: string): string | undefined => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const quick = argv.includes('--quick');
  const list = (s: string | undefined, d: number[]): number[] => (s === undefined ? d : s.split(',').map(Number));
  return {
    quick,
    rounds: Number(get('--rounds') ?? (quick ? 2 : 3)),
    seconds: Number(get('--seconds') ?? (quick ? 2 : 5)),
    workers: list(get('--workers'), [2, 4]),
    concurrency: list(get('--concurrency'), [10, 50]),
    out: get('--out'),
    json: get('--json'),
    coldSamples: Number(get('--cold-samples') ?? (quick ? 5 : 9)),
    overloadSeconds: Number(get('--overload-seconds') ?? (quick ? 8 : 15)),
    only: new Set((get('--only') ?? 'throughput,cold').split(',')),
    stacks: get('--stacks')?.split(','),
    baseline: get('--baseline'),
    pages: (get('--pages')?.split(',') ?? DEFAULT_PAGES).map((p) => (p.endsWith('.php') ? p : `${p}.php`)),
  };
}

// ---- helpers ----

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

const log = (s: string): void => {
  process.stderr.write(`${s}\n`);
};

function machine(): Record<string, string> {
  const cpuinfo = readFileSync('/proc/cpuinfo', 'utf8');
  const model = /^model name\s*:\s*(.*)$/m.exec(cpuinfo)?.[1] ?? cpus()[0]?.model ?? 'unknown';
  const ver = (cmd: string, args: string[], re: RegExp): string => {
    // Some print their version on stderr, wrk exits 1 after printing it.
    const r = spawnSync(cmd, args, { encoding: 'utf8' });
    return re.exec(`${r.stdout ?? ''}${r.stderr ?? ''}`)?.[1] ?? '?';
  };
  return {
    date: new Date().toISOString(),
    nproc: String(cpus().length),
    cpu: model,
    ram: `${(totalmem() / 1024 ** 3).toFixed(1)} GiB`,
    kernel: readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim(),
    node: process.version,
    nginx: ver('/usr/sbin/nginx', ['-v'], /nginx\/([\d.]+)/),
    php: ver('/usr/bin/php-cgi', ['-v'], /PHP ([\d.]+)/),
    'php-fpm': ver(findPhpFpm(), ['-v'], /PHP ([\d.]+)/),
    wrk: ver('wrk', ['-v'], /wrk (\S+)/),
    load: loadAvg(),
  };
}

/** The 1-minute load average: other work on the machine skews absolute numbers (ratios hold better). */
function loadAvg(): string {
  return readFileSync('/proc/loadavg', 'utf8').split(' ')[0]!;
}

// ---- measurements ----

interface Stack {
  key: string;
  label: string;
  url: string;
  /** fcgi-pm's pid for CPU and memory, when the stack runs through it. */
  daemonPid: number | undefined;
}

interface Sample extends WrkResult {
  workers: number;
  page: string;
  concurrency: number;
  stack: string;
  round: number;
  cpuSeconds: number | undefined;
  rssAnon: number | undefined;
}

/** sleep100 (the closed-loop latency case: --workers 4 --concurrency 20 --pages sleep100) runs when named. */
const ALL_PAGES = ['p100.php', 'p8750.php', 'sleep50.php', 'sleep100.php'];
const DEFAULT_PAGES = ['p100.php', 'p8750.php', 'sleep50.php'];
let PAGES = DEFAULT_PAGES;
const PAGE_LABEL: Record<string, string> = { 'p100.php': '100 B', 'p8750.php': '8,750 B', 'sleep50.php': 'sleep 50 ms', 'sleep100.php': 'sleep 100 ms' };

async function measure(stack: Stack, page: string, c: number, seconds: number, wrk: typeof runWrk): Promise<{ r: WrkResult; cpu: number | undefined; anon: number | undefined }> {
  const pid = stack.daemonPid;
  const before = pid === undefined ? undefined : cpuSeconds(pid);
  const r = await wrk(`${stack.url}/${page}`, c, seconds);
  const after = pid === undefined ? undefined : cpuSeconds(pid);
  const cpu = before !== undefined && after !== undefined ? after - before : undefined;
  return { r, cpu, anon: pid === undefined ? undefined : rssAnon(pid) };
}

interface IdleResult {
  fresh: number | undefined;
  afterRuns: number | undefined;
  withIdle: number | undefined;
  connections: number;
}

/** RssAnon of the daemon with `n` idle FastCGI connections open (what nginx's keepalive pool holds). */
async function idleConnections(pid: number, sock: string, n: number): Promise<{ anon: number | undefined; open: number }> {
  const socks: Socket[] = [];
  let open = 0;
  await Promise.all(
    Array.from({ length: n }, () =>
      new Promise<void>((resolve) => {
        const s = connect(sock);
        socks.push(s);
        s.once('connect', () => {
          open++;
          resolve();
        });
        s.once('error', () => resolve());
      }),
    ),
  );
  await sleep(1000);
  const anon = rssAnon(pid);
  for (const s of socks) s.destroy();
  return { anon, open };
}

interface OverloadResult {
  stack: string;
  rate: number;
  report: BenchReport;
}

async function overload(label: string, url: string, rate: number, seconds: number): Promise<OverloadResult> {
  const opts: BenchOptions = {
    target: parseTarget(url),
    request: { method: 'GET', body: undefined, headers: [], params: [], keepAlive: true },
    concurrency: 4096,
    rate,
    durationMs: seconds * 1000,
    timeoutMs: 120_000,
  };
  const report = buildReport(opts, await runBench(opts));
  return { stack: label, rate, report };
}

interface ColdResult {
  label: string;
  samplesMs: number[];
  /** From the request's start to the first worker process existing (servers only). */
  spawnMs?: number[];
  /** From the reply to the last worker gone (idle_timeout 1 s; servers only). */
  idleStopMs?: number[];
}

/** Children of `pid` forked by its main thread (cheap enough to poll in a loop, unlike a /proc scan). */
function mainThreadChildren(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'latin1').trim();
  } catch {
    return '';
  }
}

/** Polls until `pred` holds, yielding to the event loop between polls; ms it took from `t0`. */
async function pollUntil(pred: () => boolean, t0: number, timeoutMs: number): Promise<number | undefined> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    if (pred()) return performance.now() - t0;
    await new Promise((r) => setImmediate(r));
  }
  return undefined;
}

/** Bare php-cgi: spawn it on a fresh socket (fd 0, as fcgi-pm does) and time the first reply. */
async function coldBare(dir: string, doc: string, samples: number): Promise<ColdResult> {
  const out: number[] = [];
  for (let i = 0; i < samples; i++) {
    const l = await listenFd0(dir, `bare${i}`);
    const t0 = performance.now();
    const child = spawn('/usr/bin/php-cgi', [], {
      stdio: [l.fd, 'ignore', 'ignore'],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', PHP_FCGI_CHILDREN: '0', PHP_FCGI_MAX_REQUESTS: '0' },
    });
    l.handOff();
    if (child.pid !== undefined) track(child.pid, 'php-cgi (bare)');
    const r = await firstReply(`fcgi://unix:${l.path}:/p100.php`, doc);
    out.push(performance.now() - t0);
    if (r.status['2xx'] !== 1) throw new Error(`bare php-cgi did not answer 200: ${JSON.stringify(r.status)} ${JSON.stringify(r.errors)}`);
    if (child.pid !== undefined) {
      child.kill('SIGKILL');
      untrack(child.pid);
    }
    await sleep(200);
  }
  return { label: 'bare php-cgi: spawn + first reply', samplesMs: out };
}

async function firstReply(url: string, doc: string): Promise<BenchReport> {
  const opts: BenchOptions = {
    target: parseTarget(url),
    request: { method: 'GET', body: undefined, headers: [], params: [['DOCUMENT_ROOT', doc]], keepAlive: false },
    concurrency: 1,
    requests: 1,
    timeoutMs: 30_000,
  };
  return buildReport(opts, await runBench(opts));
}

/** A server with zero workers: time the first request, wait for scale-to-zero, repeat. */
async function coldServer(label: string, server: Server, doc: string, samples: number): Promise<ColdResult> {
  const out: number[] = [];
  const spawnMs: number[] = [];
  const idleStopMs: number[] = [];
  for (let i = 0; i < samples; i++) {
    const deadline = Date.now() + 20_000;
    while (childPids(server.pid).length > 0) {
      if (Date.now() > deadline) throw new Error(`${label}: workers did not go away`);
      await sleep(50);
    }
    const t0 = performance.now();
    const spawned = pollUntil(() => mainThreadChildren(server.pid) !== '', t0, 10_000);
    const r = await firstReply(`fcgi://unix:${server.sock}:/p100.php`, doc);
    const replied = performance.now();
    out.push(replied - t0);
    if (r.status['2xx'] !== 1) throw new Error(`${label}: first request not 200: ${JSON.stringify(r.status)} ${JSON.stringify(r.errors)}`);
    const sp = await spawned;
    if (sp !== undefined) spawnMs.push(sp);
    const gone = await pollUntil(() => mainThreadChildren(server.pid) === '', replied, 20_000);
    if (gone !== undefined) idleStopMs.push(gone);
  }
  return { label, samplesMs: out, spawnMs, idleStopMs };
}

// ---- report ----

function f(x: number | undefined, digits = 1): string {
  return x === undefined || Number.isNaN(x) ? '–' : x.toFixed(digits);
}

function mib(b: number | undefined): string {
  return b === undefined ? '–' : `${(b / 1048576).toFixed(1)} MiB`;
}

interface Summary {
  workers: number;
  page: string;
  concurrency: number;
  stack: string;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
  cpuUsPerReq: number | undefined;
  rssAnon: number | undefined;
}

function summarise(samples: Sample[]): Summary[] {
  const groups = new Map<string, Sample[]>();
  for (const s of samples) {
    const k = `${s.workers}|${s.page}|${s.concurrency}|${s.stack}`;
    let g = groups.get(k);
    if (g === undefined) groups.set(k, (g = []));
    g.push(s);
  }
  const out: Summary[] = [];
  for (const g of groups.values()) {
    const s0 = g[0]!;
    let cpu = g.every((s) => s.cpuSeconds !== undefined) ? g.reduce((a, s) => a + s.cpuSeconds!, 0) : undefined;
    // /proc counts CPU in 10 ms ticks: below 100 ms in all the figure is mostly rounding.
    if (cpu !== undefined && cpu < 0.1) cpu = undefined;
    const reqs = g.reduce((a, s) => a + s.requests, 0);
    const anon = g.map((s) => s.rssAnon).filter((x): x is number => x !== undefined);
    out.push({
      workers: s0.workers,
      page: s0.page,
      concurrency: s0.concurrency,
      stack: s0.stack,
      rps: median(g.map((s) => s.rps)),
      p50: median(g.map((s) => s.p50Ms)),
      p99: median(g.map((s) => s.p99Ms)),
      errors: g.reduce((a, s) => a + s.errors, 0),
      non2xx: g.reduce((a, s) => a + s.non2xx, 0),
      cpuUsPerReq: cpu === undefined || reqs === 0 ? undefined : (cpu * 1e6) / reqs,
      rssAnon: anon.length === 0 ? undefined : Math.max(...anon),
    });
  }
  return out;
}

function throughputTable(sum: Summary[], stacks: Array<{ key: string; label: string }>, workers: number, conc: number[]): string {
  const lines: string[] = [];
  lines.push(`#### ${workers} workers`, '');
  lines.push('| page | c | stack | req/s | × php-fpm | × floor | p50 ms | p99 ms | errors | non-2xx | daemon CPU µs/req | CPU × floor | daemon RssAnon |');
  lines.push('|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const page of PAGES) {
    for (const c of conc) {
      const cell = (stack: string): Summary | undefined => sum.find((s) => s.workers === workers && s.page === page && s.concurrency === c && s.stack === stack);
      const fpm = cell('fpm');
      const floor = cell('floor');
      for (const st of stacks) {
        const s = cell(st.key);
        if (s === undefined) continue;
        const ratio = fpm === undefined ? undefined : s.rps / fpm.rps;
        const toFloor = floor === undefined ? undefined : s.rps / floor.rps;
        const cpuToFloor = s.cpuUsPerReq === undefined || floor?.cpuUsPerReq === undefined ? undefined : s.cpuUsPerReq / floor.cpuUsPerReq;
        lines.push(`| ${PAGE_LABEL[page]} | ${c} | ${st.label} | ${f(s.rps, 0)} | ${f(ratio, 3)} | ${f(toFloor, 3)} | ${f(s.p50, 2)} | ${f(s.p99, 2)} | ${s.errors} | ${s.non2xx} | ${f(s.cpuUsPerReq, 1)} | ${f(cpuToFloor, 2)} | ${mib(s.rssAnon)} |`);
      }
    }
  }
  return lines.join('\n');
}

interface Target {
  what: string;
  goal: string;
  measured: string;
  met: boolean | undefined;
}

function targets(sum: Summary[], idle: IdleResult | undefined, over: OverloadResult[], cold: ColdResult[], workers: number[]): Target[] {
  const out: Target[] = [];
  const get = (w: number, page: string, c: number, stack: string): Summary | undefined => sum.find((s) => s.workers === w && s.page === page && s.concurrency === c && s.stack === stack);
  for (const [page, goal] of [['p100.php', 1.0], ['p8750.php', 1.0], ['sleep50.php', 0.99]] as const) {
    const ratios = workers.map((w) => {
      const a = get(w, page, 10, 'fcgipm');
      const b = get(w, page, 10, 'fpm');
      return a && b ? a.rps / b.rps : undefined;
    });
    const known = ratios.filter((r): r is number => r !== undefined);
    out.push({
      what: `throughput, ${PAGE_LABEL[page]}, c=10, nginx→fcgi-pm vs nginx→php-fpm`,
      goal: `≥ ${goal.toFixed(2)}×`,
      measured: workers.map((w, i) => `${w} workers ${f(ratios[i], 3)}×`).join(', '),
      met: known.length === 0 ? undefined : known.every((r) => r >= goal),
    });
  }
  // The floor: the same proxied design with nothing but header scanning (bench/relay-floor.ts).
  for (const page of ['p100.php', 'p8750.php']) {
    const cells = workers.map((w) => ({ w, a: get(w, page, 10, 'fcgipm'), fl: get(w, page, 10, 'floor'), fpm: get(w, page, 10, 'fpm') }));
    const known = cells.filter((x) => x.a !== undefined && x.fl !== undefined);
    if (known.length === 0) continue;
    const cpu = (x: (typeof known)[number]): string => (x.a!.cpuUsPerReq === undefined || x.fl!.cpuUsPerReq === undefined ? '–' : f(x.a!.cpuUsPerReq / x.fl!.cpuUsPerReq, 2));
    out.push({
      what: `${PAGE_LABEL[page]}, c=10: fcgi-pm / floor req/s, CPU per request (floor / php-fpm req/s)`,
      goal: 'the limit of the design',
      measured: known.map((x) => `${x.w} workers ${f(x.a!.rps / x.fl!.rps, 3)}×, CPU ${cpu(x)}× (${x.fpm === undefined ? '–' : f(x.fl!.rps / x.fpm.rps, 3)}×)`).join(', '),
      met: undefined,
    });
  }
  const added = workers.flatMap((w) =>
    PAGES.map((page) => {
      const a = get(w, page, 10, 'fcgipm');
      const b = get(w, page, 10, 'fpm');
      return a && b ? { w, page, d: a.p99 - b.p99 } : undefined;
    }),
  ).filter((x): x is { w: number; page: string; d: number } => x !== undefined);
  out.push({
    what: 'p99 added at c=10 (fcgi-pm p99 − php-fpm p99)',
    goal: '≤ 0.5 ms',
    measured: added.map((a) => `${a.w}w ${PAGE_LABEL[a.page]} ${a.d >= 0 ? '+' : ''}${a.d.toFixed(2)}`).join('; '),
    met: added.length === 0 ? undefined : added.every((a) => a.d <= 0.5),
  });
  const cpu = sum.filter((s) => s.stack === 'fcgipm' && s.cpuUsPerReq !== undefined && s.page !== 'sleep50.php');
  const cpuMax = cpu.length === 0 ? undefined : Math.max(...cpu.map((s) => s.cpuUsPerReq!));
  const cpuMin = cpu.length === 0 ? undefined : Math.min(...cpu.map((s) => s.cpuUsPerReq!));
  out.push({ what: 'daemon CPU per proxied request (nginx→fcgi-pm, 100 B and 8,750 B pages)', goal: '≤ 15 µs', measured: `${f(cpuMin)}–${f(cpuMax)} µs`, met: cpuMax === undefined ? undefined : cpuMax <= 15 });
  out.push({
    what: `daemon anonymous memory with ${idle?.connections ?? 1000} idle front-end connections`,
    goal: '≤ 16 MB',
    measured: idle === undefined ? '–' : `${mib(idle.withIdle)} (fresh ${mib(idle.fresh)}, after the runs ${mib(idle.afterRuns)})`,
    met: idle?.withIdle === undefined ? undefined : idle.withIdle <= 16e6,
  });
  const bare = cold.find((c) => c.label.startsWith('bare'));
  const ours = cold.find((c) => c.label.startsWith('fcgi-pm'));
  if (bare !== undefined && ours !== undefined) {
    const d = median(ours.samplesMs) - median(bare.samplesMs);
    out.push({ what: 'first request after scale-to-zero vs bare php-cgi spawn (medians)', goal: '≤ 3 ms slower', measured: `${d >= 0 ? '+' : ''}${d.toFixed(2)} ms`, met: d <= 3 });
  }
  const ov = over.find((o) => o.stack.includes('fcgi-pm'));
  if (ov !== undefined) {
    const r = ov.report;
    const connErrors = r.errors.connect + r.errors.reset + r.errors.closed + r.errors.timeout + r.errors.protocol + r.errors.other + r.errors.client + r.errors.dropped;
    const others = r.requests.replies - (r.status.codes['200'] ?? 0) - (r.status.codes['503'] ?? 0);
    out.push({
      what: 'overload at 2× capacity: connection errors, requests not answered 200/503',
      goal: '0 and 0',
      measured: `${connErrors} errors; ${others} other statuses; ${r.status.codes['200'] ?? 0}×200, ${r.status.codes['503'] ?? 0}×503 of ${r.requests.issued}`,
      met: connErrors === 0 && others === 0 && r.requests.replies === r.requests.issued,
    });
  }
  return out;
}

function renderAll(a: Args, m: Record<string, string>, sum: Summary[], stacks: Array<{ key: string; label: string }>, idle: IdleResult | undefined, over: OverloadResult[], cold: ColdResult[]): string {
  const out: string[] = [];
  out.push(`### Run of ${m.date} (${a.quick ? 'quick' : 'full'}: ${a.rounds} rounds × ${a.seconds} s per cell, wrk -t1)`, '');
  out.push(`Machine: ${m.nproc} CPUs (${m.cpu}), ${m.ram} RAM, Linux ${m.kernel}; Node ${m.node}, nginx ${m.nginx}, PHP ${m.php} (php-fpm ${m['php-fpm']}), wrk ${m.wrk}. Load average (1 min) ${m.load} at the start, ${loadAvg()} at the end.`, '');
  out.push('Medians over the rounds; errors and non-2xx are totals. "× php-fpm" and "× floor" are req/s ratios to nginx → php-fpm (static) and to nginx → relay floor with the same workers, page and concurrency; "CPU × floor" is the daemon CPU per request over the floor relay\'s (for the floor row, the relay\'s own CPU and memory are in the daemon columns).', '');
  for (const w of a.workers) out.push(throughputTable(sum, stacks, w, a.concurrency), '');
  out.push('#### Targets', '', '| target | goal | measured | met |', '|---|---|---|---|');
  for (const t of targets(sum, idle, over, cold, a.workers)) out.push(`| ${t.what} | ${t.goal} | ${t.measured} | ${t.met === undefined ? '–' : t.met ? 'yes' : '**no**'} |`);
  out.push('');
  if (over.length > 0) {
    out.push('#### Overload (open loop, `fcgi-pm bench --rate`, keep-alive, through nginx, sleep 50 ms page)', '');
    out.push('| stack | rate req/s | issued | 200 | 503 | other status | errors | p50 ms | p99 ms | max ms |', '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
    for (const o of over) {
      const r = o.report;
      const c200 = r.status.codes['200'] ?? 0;
      const c503 = r.status.codes['503'] ?? 0;
      const errs = Object.entries(r.errors).filter(([, n]) => n > 0).map(([k, n]) => `${k} ${n}`).join(', ') || '0';
      out.push(`| ${o.stack} | ${o.rate} | ${r.requests.issued} | ${c200} | ${c503} | ${r.requests.replies - c200 - c503} | ${errs} | ${f(r.latency_ms.reply.p50, 1)} | ${f(r.latency_ms.reply.p99, 1)} | ${f(r.latency_ms.reply.max, 1)} |`);
    }
    out.push('');
  }
  if (cold.length > 0) {
    out.push('#### Cold start (first request with zero workers, direct FastCGI, 100 B page)', '');
    out.push('| what | median ms | min ms | max ms | samples | worker forked after, p50 ms | idle stop after the reply, p50 (min–max) ms |', '|---|---:|---:|---:|---:|---:|---:|');
    const spread = (xs: number[] | undefined): string => (xs === undefined || xs.length === 0 ? '–' : `${f(median(xs), 0)} (${f(Math.min(...xs), 0)}–${f(Math.max(...xs), 0)})`);
    for (const c of cold) out.push(`| ${c.label} | ${f(median(c.samplesMs), 2)} | ${f(Math.min(...c.samplesMs), 2)} | ${f(Math.max(...c.samplesMs), 2)} | ${c.samplesMs.length} | ${c.spawnMs === undefined || c.spawnMs.length === 0 ? '–' : f(median(c.spawnMs), 2)} | ${spread(c.idleStopMs)} |`);
    out.push('');
  }
  if (idle !== undefined) {
    out.push(`Daemon anonymous memory (RssAnon): fresh ${mib(idle.fresh)}, after the ${a.workers[0]}-worker runs ${mib(idle.afterRuns)}, with ${idle.connections} idle FastCGI connections open ${mib(idle.withIdle)}.`, '');
  }
  return out.join('\n');
}

// ---- main ----

async function main(): Promise<void> {
  const a = parseArgs(process.argv.slice(2));
  const unknown = a.pages.filter((p) => !ALL_PAGES.includes(p));
  if (unknown.length > 0) throw new Error(`--pages: unknown ${unknown.join(', ')} (have ${ALL_PAGES.join(', ')})`);
  PAGES = a.pages;
  const m = machine();
  const dir = mkdtempSync(join(tmpdir(), 'fcgi-pm-compare-'));
  const doc = join(dir, 'www');
  writePages(doc);
  const samples: Sample[] = [];
  const over: OverloadResult[] = [];
  const cold: ColdResult[] = [];
  let idle: IdleResult | undefined;
  const chosen = [
    { key: 'fcgipm', label: 'nginx → fcgi-pm → php-cgi' },
    { key: 'floor', label: 'nginx → relay floor → php-cgi' },
    { key: 'fpm', label: 'nginx → php-fpm (static)' },
    { key: 'direct', label: 'nginx → fcgi-pm accept: direct as docs/direct.md configures it (default backlog 511, max_requests 10000, overflow as backup)' },
    { key: 'direct511', label: 'nginx → fcgi-pm accept: direct, direct_backlog = max_children (most of a burst through the overflow)' },
    { key: 'spawn', label: 'nginx → spawn-fcgi php-cgi' },
    { key: 'http', label: 'fcgi-pm HTTP → php-cgi' },
    ...(a.quick && a.stacks?.includes('fcgipm-nk') !== true ? [] : [{ key: 'fcgipm-nk', label: 'nginx → fcgi-pm, no keep-alive' }]),
    ...(a.stacks?.includes('floor-nk') === true ? [{ key: 'floor-nk', label: 'nginx → relay floor, no keep-alive' }] : []),
  ].filter((s) => a.stacks === undefined || a.stacks.includes(s.key));
  // The baseline build runs whichever of fcgi-pm's nginx stacks were chosen.
  const baseStacks = a.baseline === undefined ? [] : chosen.filter((s) => s.key.startsWith('fcgipm')).map((s) => ({ key: s.key.replace('fcgipm', 'base'), label: s.label.replace('fcgi-pm', 'baseline fcgi-pm') }));
  const stackList = [...chosen, ...baseStacks];
  if (a.baseline !== undefined) log(`baseline: ${a.baseline} (${spawnSync('git', ['-C', a.baseline, 'log', '-1', '--format=%h %s'], { encoding: 'utf8' }).stdout.trim()})`);
  const workersRun = a.only.has('throughput') ? a.workers : [];
  const cells = workersRun.length * PAGES.length * a.concurrency.length * stackList.length * a.rounds;
  log(`compare: ${cells} wrk runs of ${a.seconds} s, in ${dir}`);
  let done = 0;
  try {
    for (const [wi, w] of workersRun.entries()) {
      const wdir = join(dir, `w${w}`);
      const httpPort = await freePort();
      const fcgipm = await startFcgiPm(join(wdir, 'fcgi-pm'), doc, { pm: 'static', workers: w, httpPort, queueTimeout: '5s' });
      const freshAnon = rssAnon(fcgipm.pid);
      const base = a.baseline === undefined ? undefined : await startFcgiPm(join(wdir, 'base'), doc, { pm: 'static', workers: w, queueTimeout: '5s', repo: a.baseline });
      const fpm = await startPhpFpm(join(wdir, 'fpm'), { pm: 'static', workers: w });
      const direct = stackList.some((s) => s.key === 'direct') ? await startFcgiPm(join(wdir, 'direct'), doc, { pm: 'static', workers: w, queueTimeout: '5s', direct: true, maxRequests: 10000 }) : undefined;
      const direct511 = stackList.some((s) => s.key === 'direct511') ? await startFcgiPm(join(wdir, 'direct511'), doc, { pm: 'static', workers: w, queueTimeout: '5s', direct: true, directBacklog: w }) : undefined;
      const sp = await startSpawnFcgi(join(wdir, 'spawn'), w);
      // Only when measured: php-cgi drops the floor's connections if no request comes within 5 s.
      const floor = stackList.some((s) => s.key.startsWith('floor')) ? await startFloor(join(wdir, 'floor'), w) : undefined;
      const ports = { direct: await freePort(), direct511: await freePort(), fcgipm: await freePort(), floor: await freePort(), fpm: await freePort(), spawn: await freePort(), nk: await freePort(), floorNk: await freePort(), base: await freePort(), baseNk: await freePort() };
      const ngx = await startNginx(join(wdir, 'nginx'), doc, [
        { port: ports.fcgipm, upstream: `unix:${fcgipm.sock}`, keepAlive: true },
        ...(floor === undefined
          ? []
          : [
              { port: ports.floor, upstream: `unix:${floor.sock}`, keepAlive: true },
              { port: ports.floorNk, upstream: `unix:${floor.sock}`, keepAlive: false },
            ]),
        { port: ports.fpm, upstream: `unix:${fpm.sock}`, keepAlive: false },
        ...(direct === undefined ? [] : [{ port: ports.direct, upstream: `unix:${direct.directSock}`, keepAlive: false, backup: `unix:${direct.sock}` }]),
        ...(direct511 === undefined ? [] : [{ port: ports.direct511, upstream: `unix:${direct511.directSock}`, keepAlive: false, backup: `unix:${direct511.sock}` }]),
        { port: ports.spawn, upstream: `unix:${sp.sock}`, keepAlive: false },
        { port: ports.nk, upstream: `unix:${fcgipm.sock}`, keepAlive: false },
        ...(base === undefined
          ? []
          : [
              { port: ports.base, upstream: `unix:${base.sock}`, keepAlive: true },
              { port: ports.baseNk, upstream: `unix:${base.sock}`, keepAlive: false },
            ]),
      ]);
      const stacks: Stack[] = [
        { key: 'fcgipm', label: '', url: `http://127.0.0.1:${ports.fcgipm}`, daemonPid: fcgipm.pid },
        { key: 'floor', label: '', url: `http://127.0.0.1:${ports.floor}`, daemonPid: floor?.pid },
        { key: 'fpm', label: '', url: `http://127.0.0.1:${ports.fpm}`, daemonPid: undefined },
        { key: 'direct', label: '', url: `http://127.0.0.1:${ports.direct}`, daemonPid: direct?.pid },
        { key: 'direct511', label: '', url: `http://127.0.0.1:${ports.direct511}`, daemonPid: direct511?.pid },
        { key: 'spawn', label: '', url: `http://127.0.0.1:${ports.spawn}`, daemonPid: undefined },
        { key: 'http', label: '', url: `http://127.0.0.1:${httpPort}`, daemonPid: fcgipm.pid },
        { key: 'fcgipm-nk', label: '', url: `http://127.0.0.1:${ports.nk}`, daemonPid: fcgipm.pid },
        { key: 'floor-nk', label: '', url: `http://127.0.0.1:${ports.floorNk}`, daemonPid: floor?.pid },
        { key: 'base', label: '', url: `http://127.0.0.1:${ports.base}`, daemonPid: base?.pid },
        { key: 'base-nk', label: '', url: `http://127.0.0.1:${ports.baseNk}`, daemonPid: base?.pid },
      ].filter((s) => stackList.some((l) => l.key === s.key));
      const health = (): string =>
        [`fcgi-pm ${fcgipm.proc.exited() ? 'EXITED' : 'running'}: ${fcgipm.proc.output().slice(-1500)}`, `nginx error log: ${nginxErrors(join(wdir, 'nginx')).slice(-1500)}`].join('\n');
      const wrk = async (url: string, c: number, secs: number): Promise<WrkResult> => {
        try {
          return await runWrk(url, c, secs);
        } catch (err) {
          throw new Error(`${(err as Error).message}\n${health()}`);
        }
      };
      // Warm-up: JIT, opcache, connection pools; not counted.
      for (const s of stacks) for (const page of PAGES) await wrk(`${s.url}/${page}`, 10, 1);
      for (let round = 0; round < a.rounds; round++) {
        for (const page of PAGES) {
          for (const c of a.concurrency) {
            for (let i = 0; i < stacks.length; i++) {
              const s = stacks[(i + round) % stacks.length]!;
              const { r, cpu, anon } = await measure(s, page, c, a.seconds, wrk);
              samples.push({ ...r, workers: w, page, concurrency: c, stack: s.key, round, cpuSeconds: cpu, rssAnon: anon });
              done++;
              log(`[${done}/${cells}] ${w}w ${page} c=${c} ${s.key}: ${r.rps.toFixed(0)} req/s p50 ${r.p50Ms.toFixed(2)} p99 ${r.p99Ms.toFixed(2)} ms err ${r.errors} non2xx ${r.non2xx}${cpu !== undefined ? ` cpu ${((cpu * 1e6) / Math.max(1, r.requests)).toFixed(1)} µs/req` : ''}`);
            }
          }
        }
      }
      if (wi === 0) {
        const afterRuns = rssAnon(fcgipm.pid);
        const r = await idleConnections(fcgipm.pid, fcgipm.sock, 1000);
        idle = { fresh: freshAnon, afterRuns, withIdle: r.anon, connections: r.open };
        log(`idle connections: ${r.open} open, RssAnon ${mib(r.anon)}`);
        // Overload: twice what this stack served of the 50 ms page at the highest concurrency.
        const cap = summarise(samples).find((s) => s.workers === w && s.page === 'sleep50.php' && s.concurrency === Math.max(...a.concurrency) && s.stack === 'fcgipm');
        if (cap !== undefined) {
          const rate = Math.round(2 * cap.rps);
          log(`overload: ${rate} req/s for ${a.overloadSeconds} s (capacity ${cap.rps.toFixed(0)} req/s)`);
          over.push(await overload('nginx → fcgi-pm (queue_timeout 5s)', `http://127.0.0.1:${ports.fcgipm}/sleep50.php`, rate, a.overloadSeconds));
          await sleep(1000);
          over.push(await overload('nginx → php-fpm (static)', `http://127.0.0.1:${ports.fpm}/sleep50.php`, rate, a.overloadSeconds));
          if (direct !== undefined) {
            await sleep(1000);
            over.push(await overload('nginx → fcgi-pm direct (backup: its overflow listener, queue_timeout 5s)', `http://127.0.0.1:${ports.direct}/sleep50.php`, rate, a.overloadSeconds));
          }
          if (direct511 !== undefined) {
            await sleep(1000);
            over.push(await overload('nginx → fcgi-pm direct, direct_backlog = max_children', `http://127.0.0.1:${ports.direct511}/sleep50.php`, rate, a.overloadSeconds));
          }
        }
      }
      const ngxErr = nginxErrors(join(wdir, 'nginx')).trim();
      if (ngxErr !== '') log(`nginx error log (${w} workers), last lines:\n${ngxErr.split('\n').slice(-5).join('\n')}`);
      await ngx.stop();
      await Promise.all([fcgipm.stop(), floor?.stop(), fpm.stop(), sp.stop(), base?.stop(), direct?.stop(), direct511?.stop()]);
    }

    if (a.only.has('cold')) {
    log('cold start...');
    const cdir = join(dir, 'cold');
    mkdirSync(cdir, { recursive: true, mode: 0o700 });
    cold.push(await coldBare(cdir, doc, a.coldSamples));
    const ond = await startFcgiPm(join(cdir, 'fcgi-pm'), doc, { pm: 'ondemand', workers: 1, idleTimeout: '1s' });
    cold.push(await coldServer('fcgi-pm ondemand: first request, zero workers', ond, doc, a.coldSamples));
    await ond.stop();
    const dirOnd = await startFcgiPm(join(cdir, 'direct'), doc, { pm: 'ondemand', workers: 1, idleTimeout: '1s', direct: true });
    cold.push(await coldServer('fcgi-pm accept: direct ondemand: first request, zero workers', { ...dirOnd, sock: dirOnd.directSock }, doc, a.coldSamples));
    await dirOnd.stop();
    const fpmOnd = await startPhpFpm(join(cdir, 'fpm'), { pm: 'ondemand', workers: 1, idleTimeoutS: 1 });
    cold.push(await coldServer('php-fpm ondemand: first request, zero workers', fpmOnd, doc, a.coldSamples));
    await fpmOnd.stop();
    }
  } finally {
    await stopAll();
  }

  const sum = summarise(samples);
  const md = renderAll(a, m, sum, stackList, idle, over, cold);
  process.stdout.write(`${md}\n`);
  if (a.out !== undefined) writeFileSync(a.out, `${md}\n`);
  if (a.json !== undefined) writeFileSync(a.json, `${JSON.stringify({ machine: m, args: a, summary: sum, samples, idle, overload: over, cold }, null, 2)}\n`);
  rmSync(dir, { recursive: true, force: true });
}

let stopping = false;
const stop = (): void => {
  stopping = true;
  process.stderr.write('compare: stopping everything it started\n');
  void stopAll().then(() => process.exit(130));
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
main().catch(async (err: unknown) => {
  if (stopping) return; // the runs failed because we stopped them
  process.stderr.write(`compare: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  await stopAll();
  process.exit(1);
});
