/**
 * Figures for issue 24's targets (docs/BENCHMARKS.md). Prints figures, asserts nothing.
 *
 *   npx tsc -p . && node dist/bench/observability.js [--sites 1000] [--active 200] [--cpu-seconds 30] [--settle-seconds 0]
 *
 * As root (the sites run as nobody). Three daemons: a (the dashboard, `--sites` vhosts
 * sites from a directory behind an HTTP listener with status_path) and two peers b, c
 * with one php-cgi pool each. `--active` sites get one request (one php-cgi each), then:
 *  - `fcgi-pm status` (compact) line count, and `status --pool` of one site;
 *  - a Prometheus scrape of /status?prometheus: time (median of 20) and size, and its
 *    series count with the sites active against with them all idle (after eviction);
 *  - the dashboard in headless Chromium: first render (navigation to the table drawn with
 *    every active row), bytes the page loaded (documents, scripts, the event stream up to
 *    then), the page's height once drawn (against the 1,000 px viewport), daemon a's CPU
 *    and its main thread's context switches (wake-ups) over `--cpu-seconds` with the page
 *    open against with none.
 * The first CPU window (no page open) starts right after the activation and the scrapes;
 * --settle-seconds N then waits N s before a second one with no page open and before the
 * one with the page open: those show a daemon that has run that way for a while, after V8
 * compiled what runs only while idle (or only with a page open) and its memory reducer's
 * collections after the activity, a cost paid once after each burst, not while idling.
 * --json FILE also writes the figures there (bench/budget.ts reads them).
 * --profile DIR runs daemon a under `node --cpu-prof` (its file written in DIR as it exits)
 * and prints where its CPU went in each window: no page open, one page open.
 * --node-flags "..." gives daemon a these V8 flags instead of bin/fcgi-pm's (as
 * FCGI_PM_NODE_FLAGS), --daemon-log FILE writes daemon a's stdout there, each window
 * marked; with `--node-flags "... --trace-gc --trace-gc-nvp"` it prints what daemon a
 * allocated, promoted and paused for in each window (bytes move little with load).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, chmodSync, copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';
import { summarise, type CpuProfile } from './cpuprofile-top.js';

const arg = (name: string, def: string): string => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1]! : def;
};
const SITES = Number(arg('--sites', '1000'));
const ACTIVE = Number(arg('--active', '200'));
const CPU_S = Number(arg('--cpu-seconds', '30'));
/** Seconds each CPU window waits before it starts (V8 compiles the code that runs only when idle, or with a page open, in its first minutes). */
const SETTLE_S = Number(arg('--settle-seconds', '0'));
const JSON_FILE = process.argv.includes('--json') ? arg('--json', '') : undefined;
const PROFILE_DIR = process.argv.includes('--profile') ? arg('--profile', '') : undefined;
/** bin/fcgi-pm's flags for a daemon. */
const DEFAULT_FLAGS = '--max-semi-space-size=2 --max-old-space-size=256';
const A_FLAGS = arg('--node-flags', DEFAULT_FLAGS);
const A_LOG = process.argv.includes('--daemon-log') ? arg('--daemon-log', '') : undefined;
/** The CPU windows, in the profile's clock (CLOCK_MONOTONIC, µs: what process.hrtime reads). */
const windows: Array<{ what: string; fromUs: number; toUs: number }> = [];
const nowUs = (): number => Number(process.hrtime.bigint() / 1000n);
/** A line in --daemon-log where a window begins or ends. */
const mark = (what: string): void => {
  if (A_LOG !== undefined) appendFileSync(A_LOG, `--- ${what}\n`);
};
/** What --json writes. */
const figures: Record<string, number> = {};
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(ROOT, 'bin', 'fcgi-pm');
const FIXTURES = join(ROOT, 'test', 'fixtures', 'php');
const TOKEN = 'bench-token-0123456789abcdef';
/** USER_HZ: the unit of /proc/PID/stat times (getconf CLK_TCK). */
const TICKS = 100;
let port = 21_000 + (process.pid % 500) * 10;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(url, { headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, ms: performance.now() - t0 }));
    });
    req.on('error', reject);
    req.end();
  });
}

