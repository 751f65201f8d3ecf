/**
 * examples/embedded/fcgi-pm.yaml inside a memory cgroup of --limit MiB (a 64 MB board, a
 * container, a unit with MemoryMax), under load. Prints figures, asserts nothing; needs
 * root and a memory controller (v1, or v2 with +memory for children of this process's
 * cgroup).
 *
 *   npx tsc -p . && node dist/bench/cgroup-box.js [--limit 64] [--pools 1] [--clients 20]
 *       [--seconds 30] [--mb 6] [--hold-ms 50] [--json] [--keep] [--node-flags "..."] [--smaps N]
 *
 * The profile is used as written, except: HTTP listeners on loopback instead of the Unix
 * sockets lighttpd would use (one per pool), runtime_dir and cwd in a temp dir, log
 * level info to a file (for the counts below), and workers as root when www-data cannot
 * read the temp dir. fcgi-pm starts inside the cgroup (a shell writes its pid to
 * cgroup.procs, then execs node with the README's V8 flags, as bin/fcgi-pm passes
 * FCGI_PM_NODE_FLAGS; --node-flags replaces them), so its first page is
 * charged there. --clients keep-alive clients each loop on a page that allocates --mb
 * MB and holds it --hold-ms, spread over --pools pools (site, then admin), for --seconds.
 *
 * Reported: OOM kills (memory.oom_control / memory.events.local of the box and of every
 * pool cgroup below it), the peak of the box's anonymous memory and of what it cannot
 * reclaim (sampled every 20 ms; v1 also gives the kernel's max_usage_in_bytes), replies
 * by status, connection errors, fcgi-pm's PSS after the load (with --smaps, its N largest
 * mappings: PSS beside RSS, which counts the node binary's shared pages whole), and what the
 * log said.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { memoryFiles, oomKillsFrom, parseKeyValues, unreclaimable } from '../src/memory/cgroup.js';
import { locateMemoryCgroup, type MemoryCgroup } from '../src/memory/cgroup-files.js';
import { parseSmapsRollup, parseStatus } from '../src/memory/proc.js';
import { removeCgroupTree } from '../test/helpers/cgroup.js';

const arg = (name: string, def: number): number => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
};
const LIMIT_MIB = arg('--limit', 64);
const POOLS = arg('--pools', 1);
const CLIENTS = arg('--clients', 20);
const SECONDS = arg('--seconds', 30);
const MB = arg('--mb', 6);
const HOLD_MS = arg('--hold-ms', 50);
const JSON_OUT = process.argv.includes('--json');
/** Print the daemon's N largest mappings by PSS after the load (where the box's PSS lies). */
const SMAPS_TOP = arg('--smaps', 0);
/** Keep the temp dir (config, fcgi-pm.log) and say where. */
const KEEP = process.argv.includes('--keep');
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MiB = 1024 * 1024;
/** The README's V8 flags for a 64 MB board (FCGI_PM_NODE_FLAGS: on node's command line, where --optimize-for-size is allowed); --node-flags replaces them. */
const NODE_FLAGS = (process.argv.includes('--node-flags') ? process.argv[process.argv.indexOf('--node-flags') + 1]! : '--max-semi-space-size=1 --max-old-space-size=32 --v8-pool-size=1 --optimize-for-size')
  .split(' ')
  .filter((x) => x !== '');

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const read = (f: string): string | undefined => {
  try {
    return readFileSync(f, 'latin1');
  } catch {
    return undefined;
  }
};

function subdirs(dir: string): string[] {
  try {
    return readdirSync(dir).map((n) => join(dir, n)).filter((p) => statSync(p).isDirectory());
  } catch {
    return [];
  }
}

/** Per cgroup (the box, then pool cgroups by name): each counts the kills of its own processes (v1 memory.oom_control, v2 memory.events.local). */
function oomKills(cg: MemoryCgroup, dir = cg.dir, out: Record<string, number> = {}): Record<string, number> {
  out[dir === cg.dir ? 'box' : dir.slice(cg.dir.length + 1)] = oomKillsFrom(read(join(dir, memoryFiles(cg.version).oom)) ?? '') ?? 0;
  for (const d of subdirs(dir)) oomKills(cg, d, out);
  return out;
}

function makeBox(): MemoryCgroup {
  const own = locateMemoryCgroup();
  if (own === undefined) throw new Error('no memory cgroup hierarchy mounted');
  const dir = join(own.dir, `fcgi-pm-bench-${process.pid}`);
  mkdirSync(dir);
  writeFileSync(join(dir, memoryFiles(own.version).limit), String(LIMIT_MIB * MiB));
  return { ...own, dir };
}

