/**
 * Upgrades in place under load, for docs/BENCHMARKS.md: wrk → nginx (kept-alive upstream)
 * → fcgi-pm's FastCGI listener → php-cgi (static pool) on the generated 400-class app
 * (bench/php-app.ts). Runs: steady; the same while the daemon is upgraded N times
 * (`fcgi-pm upgrade`, which returns once the new code serves), each after the previous;
 * then a plain stop and start of the daemon under the same load, for comparison. The
 * daemon is this bench's child, as under runit: the last line says whether the pid it
 * holds still serves. Prints figures, asserts nothing.
 *
 *   npx tsc -p . && node dist/bench/upgrade-under-load.js [--seconds 20] [--connections 10] [--upgrades 5] [--pm static|dynamic|ondemand] [--upgrade exec|spawn] [--resident] [--by cli|signal]
 *
 * --by: how each upgrade is asked for: SIGUSR2 (the default, as a supervisor sends it; the
 * bench then waits for the upgrade's phases line in the log) or `fcgi-pm upgrade` (a CLI
 * run per upgrade: its own Node start, about a third of a second of CPU, competes too).
 * Beside wrk, a probe sends one request every 20 ms and keeps each one's time, so the
 * slow ones are put in the upgrade phase they started in (from the phases lines).
 *
 * --resident: the pool has resident_parent (one php-cgi group whose children are forks of
 * one parent: a new generation starts one php-cgi exec instead of one per worker).
 *
 * --nginx-log: nginx logs every request's end and time (costs nginx a little CPU), and the
 * requests of the upgrades run are put in the phase they started in, with two windows after
 * each takeover (the new code's first second, and the two after): all of wrk's requests
 * counted, where the probe samples one every 20 ms.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { runWrk, type WrkResult } from './compare-wrk.js';
import { generatePhpApp } from './php-app.js';
import { startProbe, type ProbeSample } from './probe.js';

const arg = (name: string, def: number): number => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
};
const SECONDS = arg('--seconds', 20);
const CONNECTIONS = arg('--connections', 10);
const UPGRADES = arg('--upgrades', 5);
const PM = process.argv.includes('--pm') ? process.argv[process.argv.indexOf('--pm') + 1]! : 'static';
const MODE = process.argv.includes('--upgrade') ? process.argv[process.argv.indexOf('--upgrade') + 1]! : 'exec';
const RESIDENT = process.argv.includes('--resident');
const NGINX_LOG = process.argv.includes('--nginx-log');
const BY = process.argv.includes('--by') ? process.argv[process.argv.indexOf('--by') + 1]! : 'signal';
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const randomPort = (): number => 20_000 + Math.floor(Math.random() * 20_000);

const dir = mkdtempSync(join(tmpdir(), 'fpm-upgrade-bench-'));
const app = join(dir, 'app');
generatePhpApp(app, 400);
const fcgiPort = randomPort();
const httpPort = fcgiPort + 1;
const pidFile = join(dir, 'fcgi-pm.pid');
const file = join(dir, 'fcgi-pm.yaml');
writeFileSync(file, stringify({
  control_socket: join(dir, 'control.sock'),
  runtime_dir: join(dir, 'run'),
  pid_file: pidFile,
  upgrade: MODE,
  // info: the upgrades' phase lines (kind upgrade_phases) are printed at the end.
  log: { access: false, level: 'info', file: join(dir, 'daemon.log') },
  listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${fcgiPort}`, pool: 'php' }],
  pools: { php: { command: ['php-cgi'], pm: PM, max_children: 4, kill_timeout: '2s', ...(RESIDENT ? { resident_parent: true } : {}) } },
}));
const bin = join(ROOT, 'bin', 'fcgi-pm');
const startDaemon = (): ChildProcess => spawn(process.execPath, [bin, 'run', '--allow-root', '-c', file], { stdio: ['ignore', 'ignore', 'inherit'] });
let daemon = startDaemon();

for (const d of ['logs', 'tmp']) mkdirSync(join(dir, 'nginx', d), { recursive: true });
const ngxConf = join(dir, 'nginx', 'nginx.conf');
writeFileSync(ngxConf, `daemon off; worker_processes 1; pid ${dir}/nginx/nginx.pid; error_log ${dir}/nginx/logs/error.log warn;
events { worker_connections 1024; }
http { ${NGINX_LOG ? `log_format t '$msec $request_time'; access_log ${dir}/nginx/logs/access.log t buffer=256k flush=1s;` : 'access_log off;'} client_body_temp_path ${dir}/nginx/tmp; fastcgi_temp_path ${dir}/nginx/tmp;
  upstream fcgipm { server 127.0.0.1:${fcgiPort}; keepalive 16; }
  server { listen 127.0.0.1:${httpPort}; root ${app};
    location ~ \\.php$ { include /etc/nginx/fastcgi_params; fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name; fastcgi_pass fcgipm; fastcgi_keep_conn on; } } }
`);
const nginx = spawn('/usr/sbin/nginx', ['-p', join(dir, 'nginx'), '-c', ngxConf], { stdio: 'ignore' });
const url = `http://127.0.0.1:${httpPort}/index.php`;
const waitServing = async (): Promise<void> => {
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(url)).status === 200) return;
    } catch {
      /* not yet */
    }
    if (i > 300) throw new Error('no 200 through nginx');
    await sleep(50);
  }
};
const pidNow = (): number => Number(readFileSync(pidFile, 'utf8').trim());
const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
await waitServing();
await sleep(500);