function cpuTicks(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return Number(rest[11]) + Number(rest[12]); // utime + stime
}

/** CPU time (ns) of each of a process's threads, summed by thread name. */
function threadCpu(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const name = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
      out.set(name, (out.get(name) ?? 0) + Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]));
    } catch {
      // a thread that just ended
    }
  }
  return out;
}

/** The main thread's context switches (each a wake-up after it blocked, or a preemption). */
function mainSwitches(pid: number): number {
  const st = readFileSync(`/proc/${pid}/task/${pid}/status`, 'latin1');
  return Number(/^voluntary_ctxt_switches:\s*(\d+)/m.exec(st)?.[1] ?? 0) + Number(/^nonvoluntary_ctxt_switches:\s*(\d+)/m.exec(st)?.[1] ?? 0);
}

/** Where a window's CPU went by thread: "node 1.2 %, V8 DefaultWorke 0.3 %". */
function threadShares(before: Map<string, number>, after: Map<string, number>, seconds: number): string {
  const parts: string[] = [];
  for (const [name, ns] of after) {
    const pct = ((ns - (before.get(name) ?? 0)) / 1e9 / seconds) * 100;
    if (pct >= 0.01) parts.push(`${name} ${pct.toFixed(2)} %`);
  }
  return parts.join(', ');
}

function run(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn(BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    p.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`fcgi-pm ${args.join(' ')}: exit ${code}`))));
  });
}

async function daemon(dir: string, text: string, allowRoot = false, flags?: string, log?: string): Promise<{ proc: ChildProcess; control: string }> {
  const file = join(dir, 'fcgi-pm.yaml');
  writeFileSync(file, text);
  const env = flags === undefined ? process.env : { ...process.env, FCGI_PM_NODE_FLAGS: flags };
  const proc = spawn(BIN, ['run', '-c', file, ...(allowRoot ? ['--allow-root'] : [])], { stdio: ['ignore', 'pipe', 'pipe'], env });
  await new Promise<void>((resolve, reject) => {
    let buf = '';
    proc.stdout!.setEncoding('utf8').on('data', (c: string) => {
      buf += c;
      if (/"kind":"ready"/.test(buf)) resolve();
    });
    proc.on('exit', (code) => reject(new Error(`daemon exited ${code}: ${buf.slice(-500)}`)));
  });
  if (log !== undefined) proc.stdout!.on('data', (c: string) => appendFileSync(log, c));
  proc.stdout!.resume();
  return { proc, control: join(dir, 'control.sock') };
}

/** From a --trace-gc-nvp log with the windows marked: each window's collections, bytes allocated and promoted, pauses. */
function printGcWindows(log: string): void {
  let cur: { what: string; n: number; allocated: number; promoted: number; pause: number; marks: number } | undefined;
  for (const line of readFileSync(log, 'utf8').split('\n')) {
    const m = /^--- (.*): (begins|ends)$/.exec(line);
    if (m !== null) {
      if (m[2] === 'begins') cur = { what: m[1]!, n: 0, allocated: 0, promoted: 0, pause: 0, marks: 0 };
      else if (cur !== undefined) {
        console.log(`daemon a, ${cur.what}: ${cur.n} collections (${cur.marks} mark-compact), ${(cur.allocated / 2 ** 20).toFixed(1)} MiB allocated, ${(cur.promoted / 2 ** 20).toFixed(1)} MiB promoted, ${cur.pause.toFixed(0)} ms paused (the figures count from the collection before the window)`);
        cur = undefined;
      }
      continue;
    }
    if (cur === undefined || !line.includes(' pause=')) continue;
    const field = (k: string): number => Number(new RegExp(` ${k}=([0-9.]+)`).exec(line)?.[1] ?? 0);
    cur.n++;
    if (line.includes(' gc=mc ')) cur.marks++;
    cur.allocated += field('allocated');
    cur.promoted += field('promoted');
    cur.pause += field('pause');
  }
}

