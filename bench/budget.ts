/**
 * The daemon's own cost, every row of its budget measured on this machine in one run and
 * printed beside the budget (docs/BENCHMARKS.md "The cost budget"). Prints figures; a row
 * over its budget is said so, never an exit status: absolute figures move with the
 * machine's load (the load average is printed at the start and the end of each row).
 *
 *   npx tsc -p . && node dist/bench/budget.js [--short] [--rows cpu,box,scale] [--rounds 3]
 *       [--seconds 5] [--warm-seconds 15] [--sites 1000] [--active 200] [--cpu-seconds 30] [--settle-seconds 60] [--json FILE]
 *       [--variant "cpu_weight: 0"] [--variant-repo ../main] [--variant-node-flags "--single-threaded-gc"]
 *
 * Rows (as root for box and scale):
 *   cpu    nginx → fcgi-pm → php-cgi beside the floor (nginx → bench/relay-floor → php-cgi)
 *          and nginx → php-fpm (static), 2 workers, wrk -c10, the 100 B and 8,750 B pages,
 *          interleaved round by round (the starting stack rotated): the daemon's CPU per
 *          request and ÷ the floor's; req/s ÷ php-fpm's; fcgi-pm's RssAnon and PSS idle
 *          (fresh) and under load (read halfway through its runs). --variant runs a second
 *          fcgi-pm with that pool key beside them (an A/B of a setting in the same run);
 *          --variant-repo runs that second fcgi-pm from another built checkout (an A/B of
 *          code: main's beside a branch's), --variant-node-flags with those V8 flags
 *          (bin/fcgi-pm's FCGI_PM_NODE_FLAGS); the three combine
 *   box    bench/cgroup-box.js: fcgi-pm's PSS inside a 64 MiB memory cgroup under load
 *   scale  bench/observability.js: --sites vhosts sites with --active of them active, a
 *          Prometheus scrape (median of 20), the dashboard in headless Chromium (first
 *          render, page height), daemon CPU with no page open and with one, each after
 *          --settle-seconds idle (60; 0 in the short form), and with none open in the
 *          window right after the activation and the scrapes (V8's compiles and its memory
 *          reducer's collections after a burst: paid once, not while idling)
 * --short is the form CI runs after the tests (scripts/test-all.sh): 1 round of 2 s per
 * cell, the box loaded 5 s, CPU windows of 5 s; about two minutes in all.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cpuSeconds, rssAnon } from '../src/bench/proc-info.js';
import { parseSmapsRollup, type RollupFields } from '../src/memory/proc.js';
import { freePort, sleep, stopAll } from './compare-procs.js';
import { REPO, startFcgiPm, startFloor, startNginx, startPhpFpm, writePages } from './compare-stacks.js';
import { runWrk, type WrkResult } from './compare-wrk.js';

const argv = process.argv.slice(2);
const SHORT = argv.includes('--short');
const opt = (name: string, def: string): string => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1]! : def;
};
const ROWS = new Set(opt('--rows', 'cpu,box,scale').split(','));
const ROUNDS = Number(opt('--rounds', SHORT ? '1' : '3'));
const SECONDS = Number(opt('--seconds', SHORT ? '2' : '5'));
const SITES = opt('--sites', '1000');
const ACTIVE = opt('--active', '200');
const CPU_SECONDS = opt('--cpu-seconds', SHORT ? '5' : '30');
const BOX_SECONDS = opt('--box-seconds', SHORT ? '5' : '30');
/** The idle CPU windows after this long idle (the window right after the activation is printed beside them). */
const SETTLE_SECONDS = opt('--settle-seconds', SHORT ? '0' : '60');
const JSON_FILE = argv.includes('--json') ? opt('--json', '') : undefined;
/** A second fcgi-pm stack measured beside the first: a pool key ("key: value"), another built checkout, V8 flags. */
const VARIANT_KEY = argv.includes('--variant') ? opt('--variant', '') : undefined;
const VARIANT_REPO = argv.includes('--variant-repo') ? opt('--variant-repo', '') : undefined;
const VARIANT_FLAGS = argv.includes('--variant-node-flags') ? opt('--variant-node-flags', '') : undefined;
const VARIANT =
  VARIANT_KEY === undefined && VARIANT_REPO === undefined && VARIANT_FLAGS === undefined
    ? undefined
    : [VARIANT_KEY, VARIANT_REPO === undefined ? undefined : `from ${VARIANT_REPO}`, VARIANT_FLAGS === undefined ? undefined : `node ${VARIANT_FLAGS || '(defaults)'}`].filter((x) => x !== undefined).join(', ');