const row = (what: string, r: WrkResult): string => `| ${what} | ${r.requests} | ${r.rps.toFixed(0)} | ${r.p50Ms.toFixed(1)} | ${r.p99Ms.toFixed(1)} | ${r.non2xx} | ${r.errors} |`;
console.log(`${new Date().toISOString()} load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}; wrk -c${CONNECTIONS} ${SECONDS} s per run; nginx → fcgi-pm (FastCGI, ${PM} 4 php-cgi${RESIDENT ? ' as one resident group' : ''}, upgrade: ${MODE}) → 400-class app`);
const lines = ['| run | requests | req/s | p50 ms | p99 ms | non-2xx | socket errors |', '|---|---|---|---|---|---|---|'];
await runWrk(url, CONNECTIONS, 3); // warm-up
const steady = await runWrk(url, CONNECTIONS, SECONDS);
const steadyP99 = steady.p99Ms;
lines.push(row('steady', steady));

const pids: number[] = [pidNow()];
const logText = (): string => readFileSync(join(dir, 'daemon.log'), 'utf8');
const phaseLines = (): number => logText().split('"upgrade_phases"').length - 1;
const upgrading = (async () => {
  const gap = (SECONDS * 1000) / (UPGRADES + 1);
  for (let i = 0; i < UPGRADES; i++) {
    await sleep(gap);
    if (BY === 'cli') {
      await promisify(execFile)(process.execPath, [bin, 'upgrade', '-c', file], { timeout: 120_000 });
    } else {
      const before = phaseLines();
      process.kill(pidNow(), 'SIGUSR2');
      for (let k = 0; phaseLines() === before; k++) {
        if (k > 1200) throw new Error('no upgrade_phases line within 120 s');
        await sleep(100);
      }
    }
    pids.push(pidNow());
  }
})();
const duringFrom = Date.now();
const probes: ProbeSample[] = [];
const stopProbe = startProbe(url, probes);
const during = await runWrk(url, CONNECTIONS, SECONDS);
await stopProbe();
const duringTo = Date.now();
await upgrading;
lines.push(row(`${UPGRADES} upgrades (${MODE})`, during));
await sleep(3000);
const left = pids.slice(0, -1).filter((p) => p !== pids.at(-1) && alive(p));
const held = daemon.pid!;
const heldServes = daemon.exitCode === null && daemon.signalCode === null && pidNow() === held;

