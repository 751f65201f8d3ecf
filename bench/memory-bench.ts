/**
 * Memory figures for the docs (docs/memory.md, examples/embedded/README.md). Prints
 * figures, asserts nothing.
 *
 *   npx tsc -p . && node dist/bench/memory-bench.js [--conns 1000] [--workers 50] [--rounds 200]
 *
 * 1. The daemon's own memory, idle: `bin/fcgi-pm run` (with its heap flags) with one FastCGI listener and an
 *    ondemand php-cgi pool (no worker yet); RssAnon (heap, stacks: what it really costs),
 *    RssFile (node binary and libraries, mostly shared and reclaimable), PSS.
 * 2. The same with --conns idle front-end connections open.
 * 3. The CPU cost of sampling --workers idle php-cgi processes with the /proc sampler
 *    (steady state, where PSS is carried forward, and with every PSS re-read), and with
 *    pidusage for comparison (--no-sampling skips it).
 *
 *   node dist/bench/memory-bench.js --heap [--rounds 3] [--seconds 5] [--flags "A;B;..."] [--no-keepalive]
 *
 * 4. Heap settings instead: nginx → fcgi-pm (2 static php-cgi) once per set of V8 flags
 *    (bin/fcgi-pm executed with FCGI_PM_NODE_FLAGS; "" is Node's defaults), wrk -c10 on
 *    the 100 B and 8,750 B pages, cells interleaved round by round: idle and loaded
 *    RssAnon, req/s, p99 and daemon CPU per request for each set. --no-keepalive: nginx
 *    opens a FastCGI connection per request (no `upstream keepalive`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseSmapsRollup, parseStatus } from '../src/memory/proc.js';
import { PidusageSampler, ProcSampler } from '../src/memory/sampler.js';

const arg = (name: string, def: number): number => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
};
const CONNS = arg('--conns', 1000);
const WORKERS = arg('--workers', 50);
const ROUNDS = arg('--rounds', 200);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PHP_CGI = '/usr/bin/php-cgi';
const MiB = 1024 * 1024;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const mib = (n: number | undefined): string => (n === undefined ? '   n/a' : (n / MiB).toFixed(1).padStart(6));

interface Figures {
  rssAnon: number | undefined;
  rssFile: number | undefined;
  rss: number | undefined;
  pss: number | undefined;
  pssAnon: number | undefined;
}

function figures(pid: number): Figures {
  const st = parseStatus(readFileSync(`/proc/${pid}/status`, 'latin1'));
  let r: ReturnType<typeof parseSmapsRollup>;
  try {
    r = parseSmapsRollup(readFileSync(`/proc/${pid}/smaps_rollup`, 'latin1'));
  } catch {
    r = undefined;
  }
  return { rssAnon: st.rssAnon, rssFile: st.rssFile, rss: st.vmRss, pss: r?.pss, pssAnon: r?.pssAnon };
}

function line(label: string, f: Figures): void {
  console.log(`  ${label.padEnd(34)} RssAnon ${mib(f.rssAnon)}  RssFile ${mib(f.rssFile)}  RSS ${mib(f.rss)}  PSS ${mib(f.pss)}  Pss_Anon ${mib(f.pssAnon)}  (MiB)`);
}

async function waitConnect(port: number): Promise<void> {
  for (let i = 0; i < 300; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    await sleep(50);
  }
  throw new Error(`nothing listens on ${port}`);
}

async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  return new Promise((resolve) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const a = srv.address();
      srv.close(() => resolve(typeof a === 'object' && a !== null ? a.port : 0));
    });
  });
}

async function stopChild(c: ChildProcess): Promise<void> {
  if (c.exitCode !== null || c.signalCode !== null) return;
  const exited = new Promise<void>((r) => c.once('exit', () => r()));
  c.kill('SIGTERM');
  const t = setTimeout(() => c.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(t);
}

async function daemonMemory(dir: string): Promise<void> {
  const port = await freePort();
  const cfg = join(dir, 'fcgi-pm.yaml');
  writeFileSync(
    cfg,
    [
      'listen:',
      `  - { protocol: fastcgi, address: "127.0.0.1:${port}", pool: php, max_conns: ${CONNS + 100}, idle_timeout: 10m }`,
      'log: { level: warn, access: false }',
      'pools:',
      `  php: { command: [${PHP_CGI}], pm: ondemand, max_children: 4 }`,
      '',
    ].join('\n'),
  );
  // Executed as a program, as operators run it: bin/fcgi-pm starts the daemon with its heap flags.
  const d = spawn(join(ROOT, 'bin/fcgi-pm'), ['run', '-c', cfg, '--allow-root'], { stdio: ['ignore', 'ignore', 'inherit'] });
  try {
    await waitConnect(port);
    await sleep(2000); // start-up garbage collected, timers settled
    console.log(`fcgi-pm itself (pid ${d.pid}, Node ${process.version}):`);
    const idle = figures(d.pid!);
    line('idle, no workers', idle);
    const socks: Socket[] = [];
    for (let i = 0; i < CONNS; i++) {
      const s = connect(port, '127.0.0.1');
      s.on('error', () => {});
      socks.push(s);
      if (i % 100 === 99) await new Promise<void>((r) => s.once('connect', () => r()));
    }
    await sleep(1500);
    const busy = figures(d.pid!);
    line(`${CONNS} idle front-end connections`, busy);
    if (idle.rssAnon !== undefined && busy.rssAnon !== undefined) {
      console.log(`  anonymous memory per connection: ${(((busy.rssAnon - idle.rssAnon) / CONNS) / 1024).toFixed(1)} KiB`);
    }
    for (const s of socks) s.destroy();
  } finally {
    await stopChild(d);
  }
}

async function samplingCost(dir: string): Promise<void> {
  const workers: ChildProcess[] = [];
  try {
    for (let i = 0; i < WORKERS; i++) {
      const sock = join(dir, `w${i}.sock`);
      workers.push(spawn(PHP_CGI, ['-b', sock], { stdio: 'ignore', env: { PHP_FCGI_CHILDREN: '0', PHP_FCGI_MAX_REQUESTS: '0', PATH: '/usr/bin:/bin' } }));
    }
    for (let i = 0; i < 200 && !workers.every((_, j) => existsSync(join(dir, `w${j}.sock`))); i++) await sleep(25);
    const pids = workers.map((w) => w.pid!);
    const rss = pids.reduce((s, p) => s + (figures(p).rss ?? 0), 0);
    console.log(`\nsampling ${WORKERS} idle php-cgi workers (${mib(rss / WORKERS).trim()} MiB RSS each), ${ROUNDS} rounds:`);

    const proc = new ProcSampler();
    const round = (fresh: boolean): void => {
      const now = performance.now();
      for (const pid of pids) proc.readNow(pid, now, fresh);
    };
    round(true); // open the handles
    const measure = (label: string, fn: () => void, rounds: number): number => {
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      for (let i = 0; i < rounds; i++) fn();
      const wall = (performance.now() - t0) / rounds;
      const c = process.cpuUsage(cpu0);
      const cpuUs = (c.user + c.system) / rounds;
      console.log(
        `  ${label.padEnd(46)} ${(cpuUs / 1000).toFixed(2).padStart(7)} ms CPU/round  ${(cpuUs / WORKERS).toFixed(1).padStart(6)} µs/worker  ${(wall).toFixed(2).padStart(7)} ms event-loop time/round  ${((cpuUs / 1000 / 2000) * 100).toFixed(3)} % of a CPU at 2 s`,
      );
      return cpuUs;
    };
    const reads0 = proc.rollupReads;
    measure('/proc sync, steady (PSS re-read every 5th)', () => round(false), ROUNDS);
    console.log(`    (smaps_rollup reads: ${proc.rollupReads - reads0} for ${ROUNDS * WORKERS} samples; no process spawned)`);
    measure('/proc sync, every PSS re-read (smaps_rollup)', () => round(true), ROUNDS);
    // What the daemon does: rounds through the threadpool; the event loop only parses.
    {
      const cpu0 = process.cpuUsage();
      const elu0 = performance.eventLoopUtilization();
      const t0 = performance.now();
      for (let i = 0; i < ROUNDS; i++) await proc.read(pids, performance.now());
      const wall = (performance.now() - t0) / ROUNDS;
      const c = process.cpuUsage(cpu0);
      const elu = performance.eventLoopUtilization(elu0);
      const cpuUs = (c.user + c.system) / ROUNDS;
      console.log(
        `  ${'/proc async rounds, steady (the daemon)'.padEnd(46)} ${(cpuUs / 1000).toFixed(2).padStart(7)} ms CPU/round  ${(cpuUs / WORKERS).toFixed(1).padStart(6)} µs/worker  ${((elu.active / ROUNDS)).toFixed(2).padStart(7)} ms event-loop time/round  ${((cpuUs / 1000 / 2000) * 100).toFixed(3)} % of a CPU at 2 s  (${wall.toFixed(2)} ms wall)`,
      );
    }
    proc.close();

    const pu = new PidusageSampler();
    const n = Math.max(1, Math.floor(ROUNDS / 10));
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < n; i++) await pu.read(pids, performance.now());
    const c = process.cpuUsage(cpu0);
    const cpuUs = (c.user + c.system) / n;
    console.log(`  ${'pidusage (RSS only, async)'.padEnd(46)} ${(cpuUs / 1000).toFixed(2).padStart(7)} ms CPU/round  ${(cpuUs / WORKERS).toFixed(1).padStart(6)} µs/worker  ${((performance.now() - t0) / n).toFixed(2).padStart(7)} ms wall/round`);
    pu.close();
  } finally {
    await Promise.all(workers.map((w) => stopChild(w)));
  }
}

const DEFAULT_FLAG_SETS = ['', '--max-semi-space-size=1', '--max-semi-space-size=2', '--max-semi-space-size=4', '--max-semi-space-size=8'];

/** The flags bin/fcgi-pm starts the daemon with (its `f=` line). */
function binDefaultFlags(): string {
  return /^":" \/\/; f="([^"]*)"/m.exec(readFileSync(join(ROOT, 'bin/fcgi-pm'), 'utf8'))?.[1] ?? '?';
}

