/**
 * Virtual-host figures for docs/BENCHMARKS.md. Prints figures, asserts nothing.
 *
 *   npx tsc -p . && node dist/bench/vhosts-bench.js [--sites 1000,10000] [--rounds 3]
 *
 * For each number of sites, from a directory and from an SQLite table: `fcgi-pm run`
 * (as root: the sites run as nobody) until its "ready" line (the sites read, validated
 * and host-checked); its RssAnon once settled, against the same daemon with one static
 * ondemand pool and no site; then the first request to an idle site through the HTTP
 * listener (one php-cgi spawn) minus that pool's own spawn-to-ready time from status,
 * next to the same difference for the static pool's first request (php's own first
 * request is in both), so the last difference is what a site adds; and the host
 * index's lookup time for an exact name.
 */
import { spawn, execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { stringify as stringifyYaml } from 'yaml';
import { SiteIndex } from '../src/daemon/vhosts/site-index.js';
import type { SiteConfig } from '../src/config/types.js';

const arg = (name: string, def: string): string => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1]! : def;
};
const COUNTS = arg('--sites', '1000,10000').split(',').map(Number);
const ROUNDS = Number(arg('--rounds', '3'));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(ROOT, 'bin', 'fcgi-pm');
const KiB = 1024;
let port = 19_000 + (process.pid % 1000) * 10;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function rssAnon(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('RssAnon:'))!;
  return Number(line.split(/\s+/)[1]) * KiB;
}

function get(url: string, host: string): Promise<number> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { host }, agent: false }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve(performance.now() - t0) : reject(new Error(`${host}: ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A base dir with `n` document roots; a site directory and an SQLite table of them. */
function fixture(n: number): { base: string; dir: string; db: string } {
  const base = mkdtempSync(join(tmpdir(), 'fpm-vhb-'));
  chmodSync(base, 0o755);
  const dir = join(base, 'sites');
  mkdirSync(dir);
  const db = new Database(join(base, 'sites.db'));
  db.exec("CREATE TABLE sites (id TEXT PRIMARY KEY, names TEXT NOT NULL, document_root TEXT NOT NULL, pool TEXT NOT NULL DEFAULT '{}')");
  const insert = db.prepare('INSERT INTO sites VALUES (?, ?, ?, ?)');
  db.transaction(() => {
    for (let i = 0; i < n; i++) {
      const root = join(base, 'www', `s${i}`);
      mkdirSync(root, { recursive: true });
      writeFileSync(join(root, 'index.php'), '<?php echo "ok";');
      writeFileSync(join(dir, `s${i}.yaml`), stringifyYaml({ names: [`s${i}.test`], document_root: root }));
      insert.run(`s${i}`, `s${i}.test`, root, '{}');
    }
  })();
  db.close();
  return { base, dir, db: join(base, 'sites.db') };
}

interface Run {
  readyMs: number;
  rssAnon: number;
  firstMs?: number;
  spawnMs?: number;
}

async function runDaemon(base: string, vhosts: Record<string, unknown> | undefined, probe: number | undefined): Promise<Run> {
  const http = port++;
  const control = join(base, `ctl-${http}.sock`);
  const cfg = {
    control_socket: control,
    listen: [{ protocol: 'http', address: `127.0.0.1:${http}`, ...(vhosts ? { vhosts: true } : { pool: 's0', document_root: join(base, 'www', 's0') }) }],
    ...(vhosts ? { vhosts: { ...vhosts, defaults: { command: ['php-cgi'], user: 'nobody' } } } : { pools: { s0: { command: ['php-cgi'], user: 'nobody' } } }),
    log: { level: 'info', access: false },
  };
  const file = join(base, `cfg-${http}.yaml`);
  writeFileSync(file, stringifyYaml(cfg));
  const t0 = performance.now();
  // bin/fcgi-pm itself (it execs node with the daemon's heap flags), as an operator runs it.
  const child = spawn(BIN, ['run', '-c', file], { stdio: ['ignore', 'pipe', 'inherit'] });
  let readyMs = NaN;
  await new Promise<void>((resolve, reject) => {
    let buf = '';
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      if (Number.isNaN(readyMs) && buf.includes('"kind":"ready"')) {
        readyMs = performance.now() - t0;
        resolve();
      }
    });
    child.once('exit', (code) => reject(new Error(`fcgi-pm exited ${code}: ${buf.slice(-2000)}`)));
  });
  await sleep(1500); // let start-up garbage be collected
  const out: Run = { readyMs, rssAnon: rssAnon(child.pid!) };
  if (probe !== undefined) {
    out.firstMs = await get(`http://127.0.0.1:${http}/index.php`, `s${probe}.test`);
    const st = JSON.parse(execFileSync(process.execPath, [BIN, 'status', '--json', '--control', control], { encoding: 'utf8' })) as { pools: Array<{ name: string; spawns?: { maxMs: number } }> };
    out.spawnMs = st.pools.find((p) => p.name === `s${probe}`)?.spawns?.maxMs;
  }
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
  return out;
}