/**
 * Seconds of load per stack and page before the rounds: php-cgi's first requests and V8's
 * compilations are no one's cost. V8 still compiles fcgi-pm's request path in bursts until
 * some 20 s of load (the floor's few functions are done in one), so 3 s left part of that
 * in fcgi-pm's cells only (docs/BENCHMARKS.md).
 */
const WARM_SECONDS = Number(opt('--warm-seconds', SHORT ? '1' : '15'));
const WORKERS = 2;
const CONCURRENCY = 10;
const MiB = 1024 * 1024;

/** One line of the table: what, the figure as measured, the budget, and whether it holds (undefined: no budget or not measured). */
interface Row {
  what: string;
  measured: string;
  budget: string;
  within: boolean | undefined;
  value?: number;
}

const rows: Row[] = [];
const load = (): string => readFileSync('/proc/loadavg', 'utf8').split(' ')[0]!;
const say = (s: string): void => void process.stdout.write(`${s}\n`);
const f = (x: number | undefined, d = 1): string => (x === undefined || !Number.isFinite(x) ? '–' : x.toFixed(d));
const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length === 0 ? NaN : s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
/** PSS and its anonymous and file parts: the file part (the node binary's pages) shrinks with every other node process sharing them. */
function rollup(pid: number): RollupFields | undefined {
  try {
    return parseSmapsRollup(readFileSync(`/proc/${pid}/smaps_rollup`, 'latin1'));
  } catch {
    return undefined;
  }
}
const mib = (b: number | undefined): string => f(b === undefined ? undefined : b / MiB);
const pssText = (r: RollupFields | undefined): string => (r === undefined ? '–' : `${mib(r.pss)} MiB (anon ${mib(r.pssAnon)}, file ${mib(r.pssFile)})`);

function row(what: string, measured: string, budget: string, within: boolean | undefined, value?: number): void {
  rows.push({ what, measured, budget, within, value });
  say(`  ${what}: ${measured}${budget === '–' ? '' : ` (budget ${budget}: ${within === undefined ? 'not measured' : within ? 'within' : 'OVER'})`}`);
}

// ---- cpu: the request path beside the floor and php-fpm ---------------------------------

const PAGES = [
  { page: 'p100.php', label: '100 B', vsFpm: 0.95 },
  { page: 'p8750.php', label: '8.7 KB', vsFpm: 1.05 },
];

interface Cell {
  requests: number;
  rps: number[];
  cpu: number;
}