async function removeBox(cg: MemoryCgroup): Promise<void> {
  for (const problem of await removeCgroupTree(cg.dir)) console.error(`cannot remove ${problem}`);
}

interface Peaks {
  anon: number;
  unreclaimable: number;
}

function sampleBox(cg: MemoryCgroup, peaks: Peaks): void {
  const f = memoryFiles(cg.version);
  const stat = read(join(cg.dir, f.stat));
  const usage = read(join(cg.dir, f.usage));
  if (stat === undefined || usage === undefined) return;
  const kv = parseKeyValues(stat);
  const anon = cg.version === 2 ? kv.get('anon') : kv.get('total_rss');
  peaks.anon = Math.max(peaks.anon, anon ?? 0);
  peaks.unreclaimable = Math.max(peaks.unreclaimable, unreclaimable(usage, stat, cg.version) ?? 0);
}

function rssAnon(pid: number): number | undefined {
  const t = read(`/proc/${pid}/status`);
  return t === undefined ? undefined : parseStatus(t).rssAnon;
}

/** The daemon's mappings summed by name (the node binary's text and data, [heap], anonymous), largest PSS first; rss counts shared pages whole (what PSS would be were no other process mapping them). */
function smapsByName(pid: number): Array<{ name: string; pss: number; rss: number }> {
  const t = read(`/proc/${pid}/smaps`);
  if (t === undefined) return [];
  const by = new Map<string, { name: string; pss: number; rss: number }>();
  let cur: { name: string; pss: number; rss: number } | undefined;
  for (const line of t.split('\n')) {
    const head = /^[0-9a-f]+-[0-9a-f]+ (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      const name = `${head[2] || '[anon]'} ${head[1]}`;
      cur = by.get(name) ?? { name, pss: 0, rss: 0 };
      by.set(name, cur);
      continue;
    }
    const kv = /^(Pss|Rss):\s+(\d+) kB/.exec(line);
    if (kv && cur) cur[kv[1] === 'Pss' ? 'pss' : 'rss'] += Number(kv[2]) * 1024;
  }
  return [...by.values()].sort((a, b) => b.pss - a.pss);
}

function rollup(pid: number): ReturnType<typeof parseSmapsRollup> {
  const t = read(`/proc/${pid}/smaps_rollup`);
  return t === undefined ? undefined : parseSmapsRollup(t);
}

/** The profile with only what a bench without lighttpd must change. */
function benchConfig(dir: string, ports: number[]): Record<string, any> {
  const cfg = parseYaml(readFileSync(join(ROOT, 'examples/embedded/fcgi-pm.yaml'), 'utf8')) as Record<string, any>;
  const names = Object.keys(cfg.pools).slice(0, POOLS);
  const docroot = join(dir, 'www');
  mkdirSync(docroot, { recursive: true });
  writeFileSync(join(docroot, 'alloc.php'), '<?php $s = str_repeat("x", (int)$_GET["mb"] * 1000000); usleep((int)$_GET["ms"] * 1000); echo strlen($s), "\\n";');
  cfg.listen = names.map((pool, i) => ({ protocol: 'http', address: `127.0.0.1:${ports[i]}`, pool, document_root: docroot, max_conns: 64 }));
  for (const n of Object.keys(cfg.pools)) if (!names.includes(n)) delete cfg.pools[n];
  for (const n of names) {
    cfg.pools[n].cwd = docroot;
    cfg.pools[n].user = 'root'; // the temp dir is root's
    // Every client may wait in the queue; the pool's own queue_limit stays when larger.
    cfg.pools[n].queue_limit = Math.max(cfg.pools[n].queue_limit ?? 0, Math.ceil(CLIENTS / POOLS));
  }
  cfg.runtime_dir = join(dir, 'run');
  cfg.control_socket = join(dir, 'control.sock');
  cfg.log = { level: 'info', access: false, file: join(dir, 'fcgi-pm.log') };
  return cfg;
}

async function freePort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

async function waitListening(port: number, ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const ok = await new Promise<boolean>((resolve) => {
      const req = http.get({ host: '127.0.0.1', port, path: '/nothing-here.txt', timeout: 1000 }, (res) => {
        res.resume();
        resolve(true);
      });
      req.on('error', () => resolve(false));
    });
    if (ok) return;
    await sleep(50);
  }
  throw new Error(`fcgi-pm did not listen on ${port} within ${ms} ms`);
}

interface LoadResult {
  byStatus: Record<string, number>;
  connErrors: number;
  errors: Record<string, number>;
}