/** Where daemon a's CPU went in each window (its profile is written as it exits). */
function printProfile(dir: string): void {
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  if (file === undefined) {
    console.log(`no .cpuprofile in ${dir}`);
    return;
  }
  const profile = JSON.parse(readFileSync(join(dir, file), 'utf8')) as CpuProfile;
  for (const w of windows) {
    const s = summarise(profile, w.fromUs, w.toUs);
    console.log(`\ndaemon a, ${w.what}: busy ${s.busyMs.toFixed(0)} ms of ${s.totalMs.toFixed(0)} ms (GC ${s.gcMs.toFixed(0)} ms)\n  total%  self%  function  (file:line), fcgi-pm's own, inclusive`);
    const own = s.costs.filter((c) => c.where.startsWith('dist/src/')).sort((a, b) => b.totalMs - a.totalMs).slice(0, 25);
    for (const c of own) console.log(`  ${c.totalPct.toFixed(1).padStart(6)}  ${c.selfPct.toFixed(1).padStart(5)}  ${c.name}  ${c.where}`);
    console.log('  self%  function, any');
    for (const c of [...s.costs].sort((a, b) => b.selfMs - a.selfMs).slice(0, 12)) console.log(`  ${c.selfPct.toFixed(1).padStart(5)}  ${c.name}  ${c.where}`);
  }
  console.log(`profile: ${join(dir, file)}`);
}

/** One CPU window of daemon `pid` (--cpu-seconds, marked `what` in --daemon-log): its CPU in % of a core, its threads' shares, its main thread's wake-ups a second. */
async function cpuWindow(pid: number, what: string): Promise<{ cpu: number; threads: string; wakeups: number }> {
  const c0 = cpuTicks(pid);
  const w0 = nowUs();
  const th0 = threadCpu(pid);
  const cs0 = mainSwitches(pid);
  mark(`${what}: begins`);
  await sleep(CPU_S * 1000);
  mark(`${what}: ends`);
  const threads = threadShares(th0, threadCpu(pid), CPU_S);
  const wakeups = (mainSwitches(pid) - cs0) / CPU_S;
  windows.push({ what, fromUs: w0, toUs: nowUs() });
  return { cpu: ((cpuTicks(pid) - c0) / TICKS / CPU_S) * 100, threads, wakeups };
}