async function cpuRows(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'fcgi-pm-budget-'));
  const doc = join(dir, 'www');
  writePages(doc);
  try {
    const fcgipm = await startFcgiPm(join(dir, 'fcgi-pm'), doc, { pm: 'static', workers: WORKERS, queueTimeout: '5s' });
    const fpm = await startPhpFpm(join(dir, 'fpm'), { pm: 'static', workers: WORKERS });
    const variant =
      VARIANT === undefined
        ? undefined
        : await startFcgiPm(join(dir, 'variant'), doc, {
            pm: 'static',
            workers: WORKERS,
            queueTimeout: '5s',
            poolKeys: VARIANT_KEY === undefined ? [] : [VARIANT_KEY],
            repo: VARIANT_REPO,
            nodeFlags: VARIANT_FLAGS,
          });
    // Last: php-cgi drops a connection that brings no request within 5 s of the floor's start.
    const floor = await startFloor(join(dir, 'floor'), WORKERS);
    const ports = [await freePort(), await freePort(), await freePort(), await freePort()];
    const ngx = await startNginx(join(dir, 'nginx'), doc, [
      { port: ports[0]!, upstream: `unix:${fcgipm.sock}`, keepAlive: true },
      { port: ports[1]!, upstream: `unix:${floor.sock}`, keepAlive: true },
      { port: ports[2]!, upstream: `unix:${fpm.sock}`, keepAlive: false },
      ...(variant === undefined ? [] : [{ port: ports[3]!, upstream: `unix:${variant.sock}`, keepAlive: true }]),
    ]);
    const stacks = [
      { key: 'floor', url: `http://127.0.0.1:${ports[1]}`, pid: floor.pid as number | undefined },
      { key: 'fcgi-pm', url: `http://127.0.0.1:${ports[0]}`, pid: fcgipm.pid as number | undefined },
      { key: 'php-fpm', url: `http://127.0.0.1:${ports[2]}`, pid: undefined as number | undefined },
      ...(variant === undefined ? [] : [{ key: `fcgi-pm (${VARIANT})`, url: `http://127.0.0.1:${ports[3]}`, pid: variant.pid as number | undefined }]),
    ];
    const idleAnon = rssAnon(fcgipm.pid);
    const idleRollup = rollup(fcgipm.pid);
    let loadAnon = 0;
    let loadRollup: RollupFields | undefined;
    // Warm-up: php-cgi's first requests and V8's first compilations are no one's cost.
    for (const s of stacks) for (const p of PAGES) await runWrk(`${s.url}/${p.page}`, CONCURRENCY, WARM_SECONDS);
    const cells = new Map<string, Cell>();
    const cellOf = (stack: string, page: string): Cell => {
      const k = `${stack}|${page}`;
      let c = cells.get(k);
      if (c === undefined) cells.set(k, (c = { requests: 0, rps: [], cpu: 0 }));
      return c;
    };
    say(`cpu: ${ROUNDS} round(s) × ${SECONDS} s per cell after ${WARM_SECONDS} s of warm-up, ${WORKERS} workers, wrk -c${CONCURRENCY} (load average ${load()})`);
    for (let round = 0; round < ROUNDS; round++) {
      for (const p of PAGES) {
        for (let i = 0; i < stacks.length; i++) {
          const s = stacks[(i + round) % stacks.length]!;
          const c0 = s.pid === undefined ? undefined : cpuSeconds(s.pid);
          const run = runWrk(`${s.url}/${p.page}`, CONCURRENCY, SECONDS);
          if (s.key === 'fcgi-pm') {
            await sleep((SECONDS * 1000) / 2);
            loadAnon = Math.max(loadAnon, rssAnon(fcgipm.pid) ?? 0);
            const r = rollup(fcgipm.pid);
            if (r !== undefined && r.pss > (loadRollup?.pss ?? 0)) loadRollup = r;
          }
          const r: WrkResult = await run;
          const c1 = s.pid === undefined ? undefined : cpuSeconds(s.pid);
          if (r.errors > 0 || r.non2xx > 0) say(`  ${s.key} ${p.page}: ${r.errors} socket errors, ${r.non2xx} non-2xx`);
          const cell = cellOf(s.key, p.page);
          cell.requests += r.requests;
          cell.rps.push(r.rps);
          if (c0 !== undefined && c1 !== undefined) cell.cpu += c1 - c0;
        }
      }
    }
    for (const p of PAGES) {
      const ours = cellOf('fcgi-pm', p.page);
      const fl = cellOf('floor', p.page);
      const fp = cellOf('php-fpm', p.page);
      const us = (c: Cell): number => (c.cpu * 1e6) / c.requests;
      const ratio = us(ours) / us(fl);
      row(`daemon CPU per request, ${p.label} page (fcgi-pm, the floor)`, `${f(us(ours))} µs, ${f(us(fl))} µs: ${f(ratio, 2)}× the floor's`, '≤ 1.15× the floor', Number.isFinite(ratio) ? ratio <= 1.15 : undefined, ratio);
      const vs = median(ours.rps) / median(fp.rps);
      row(`req/s ÷ php-fpm's, ${p.label} page (fcgi-pm; the floor)`, `${f(vs, 2)}; ${f(median(fl.rps) / median(fp.rps), 2)} (${f(median(ours.rps), 0)}, ${f(median(fl.rps), 0)}, ${f(median(fp.rps), 0)} req/s)`, `≥ ${p.vsFpm.toFixed(2)}`, Number.isFinite(vs) ? vs >= p.vsFpm : undefined, vs);
      if (variant !== undefined) {
        const v = cellOf(`fcgi-pm (${VARIANT})`, p.page);
        row(`the same with ${VARIANT}, ${p.label} page: CPU per request; req/s ÷ php-fpm's`, `${f(us(v))} µs: ${f(us(v) / us(fl), 2)}× the floor's; ${f(median(v.rps) / median(fp.rps), 2)} (${f(median(v.rps), 0)} req/s)`, '–', undefined, us(v) / us(fl));
      }
    }
    row('fcgi-pm RssAnon; PSS, idle (fresh)', `${mib(idleAnon)} MiB; ${pssText(idleRollup)}`, '–', undefined, idleRollup?.pss);
    row('fcgi-pm RssAnon; PSS under load (the largest of the runs)', `${mib(loadAnon)} MiB; ${pssText(loadRollup)}`, '–', undefined, loadRollup?.pss);
    await ngx.stop();
    await variant?.stop();
    await floor.stop();
    await fpm.stop();
    await fcgipm.stop();
  } finally {
    await stopAll();
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---- box and scale: the benchmarks that already measure them, run as children ------------

/** Runs `node dist/bench/<script> args` and resolves with its stdout (rejects with its stderr's end). */
function child(script: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [join(REPO, 'dist', 'bench', script), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    p.stderr.setEncoding('utf8').on('data', (c: string) => (err = (err + c).slice(-2000)));
    const stop = (): void => void p.kill('SIGTERM');
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    p.on('exit', (code, sig) => {
      process.removeListener('SIGINT', stop);
      process.removeListener('SIGTERM', stop);
      if (code === 0) resolve(out);
      // The error's own line, not the source line Node prints above it.
      else reject(new Error(`${script} exited ${code ?? sig}: ${(err.split('\n').filter((l) => /Error|error:/.test(l)).slice(-2).join(' ') || err.trim() || out.slice(-1000)).slice(0, 500)}`));
    });
  });
}