async function load(ports: number[], until: number): Promise<LoadResult> {
  const r: LoadResult = { byStatus: {}, connErrors: 0, errors: {} };
  const one = (agent: http.Agent, port: number): Promise<void> =>
    new Promise((resolve) => {
      const req = http.get({ host: '127.0.0.1', port, path: `/alloc.php?mb=${MB}&ms=${HOLD_MS}`, agent, timeout: 60_000 }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          r.byStatus[res.statusCode!] = (r.byStatus[res.statusCode!] ?? 0) + 1;
          if (res.statusCode !== 200) {
            const code = /ERR_[A-Z_]+/.exec(Buffer.concat(chunks).toString('latin1'))?.[0] ?? 'no code';
            r.errors[`${res.statusCode} ${code}`] = (r.errors[`${res.statusCode} ${code}`] ?? 0) + 1;
          }
          resolve();
        });
        res.on('error', () => {
          r.connErrors++;
          resolve();
        });
      });
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', () => {
        r.connErrors++;
        resolve();
      });
    });
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, i) => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      const port = ports[i % ports.length]!;
      while (Date.now() < until) await one(agent, port);
      agent.destroy();
    }),
  );
  return r;
}

function logCounts(file: string): Record<string, number> {
  const out: Record<string, number> = {};
  const count = (k: string): void => void (out[k] = (out[k] ?? 0) + 1);
  for (const line of (read(file) ?? '').split('\n')) {
    if (line === '') continue;
    let l: { msg?: string; code?: string; level?: number };
    try {
      l = JSON.parse(line) as typeof l;
    } catch {
      continue;
    }
    const msg = l.msg ?? '';
    if (l.code === 'ERR_WORKER_OOM_KILLED') count('worker OOM-killed (ERR_WORKER_OOM_KILLED)');
    if (/not spawning .* worker\(s\)/.test(msg)) count('spawn refused for memory');
    if (/memory cgroup .* inside the .* headroom/.test(msg)) count('cgroup near its limit: shedding');
    if (/over max_memory_hard/.test(msg)) count('killed over max_memory_hard');
    if (/evicting idle worker|retiring (idle|busy) worker/.test(msg)) count('worker retired for memory');
    if (/ready after/.test(msg)) count('worker spawned');
    if (/workers run in memory cgroup/.test(msg)) count('pool cgroup created');
  }
  return out;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'fpm-box-'));
  const box = makeBox();
  const ports = await Promise.all(Array.from({ length: POOLS }, () => freePort()));
  const cfgPath = join(dir, 'fcgi-pm.yaml');
  writeFileSync(cfgPath, stringifyYaml(benchConfig(dir, ports)));
  const bin = join(ROOT, 'bin', 'fcgi-pm');
  const daemon = spawn('/bin/sh', ['-c', 'echo $$ > "$0" && exec "$@"', join(box.dir, 'cgroup.procs'), process.execPath, ...NODE_FLAGS, bin, 'run', '-c', cfgPath], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, UV_THREADPOOL_SIZE: '2' },
  });
  let stderr = '';
  daemon.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  let exited: string | undefined;
  daemon.on('exit', (code, sig) => (exited = `code ${code} signal ${sig}`));
  const peaks: Peaks = { anon: 0, unreclaimable: 0 };
  const watch = setInterval(() => sampleBox(box, peaks), 20);
  try {
    await waitListening(ports[0]!, 15_000);
    const pssIdle = rollup(daemon.pid!)?.pss;
    const anonIdle = rssAnon(daemon.pid!);
    const started = Date.now();
    const result = await load(ports, started + SECONDS * 1000);
    const seconds = (Date.now() - started) / 1000;
    await sleep(500);
    const after = rollup(daemon.pid!);
    const maps = SMAPS_TOP > 0 ? smapsByName(daemon.pid!).slice(0, SMAPS_TOP) : [];
    const pssAfter = after?.pss;
    const anonAfter = rssAnon(daemon.pid!);
    clearInterval(watch);
    // Pool cgroups are removed when fcgi-pm stops: count before.
    const kills = oomKills(box);
    const maxUsage = box.version === 1 ? Number(read(join(box.dir, 'memory.max_usage_in_bytes')) ?? NaN) : Number(read(join(box.dir, 'memory.peak')) ?? NaN);
    const total = Object.values(result.byStatus).reduce((a, b) => a + b, 0);
    const ok = result.byStatus['200'] ?? 0;
    const other = Object.entries(result.byStatus).filter(([s]) => s !== '200' && s !== '503');
    const report = {
      limitMiB: LIMIT_MIB,
      pools: POOLS,
      clients: CLIENTS,
      seconds: Math.round(seconds * 10) / 10,
      page: `${MB} MB held ${HOLD_MS} ms`,
      cgroupVersion: box.version,
      oomKills: Object.values(kills).reduce((a, b) => a + b, 0),
      oomKillsByCgroup: kills,
      daemonAlive: exited === undefined,
      replies: result.byStatus,
      non200: result.errors,
      connectionErrors: result.connErrors,
      requests: total,
      share200: total === 0 ? 0 : Math.round((ok / total) * 1000) / 10,
      reqPerSec: Math.round((total / seconds) * 10) / 10,
      peakAnonMiB: Math.round((peaks.anon / MiB) * 10) / 10,
      peakUnreclaimableMiB: Math.round((peaks.unreclaimable / MiB) * 10) / 10,
      kernelPeakUsageMiB: Number.isFinite(maxUsage) ? Math.round((maxUsage / MiB) * 10) / 10 : undefined,
      daemonPssIdleMiB: pssIdle === undefined ? undefined : Math.round((pssIdle / MiB) * 10) / 10,
      daemonPssAfterMiB: pssAfter === undefined ? undefined : Math.round((pssAfter / MiB) * 10) / 10,
      // The file part is the node binary's pages, split with every other node process on the host.
      daemonPssAnonAfterMiB: after?.pssAnon === undefined ? undefined : Math.round((after.pssAnon / MiB) * 10) / 10,
      daemonPssFileAfterMiB: after?.pssFile === undefined ? undefined : Math.round((after.pssFile / MiB) * 10) / 10,
      daemonRssAnonIdleMiB: anonIdle === undefined ? undefined : Math.round((anonIdle / MiB) * 10) / 10,
      daemonRssAnonAfterMiB: anonAfter === undefined ? undefined : Math.round((anonAfter / MiB) * 10) / 10,
      log: logCounts(join(dir, 'fcgi-pm.log')),
    };
    if (JSON_OUT) {
      console.log(JSON.stringify(report, null, 2));
    } else {
      const limit = LIMIT_MIB * MiB;
      console.log(`examples/embedded in a ${LIMIT_MIB} MiB memory cgroup (v${box.version}), ${POOLS} pool(s), ${CLIENTS} clients, ${report.page}, ${report.seconds} s`);
      console.log(`  OOM kills                 ${report.oomKills} (${Object.entries(kills).map(([k, n]) => `${k.replace(/-\d+$/, '').replace(/^fcgi-pm-\d+-/, 'pool ')}: ${n}`).join(', ')})${report.daemonAlive ? '' : `  (fcgi-pm died: ${exited})`}`);
      console.log(`  replies                   ${Object.entries(result.byStatus).map(([s, n]) => `${n} × ${s}`).join(', ')} (${report.share200} % 200, ${report.reqPerSec} req/s)${other.length > 0 ? '  <- not 200/503!' : ''}`);
      if (Object.keys(result.errors).length > 0) console.log(`  non-200                   ${Object.entries(result.errors).map(([k, n]) => `${n} × ${k}`).join(', ')}`);
      console.log(`  connection errors         ${result.connErrors}`);
      console.log(`  peak anonymous memory     ${report.peakAnonMiB} MiB (${((limit - peaks.anon) / MiB).toFixed(1)} MiB under the limit)`);
      console.log(`  peak not reclaimable      ${report.peakUnreclaimableMiB} MiB; kernel's peak usage (page cache included) ${report.kernelPeakUsageMiB ?? 'n/a'} MiB`);
      console.log(`  fcgi-pm PSS               ${report.daemonPssIdleMiB} MiB idle, ${report.daemonPssAfterMiB} MiB after the load (anon ${report.daemonPssAnonAfterMiB}, file ${report.daemonPssFileAfterMiB}; RssAnon ${report.daemonRssAnonIdleMiB}, ${report.daemonRssAnonAfterMiB} MiB)`);
      for (const m of maps) console.log(`    ${(m.pss / MiB).toFixed(2).padStart(6)} MiB PSS, ${(m.rss / MiB).toFixed(2).padStart(6)} MiB RSS  ${m.name}`);
      console.log(`  log                       ${Object.entries(report.log).map(([k, n]) => `${k}: ${n}`).join('; ')}`);
    }
  } finally {
    clearInterval(watch);
    if (exited === undefined) {
      daemon.kill('SIGTERM');
      await Promise.race([new Promise((r) => daemon.once('exit', r)), sleep(10_000)]);
    }
    if (stderr.trim() !== '' && !JSON_OUT) console.log(`  fcgi-pm stderr: ${stderr.trim().slice(-500)}`);
    await removeBox(box);
    if (KEEP) console.log(`  kept ${dir} (fcgi-pm.yaml, fcgi-pm.log)`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

await main();