async function main(): Promise<void> {
  const base = mkdtempSync(join(tmpdir(), 'fpm-obs-'));
  chmodSync(base, 0o755);
  const procs: ChildProcess[] = [];
  try {
    const root = join(base, 'www');
    mkdirSync(root, { mode: 0o755 });
    for (const f of ['pid.php', 'sleep.php']) {
      copyFileSync(join(FIXTURES, f), join(root, f));
      chmodSync(join(root, f), 0o644);
    }
    const sites = join(base, 'sites');
    mkdirSync(sites);
    for (let i = 0; i < SITES; i++) writeFileSync(join(sites, `site${i}.yaml`), `names: [site${i}.test]\ndocument_root: ${root}\npool: { user: nobody, max_children: 2, idle_timeout: 1h }\n`);
    const peers: string[] = [];
    for (const name of ['b', 'c']) {
      const dir = join(base, name);
      mkdirSync(dir);
      const d = await daemon(dir, `control_socket: ${join(dir, 'control.sock')}\nlisten:\n  - { protocol: http, address: "127.0.0.1:${port++}", pool: www, document_root: ${FIXTURES} }\npools:\n  www: { command: [php-cgi], pm: static, max_children: 2 }\nlog: { access: false }\n`, true);
      procs.push(d.proc);
      peers.push(d.control);
    }
    const adir = join(base, 'a');
    mkdirSync(adir);
    const http = port++;
    const dash = port++;
    const t0 = performance.now();
    const a = await daemon(
      adir,
      `control_socket: ${join(adir, 'control.sock')}\nlisten:\n  - { protocol: http, address: "127.0.0.1:${http}", vhosts: true, status_path: /status }\nvhosts:\n  dir: ${sites}\n  defaults: { command: [php-cgi] }\ndashboard:\n  address: "127.0.0.1:${dash}"\n  token: ${TOKEN}\n  peers: [${peers.join(', ')}]\nlog: { access: false }\n`,
      false,
      // The profiler beside the heap flags bin/fcgi-pm gives a daemon (or --node-flags).
      PROFILE_DIR === undefined ? A_FLAGS : `${A_FLAGS} --cpu-prof --cpu-prof-dir=${PROFILE_DIR}`,
      A_LOG,
    );
    procs.push(a.proc);
    console.log(`${SITES} sites, daemon a ready in ${Math.round(performance.now() - t0)} ms`);

    // Idle: the scrape's series with no site active.
    const idleScrape = await get(`http://127.0.0.1:${http}/status?prometheus`);
    const seriesOf = (t: string): number => t.split('\n').filter((l) => l !== '' && !l.startsWith('#')).length;
    const siteSeries = (t: string): number => t.split('\n').filter((l) => /pool="site\d+"/.test(l)).length;
    console.log(`scrape with ${SITES} idle sites: ${seriesOf(idleScrape.body)} series, ${siteSeries(idleScrape.body)} of them sites', ${idleScrape.body.length} bytes`);

    // ACTIVE sites get a request each (10 at a time).
    const t1 = performance.now();
    for (let i = 0; i < ACTIVE; i += 10) {
      await Promise.all(Array.from({ length: Math.min(10, ACTIVE - i) }, (_, k) => get(`http://127.0.0.1:${http}/pid.php`, { host: `site${i + k}.test` })));
    }
    console.log(`${ACTIVE} sites activated (one php-cgi each) in ${Math.round(performance.now() - t1)} ms`);

    const status = await run(['status', '--control', a.control]);
    console.log(`fcgi-pm status (compact) with ${ACTIVE} active sites: ${status.trimEnd().split('\n').length} lines (target ≤ 220)`);
    const one = await run(['status', '--site', 'site7', '--control', a.control]);
    console.log(`fcgi-pm status --site site7: ${one.trimEnd().split('\n').length} lines`);

    const times: number[] = [];
    let body = '';
    const s0 = nowUs();
    for (let i = 0; i < 20; i++) {
      const r = await get(`http://127.0.0.1:${http}/status?prometheus`);
      times.push(r.ms);
      body = r.body;
    }
    windows.push({ what: '20 Prometheus scrapes', fromUs: s0, toUs: nowUs() });
    Object.assign(figures, { scrapeMedianMs: median(times), scrapeMinMs: Math.min(...times), scrapeMaxMs: Math.max(...times), scrapeBytes: body.length });
    console.log(`scrape with ${ACTIVE} active pools: median ${median(times).toFixed(1)} ms (min ${Math.min(...times).toFixed(1)}, max ${Math.max(...times).toFixed(1)}), ${(body.length / 1024).toFixed(0)} KiB, ${seriesOf(body)} series (${siteSeries(body)} of sites) (targets ≤ 50 ms, ≤ 1 MB)`);

    // CPU of daemon a with no page open (the idle sampler runs every 10 s): right after the
    // activation and the scrapes, then (with --settle-seconds) once it has idled a while.
    const pid = a.proc.pid!;
    const fresh = await cpuWindow(pid, 'no page open');
    let idle = fresh;
    if (SETTLE_S > 0) {
      mark(`no page open: settling ${SETTLE_S} s`);
      await sleep(SETTLE_S * 1000);
      idle = await cpuWindow(pid, 'no page open, settled');
    }

    const profile = mkdtempSync(join(tmpdir(), 'fpm-obs-chrome-'));
    const browser = await puppeteer.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', `--user-data-dir=${profile}`] });
    try {
      const page = await browser.newPage();
      await page.setViewport({ width: 1360, height: 1000 });
      await page.setExtraHTTPHeaders({ authorization: `Bearer ${TOKEN}` });
      let bytes = 0;
      const cdp = await page.createCDPSession();
      await cdp.send('Network.enable');
      cdp.on('Network.dataReceived', (e: { encodedDataLength: number; dataLength: number }) => (bytes += e.encodedDataLength || e.dataLength));
      cdp.on('Network.responseReceived', () => undefined);
      const t2 = performance.now();
      await page.goto(`http://127.0.0.1:${dash}/`);
      // Drawn: as many active rows as the page draws (at most its 100), and every active pool known to its count line.
      await page.waitForFunction(
        (n: number) => {
          const doc = (globalThis as unknown as { document: { querySelectorAll(s: string): { length: number }; querySelector(s: string): { textContent: string | null } | null } }).document;
          return doc.querySelectorAll('tr.row:not(.idle-site)').length >= Math.min(n, 100) && (doc.querySelector('#count')?.textContent ?? '').includes(`(${n} active)`);
        },
        { timeout: 60_000, polling: 10 },
        ACTIVE + 2,
      );
      const render = performance.now() - t2;
      const loaded = bytes;
      const height = await page.evaluate(() => (globalThis as unknown as { document: { documentElement: { scrollHeight: number } } }).document.documentElement.scrollHeight);
      Object.assign(figures, { firstRenderMs: render, pageBytes: loaded, pageHeightPx: height, viewportPx: 1000 });
      console.log(`dashboard first render (navigation to the table drawn, ${ACTIVE + 2} active pools known, ${SITES} sites): ${Math.round(render)} ms (target ≤ 1000 ms); page weight until then ${(loaded / 1024).toFixed(0)} KiB (target ≤ 300 KB); page height ${height} px (target ≤ 3,000 px: three screens of 1,000)`);
      if (SETTLE_S > 0) {
        mark(`one page open: settling ${SETTLE_S} s`);
        await sleep(SETTLE_S * 1000);
      }
      const b0 = bytes;
      const open = await cpuWindow(pid, 'one page open');
      Object.assign(figures, { cpuIdlePct: idle.cpu, cpuIdleFreshPct: fresh.cpu, cpuPageOpenPct: open.cpu, wakeupsIdle: idle.wakeups, wakeupsPageOpen: open.wakeups });
      console.log(`daemon a CPU over ${CPU_S} s${SETTLE_S > 0 ? ` (each after ${SETTLE_S} s of settling)` : ''}: ${idle.cpu.toFixed(2)} % of a core with no page open, ${open.cpu.toFixed(2)} % with one page open (target ≤ 1 %); the page received ${((bytes - b0) / 1024 / CPU_S).toFixed(1)} KiB/s`);
      if (SETTLE_S > 0) console.log(`  no page open in the ${CPU_S} s right after the activation and the scrapes: ${fresh.cpu.toFixed(2)} %`);
      console.log(`  by thread, no page open: ${idle.threads}\n  by thread, one page open: ${open.threads}`);
      console.log(`  main thread's context switches: ${idle.wakeups.toFixed(1)}/s with no page open, ${open.wakeups.toFixed(1)}/s with one page open`);
    } finally {
      await browser.close();
      rmSync(profile, { recursive: true, force: true });
    }
  } finally {
    for (const p of procs.reverse()) p.kill('SIGTERM');
    await sleep(3000);
    rmSync(base, { recursive: true, force: true });
  }
  if (PROFILE_DIR !== undefined) printProfile(PROFILE_DIR);
  if (A_LOG !== undefined) printGcWindows(A_LOG);
  if (JSON_FILE !== undefined && JSON_FILE !== '') writeFileSync(JSON_FILE, JSON.stringify(figures, null, 2));
}

await main();