function lookupNs(n: number): number {
  const sites: SiteConfig[] = [];
  for (let i = 0; i < n; i++) sites.push({ id: `s${i}`, names: [`s${i}.test`, `*.s${i}.test`], documentRoot: '/', settings: {}, baseDir: '/', rewrite: [], origin: '' });
  const { index } = SiteIndex.build(sites);
  const hosts = Array.from({ length: 1000 }, (_, k) => `s${(k * 7919) % n}.test`);
  let hit = 0;
  const loops = 2000;
  const t0 = process.hrtime.bigint();
  for (let j = 0; j < loops; j++) for (const h of hosts) if (index.lookup(h) !== undefined) hit++;
  const ns = Number(process.hrtime.bigint() - t0) / (loops * hosts.length);
  if (hit !== loops * hosts.length) throw new Error('lookup missed');
  return ns;
}

async function main(): Promise<void> {
  const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  console.log(`vhosts bench ${new Date().toISOString()}, node ${process.version}, load ${load}, ${ROUNDS} round(s), medians`);
  const empty = fixture(1);
  const plain: Run[] = [];
  for (let r = 0; r < ROUNDS; r++) plain.push(await runDaemon(empty.base, undefined, 0));
  rmSync(empty.base, { recursive: true, force: true });
  const baseline = plain.map((x) => x.rssAnon);
  const plainAdded = median(plain.map((x) => x.firstMs! - (x.spawnMs ?? NaN)));
  console.log(`no sites (one static ondemand pool): RssAnon ${(median(baseline) / KiB / KiB).toFixed(1)} MiB; first request ${median(plain.map((x) => x.firstMs!)).toFixed(1)} ms, its spawn ${median(plain.map((x) => x.spawnMs ?? NaN)).toFixed(1)} ms, request minus spawn ${plainAdded.toFixed(1)} ms`);
  console.log('source  sites   ready ms  RssAnon added MiB  first request ms  its spawn ms  minus spawn ms  vs static pool ms  exact lookup ns');
  for (const n of COUNTS) {
    const f = fixture(n);
    for (const [kind, vhosts] of [['dir', { dir: f.dir }], ['sqlite', { sqlite: f.db }]] as const) {
      const runs: Run[] = [];
      for (let r = 0; r < ROUNDS; r++) runs.push(await runDaemon(f.base, vhosts, Math.floor(n * 0.517) + r));
      const m = (k: keyof Run): number => median(runs.map((x) => x[k] ?? NaN));
      console.log(
        `${kind.padEnd(7)} ${String(n).padStart(6)} ${m('readyMs').toFixed(0).padStart(10)} ${((m('rssAnon') - median(baseline)) / KiB / KiB).toFixed(1).padStart(18)} ${m('firstMs').toFixed(1).padStart(17)} ${m('spawnMs').toFixed(1).padStart(13)} ${median(runs.map((x) => x.firstMs! - (x.spawnMs ?? NaN))).toFixed(1).padStart(15)} ${(median(runs.map((x) => x.firstMs! - (x.spawnMs ?? NaN))) - plainAdded).toFixed(1).padStart(18)} ${lookupNs(n).toFixed(0).padStart(16)}`,
      );
    }
    rmSync(f.base, { recursive: true, force: true });
  }
}

await main();