async function heapSettings(dir: string): Promise<void> {
  const { startFcgiPm, startNginx, writePages } = await import('./compare-stacks.js');
  const { runWrk } = await import('./compare-wrk.js');
  const { stopAll } = await import('./compare-procs.js');
  const { cpuSeconds, rssAnon } = await import('../src/bench/proc-info.js');
  const i = process.argv.indexOf('--flags');
  const sets = i >= 0 ? process.argv[i + 1]!.split(';') : [...new Set([...DEFAULT_FLAG_SETS, binDefaultFlags()])];
  const rounds = arg('--rounds', 3);
  const seconds = arg('--seconds', 5);
  const pages = ['p100.php', 'p8750.php'];
  const keepAlive = !process.argv.includes('--no-keepalive');
  const doc = join(dir, 'www');
  writePages(doc);
  try {
    const daemons = [];
    for (const [k, flags] of sets.entries()) daemons.push(await startFcgiPm(join(dir, `d${k}`), doc, { pm: 'static', workers: 2, nodeFlags: flags }));
    const ports = await Promise.all(sets.map(() => freePort()));
    await startNginx(join(dir, 'nginx'), doc, daemons.map((d, k) => ({ port: ports[k]!, upstream: `unix:${d.sock}`, keepAlive })));
    await sleep(2000);
    const idle = daemons.map((d) => rssAnon(d.pid));
    const cells = sets.map(() => pages.map(() => ({ rps: [] as number[], p99: [] as number[], cpu: 0, reqs: 0, anon: 0 })));
    for (const [k] of sets.entries()) for (const page of pages) await runWrk(`http://127.0.0.1:${ports[k]}/${page}`, 10, 1);
    for (let r = 0; r < rounds; r++) {
      for (const [pi, page] of pages.entries()) {
        for (let j = 0; j < sets.length; j++) {
          const k = (j + r) % sets.length;
          const pid = daemons[k]!.pid;
          const c0 = cpuSeconds(pid) ?? 0;
          const w = await runWrk(`http://127.0.0.1:${ports[k]}/${page}`, 10, seconds);
          const cell = cells[k]![pi]!;
          cell.rps.push(w.rps);
          cell.p99.push(w.p99Ms);
          cell.cpu += (cpuSeconds(pid) ?? 0) - c0;
          cell.reqs += w.requests;
          cell.anon = Math.max(cell.anon, rssAnon(pid) ?? 0);
          process.stderr.write(`[round ${r + 1}] ${JSON.stringify(sets[k])} ${page}: ${w.rps.toFixed(0)} req/s p99 ${w.p99Ms.toFixed(2)} ms RssAnon ${mib(rssAnon(pid))}\n`);
        }
      }
    }
    await sleep(5000);
    const after = daemons.map((d) => rssAnon(d.pid));
    const med = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
    console.log(`\nheap settings (bin/fcgi-pm default: "${binDefaultFlags()}"), nginx ${keepAlive ? '' : '(no keep-alive) '}→ fcgi-pm → 2 php-cgi, wrk -t1 -c10, ${rounds} × ${seconds} s per cell, medians; load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);
    console.log('| V8 flags | idle RssAnon | page | req/s | p99 ms | CPU µs/req | loaded RssAnon (max) | RssAnon 5 s after |');
    console.log('|---|---:|---|---:|---:|---:|---:|---:|');
    for (const [k, flags] of sets.entries()) {
      for (const [pi, page] of pages.entries()) {
        const c = cells[k]![pi]!;
        const label = flags === '' ? 'Node defaults' : `\`${flags}\``;
        console.log(`| ${label} | ${mib(idle[k]).trim()} MiB | ${page} | ${med(c.rps).toFixed(0)} | ${med(c.p99).toFixed(2)} | ${((c.cpu * 1e6) / c.reqs).toFixed(1)} | ${mib(c.anon).trim()} MiB | ${mib(after[k]).trim()} MiB |`);
      }
    }
  } finally {
    await stopAll();
  }
}

async function main(): Promise<void> {
  if (process.platform !== 'linux') {
    console.log('memory-bench reads /proc: Linux only');
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'fpm-membench-'));
  try {
    if (process.argv.includes('--heap')) {
      await heapSettings(dir);
      return;
    }
    await daemonMemory(dir);
    if (!process.argv.includes('--no-sampling')) await samplingCost(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