// For comparison: stop and start (what an upgrade used to take), one restart under load.
const restart = (async () => {
  await sleep((SECONDS * 1000) / 2);
  process.kill(pidNow(), 'SIGTERM');
  for (let k = 0; alive(pids.at(-1)!) && k < 600; k++) await sleep(50);
  daemon = startDaemon();
})();
const restarted = await runWrk(url, CONNECTIONS, SECONDS);
await restart;
lines.push(row('1 stop + start', restarted));
console.log(lines.join('\n'));
// What each upgrade's log line says of its phases, and how many workers went on.
const phases: Array<{ name: string; from: number; to: number }> = [];
for (const l of logText().split('\n')) {
  if (!l.includes('"upgrade_phases"')) continue;
  const o = JSON.parse(l) as Record<string, number | boolean | string>;
  // The line is written when the new code serves: the phases end there, one after another.
  let to = Date.parse(String(o['time']));
  for (const [name, key] of [['start (bridge stop, listeners)', 'start_ms'], ['exec and load (bridge serves)', 'boot_ms'], ['stop (drain)', 'stop_ms'], ['bridge start', 'bridge_start_ms'], ['check', 'check_ms']] as const) {
    const ms = Number(o[key] ?? 0);
    phases.push({ name, from: to - ms, to });
    to -= ms;
  }
  const served = Date.parse(String(o['time']));
  phases.push({ name: 'new code, first second', from: served, to: served + 1000 }, { name: 'new code, 1-3 s', from: served + 1000, to: served + 3000 });
  const gap = o['bridge'] === true ? `the bridge served, its stop ${o['bridge_stop_ms']} ms (connections waited)` : `no listener accepted for ${o['unserved_ms']} ms`;
  console.log(`upgrade phases: check ${o['check_ms']} ms (serving), bridge start ${o['bridge_start_ms'] ?? '–'} ms (serving), stop ${o['stop_ms']} ms, exec and load ${o['boot_ms']} ms, start ${o['start_ms']} ms: ${gap}; workers handed over ${o['handed']}, adopted ${o['adopted']}`);
}
// The probe's requests by the phase they started in.
const byPhase = new Map<string, number[]>();
for (const p of probes) {
  const name = phases.find((ph) => p.at >= ph.from && p.at < ph.to)?.name ?? 'between upgrades';
  const list = byPhase.get(name) ?? [];
  list.push(p.ms);
  byPhase.set(name, list);
}
const q = (xs: number[], f: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(f * xs.length))] ?? 0;
console.log(`probe (one request every 20 ms beside wrk, during the upgrades run), by the phase it started in:\n| phase | requests | p50 ms | p90 ms | max ms | over 2× steady p99 (${(2 * steadyP99).toFixed(1)} ms) |\n|---|---|---|---|---|---|`);
for (const [name, xs] of [...byPhase].sort((a, b) => b[1].length - a[1].length)) {
  console.log(`| ${name} | ${xs.length} | ${q(xs, 0.5).toFixed(1)} | ${q(xs, 0.9).toFixed(1)} | ${Math.max(...xs).toFixed(1)} | ${xs.filter((x) => x > 2 * steadyP99).length} |`);
}
if (NGINX_LOG) {
  // Every request of the upgrades run, from nginx's log: its start is its end less its time.
  const byPh = new Map<string, number[]>();
  for (const l of readFileSync(join(dir, 'nginx', 'logs', 'access.log'), 'utf8').split('\n')) {
    const [end, secs] = l.split(' ').map(Number);
    if (end === undefined || secs === undefined || !Number.isFinite(secs)) continue;
    const at = end * 1000 - secs * 1000;
    if (at < duringFrom || at > duringTo) continue;
    const name = phases.find((ph) => at >= ph.from && at < ph.to)?.name ?? 'between upgrades';
    const list = byPh.get(name) ?? [];
    list.push(secs * 1000);
    byPh.set(name, list);
  }
  const all = [...byPh.values()].flat();
  const slow = all.filter((x) => x > 2 * steadyP99).length;
  console.log(`every request of the upgrades run (nginx's log, ms resolution), by the phase it started in; ${all.length} requests, ${slow} over 2× steady p99:\n| phase | requests | p50 ms | p99 ms | max ms | over 2× steady p99 | share of those |\n|---|---|---|---|---|---|---|`);
  for (const [name, xs] of [...byPh].sort((a, b) => b[1].length - a[1].length)) {
    const n = xs.filter((x) => x > 2 * steadyP99).length;
    console.log(`| ${name} | ${xs.length} | ${q(xs, 0.5).toFixed(1)} | ${q(xs, 0.99).toFixed(1)} | ${Math.max(...xs).toFixed(1)} | ${n} | ${slow === 0 ? 0 : Math.round((100 * n) / slow)} % |`);
  }
}
console.log(`daemons: ${pids.join(' → ')}; old daemons still running after the upgrades: ${left.length === 0 ? 'none' : left.join(', ')}`);
console.log(`the pid this bench started and waits on (as runit would), ${held}: ${heldServes ? 'still serves after the upgrades' : 'exited; another pid serves'}`);

await waitServing().catch(() => undefined);
try {
  process.kill(pidNow(), 'SIGTERM');
} catch {
  /* gone */
}
daemon.kill('SIGTERM');
nginx.kill('SIGTERM');
await sleep(3000);
rmSync(dir, { recursive: true, force: true });