async function boxRows(): Promise<void> {
  say(`box: examples/embedded in a 64 MiB memory cgroup, 20 clients on a 6 MB page, ${BOX_SECONDS} s (load average ${load()})`);
  const r = JSON.parse(await child('cgroup-box.js', ['--json', '--limit', '64', '--seconds', BOX_SECONDS])) as Record<string, number | undefined>;
  const after = r.daemonPssAfterMiB;
  row(
    'fcgi-pm PSS inside the 64 MiB box, after the load (its anon and file parts; idle before it; OOM kills; 200s)',
    `${f(after)} MiB (anon ${f(r.daemonPssAnonAfterMiB)}, file ${f(r.daemonPssFileAfterMiB)}; ${f(r.daemonPssIdleMiB)} MiB; ${r.oomKills} kills; ${r.share200} % of ${r.requests})`,
    '≤ 28 MiB',
    after === undefined ? undefined : after <= 28,
    after,
  );
}

async function scaleRows(): Promise<void> {
  say(`scale: ${SITES} vhosts sites, ${ACTIVE} active, a dashboard over three daemons, CPU windows of ${CPU_SECONDS} s (load average ${load()})`);
  const dir = mkdtempSync(join(tmpdir(), 'fcgi-pm-budget-'));
  const file = join(dir, 'scale.json');
  try {
    await child('observability.js', ['--sites', SITES, '--active', ACTIVE, '--cpu-seconds', CPU_SECONDS, '--settle-seconds', SETTLE_SECONDS, '--json', file]);
    const r = JSON.parse(readFileSync(file, 'utf8')) as Record<string, number>;
    row(`Prometheus scrape, ${ACTIVE} active pools, median of 20 (min, max)`, `${f(r.scrapeMedianMs)} ms (${f(r.scrapeMinMs)}, ${f(r.scrapeMaxMs)})`, '≤ 50 ms', r.scrapeMedianMs! <= 50, r.scrapeMedianMs);
    row(`dashboard, ${SITES} sites of which ${ACTIVE} active: first render`, `${f(r.firstRenderMs, 0)} ms`, '≤ 1000 ms', r.firstRenderMs! <= 1000, r.firstRenderMs);
    row(`dashboard, ${SITES} sites: page height`, `${f(r.pageHeightPx, 0)} px (${f(r.viewportPx, 0)} px a screen)`, '≤ 3000 px', r.pageHeightPx! <= 3000, r.pageHeightPx);
    const settled = Number(SETTLE_SECONDS) > 0;
    const worst = Math.max(r.cpuPageOpenPct!, r.cpuIdlePct!);
    row(
      `daemon CPU with a dashboard page open, ${ACTIVE} workers (with none open)${settled ? `, each after ${SETTLE_SECONDS} s idle; none open right after the activation` : ''}`,
      `${f(r.cpuPageOpenPct, 2)} % (${f(r.cpuIdlePct, 2)} %${settled ? `; ${f(r.cpuIdleFreshPct, 2)} %` : ''}) of a core`,
      '≤ 1 %',
      worst <= 1,
      worst,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---- main ---------------------------------------------------------------------------------

async function main(): Promise<void> {
  const started = new Date().toISOString();
  const load0 = load();
  say(`cost budget${SHORT ? ' (short form)' : ''}, ${started}, load average ${load0}${Number(load0) >= 1 ? ': NOISY, absolute figures settle nothing' : ''}`);
  const parts: Array<[string, () => Promise<void>]> = [
    ['cpu', cpuRows],
    ['box', boxRows],
    ['scale', scaleRows],
  ];
  for (const [name, part] of parts) {
    if (!ROWS.has(name)) continue;
    try {
      await part();
    } catch (err) {
      // One row that cannot run (no cgroup, no Chromium, not root) leaves the others.
      row(name, `not measured: ${err instanceof Error ? err.message.split('\n').slice(0, 3).join(' ') : String(err)}`, '–', undefined);
    }
  }
  const load1 = load();
  say('');
  say(`| the daemon's own cost (${started}, load average ${load0} → ${load1}) | measured | budget | within |`);
  say('|---|---|---|---|');
  for (const r of rows) say(`| ${r.what} | ${r.measured} | ${r.budget} | ${r.within === undefined ? '–' : r.within ? 'yes' : '**no**'} |`);
  if (JSON_FILE !== undefined) writeFileSync(JSON_FILE, JSON.stringify({ started, load: [load0, load1], short: SHORT, rows }, null, 2));
}

// Ctrl-C, or CI's time limit (scripts/test-all.sh): what was started is stopped by pid first.
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => void stopAll().then(() => process.exit(130)));
main().catch(async (err: unknown) => {
  process.stderr.write(`budget: ${err instanceof Error ? err.stack : String(err)}\n`);
  await stopAll();
  process.exit(1);
});
