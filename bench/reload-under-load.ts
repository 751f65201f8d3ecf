/**
 * Reloading a changed php-cgi pool under load, for docs/BENCHMARKS.md: wrk through
 * fcgi-pm's HTTP listener on the generated 400-class app (bench/php-app.ts), first
 * steady, then while the pool's config is changed and reloaded (SIGHUP) every second.
 * Prints figures, asserts nothing.
 *
 *   npx tsc -p . && node dist/bench/reload-under-load.js [--seconds 8] [--connections 8] [--rounds 2] [--fcgi-pm BIN] [--resident] [--change env|scaling] [--log FILE] [--peer-fpm]
 *
 * --peer-fpm: then the same rounds on php-fpm (pm static, 8 children, its own config)
 * behind nginx (kept-alive FastCGI), reloaded as its operators do, SIGUSR2 every second
 * (the master finishes its children's requests, then executes itself again: a new opcache
 * memory, and every child compiles the application anew). wrk reaches fcgi-pm's HTTP
 * listener directly and php-fpm through nginx: compare each stack's share of its own steady
 * figures, not the req/s across stacks.
 * --fcgi-pm runs another build's bin/fcgi-pm (an older commit's, for a before/after).
 * --resident: the pool has resident_parent (one php-cgi group: each generation is one exec
 * whose children share its opcache, instead of one exec per worker).
 * --change: what each reload changes: the pool's env (default: a new generation of
 * workers), or its scaling keys alone (max_children 8 ↔ 9: taken in place).
 * --log: keep the daemon's log lines (info) there.
 *
 * The daemon is bin/fcgi-pm run (its own temp dir and config); pool: ondemand,
 * max_children 8, idle_timeout 60 s. Beside each run: the CPU the daemon and its workers
 * used (from /proc: live workers and the ones reaped meanwhile; the daemon runs under a
 * small subreaper, so the children of a php-cgi group whose parent exits first are reaped
 * there and counted too, not by init), and per reload, from the
 * daemon's log: how long it took (SIGHUP to commit), how many workers the new generation
 * started by the commit and their spawn → ready time, how many until the next reload (a
 * reload under load starts the rest after the commit, paced by their first requests); how long each hand-over from the old generation
 * lasted and why it ended, and how long the old generations then drained.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { startNginx, startPhpFpm } from './compare-stacks.js';
import { runWrk, type WrkResult } from './compare-wrk.js';
import { generatePhpApp } from './php-app.js';
import { treeCpu, type TreeCpu } from './proc-tree-cpu.js';
import { startProbe, type ProbeSample } from './probe.js';

const arg = (name: string, def: number): number => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
};
const SECONDS = arg('--seconds', 8);
const CONNECTIONS = arg('--connections', 8);
const ROUNDS = arg('--rounds', 2);
const RESIDENT = process.argv.includes('--resident');
const CHANGE = process.argv.includes('--change') ? process.argv[process.argv.indexOf('--change') + 1]! : 'env';
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const dir = mkdtempSync(join(tmpdir(), 'fpm-reload-bench-'));
const app = join(dir, 'app');
generatePhpApp(app, 400);
const port = 20_000 + Math.floor(Math.random() * 20_000);
const file = join(dir, 'fcgi-pm.yaml');
const logFile = process.argv.includes('--log') ? process.argv[process.argv.indexOf('--log') + 1]! : join(dir, 'daemon.log');
const config = (generation: number): void =>
  writeFileSync(file, stringify({
    control_socket: join(dir, 'control.sock'),
    runtime_dir: join(dir, 'run'),
    log: { access: false, level: 'info', file: logFile },
    listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'php', document_root: app }],
    pools: {
      php: {
        command: ['php-cgi'],
        pm: 'ondemand',
        idle_timeout: '60s',
        ...(CHANGE === 'scaling' ? { max_children: 8 + (generation % 2) } : { max_children: 8, env: { GENERATION: String(generation) } }),
        ...(RESIDENT ? { resident_parent: true } : {}),
      },
    },
  }));
config(0);
const bin = process.argv.includes('--fcgi-pm') ? process.argv[process.argv.indexOf('--fcgi-pm') + 1]! : join(ROOT, 'bin', 'fcgi-pm');
/**
 * The daemon's parent: a child subreaper (prctl PR_SET_CHILD_SUBREAPER) that passes on the
 * signals the bench sends and reaps what is orphaned below the daemon (a php-cgi group's
 * parent does not wait for its children), so that their CPU lands in its cutime.
 */
const SUBREAPER = `
import ctypes, os, signal, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
for s in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
    signal.signal(s, lambda n, f: os.kill(pid, n))
while True:
    try:
        p, st = os.wait()
    except ChildProcessError:
        sys.exit(0)
    if p == pid:
        sys.exit(os.waitstatus_to_exitcode(st) & 0xff)
`;
const daemon = spawn('python3', ['-c', SUBREAPER, process.execPath, bin, 'run', '--allow-root', '-c', file], { stdio: ['ignore', 'ignore', 'inherit'] });
const url = `http://127.0.0.1:${port}/index.php`;
for (let i = 0; ; i++) {
  try {
    if ((await fetch(url)).status === 200) break;
  } catch {
    /* not yet */
  }
  if (i > 200) throw new Error('fcgi-pm did not answer');
  await sleep(50);
}

/** A run's row; CPU: the daemon's and its workers' in ms per second of the run, and the workers' µs per request. */
const row = (what: string, r: WrkResult, cpu: TreeCpu): string => {
  const perReq = r.rps > 0 ? (cpu.workers * 1000) / (r.rps * SECONDS) : 0;
  return `| ${what} | ${r.rps.toFixed(0)} | ${r.p50Ms.toFixed(1)} | ${r.p99Ms.toFixed(1)} | ${r.errors + r.non2xx} | ${(cpu.self / SECONDS).toFixed(0)} | ${(cpu.workers / SECONDS).toFixed(0)} | ${perReq.toFixed(0)} |`;
};
/** The fcgi-pm process: the subreaper's one child. */
const daemonPid = Number(readFileSync(`/proc/${daemon.pid}/task/${daemon.pid}/children`, 'latin1').trim().split(' ')[0]);
/** The daemon's own CPU, and everything below it, reaped orphans included. */
const cpuNow = (): TreeCpu => {
  const all = treeCpu(daemon.pid!);
  const self = treeCpu(daemonPid).self;
  return { self, workers: all.workers - self };
};
const cpuSince = (a: TreeCpu): TreeCpu => {
  const b = cpuNow();
  return { self: b.self - a.self, workers: b.workers - a.workers };
};
console.log(`${new Date().toISOString()} load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}; wrk -c${CONNECTIONS} ${SECONDS} s per run; ${bin}${RESIDENT ? '; resident_parent (one php-cgi group)' : ''}; each reload changes the pool's ${CHANGE === 'scaling' ? 'max_children (8 ↔ 9)' : 'env'}`);
const lines = ['| run | req/s | p50 ms | p99 ms | failed | daemon CPU ms/s | workers CPU ms/s | workers µs/req |', '|---|---|---|---|---|---|---|---|'];
await runWrk(url, CONNECTIONS, 3); // warm-up: the pool grows to its width under this load
let generation = 0;
/** One request every 20 ms beside wrk during the reloads runs: when it started, how long it took. */
const probes: ProbeSample[] = [];
let steadyP99 = 0;
for (let round = 0; round < ROUNDS; round++) {
  let cpu0 = cpuNow();
  const steady = await runWrk(url, CONNECTIONS, SECONDS);
  steadyP99 = Math.max(steadyP99, steady.p99Ms);
  lines.push(row('steady', steady, cpuSince(cpu0)));
  cpu0 = cpuNow();
  const reloader = reloadEverySecond(() => {
    config(++generation);
    daemon.kill('SIGHUP');
  });
  const stopProbe = startProbe(url, probes);
  const r = await runWrk(url, CONNECTIONS, SECONDS);
  const cpu = cpuSince(cpu0);
  await stopProbe();
  lines.push(row(`${await reloader.stop()} reloads`, r, cpu));
  await sleep(2000);
}
for (const l of lines) console.log(l);
printPhases();
console.log(`load average at the end ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
const exited = new Promise((r) => daemon.once('exit', r));
daemon.kill('SIGTERM');
await exited;
if (process.argv.includes('--peer-fpm')) await fpmRounds();
rmSync(dir, { recursive: true, force: true });

/** The same rounds on php-fpm behind nginx, reloaded by SIGUSR2 every second (see the header). */
async function fpmRounds(): Promise<void> {
  const fpm = await startPhpFpm(join(dir, 'fpm'), { pm: 'static', workers: 8 });
  const fpmPort = port + 1;
  const ngx = await startNginx(join(dir, 'nginx'), app, [{ port: fpmPort, upstream: `unix:${fpm.sock}`, keepAlive: true }]);
  const fpmUrl = `http://127.0.0.1:${fpmPort}/index.php`;
  console.log(`\nphp-fpm (pm static, 8 children) behind nginx, SIGUSR2 every second; load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  const out = ['| run | req/s | p50 ms | p99 ms | failed | master CPU ms/s | workers CPU ms/s | workers µs/req |', '|---|---|---|---|---|---|---|---|'];
  await runWrk(fpmUrl, CONNECTIONS, 3);
  for (let round = 0; round < ROUNDS; round++) {
    let cpu0 = treeCpu(fpm.pid);
    const since = (a: TreeCpu): TreeCpu => {
      const b = treeCpu(fpm.pid);
      return { self: b.self - a.self, workers: b.workers - a.workers };
    };
    out.push(row('steady', await runWrk(fpmUrl, CONNECTIONS, SECONDS), since(cpu0)));
    cpu0 = treeCpu(fpm.pid);
    const reloader = reloadEverySecond(() => process.kill(fpm.pid, 'SIGUSR2'));
    const r = await runWrk(fpmUrl, CONNECTIONS, SECONDS);
    const cpu = since(cpu0);
    out.push(row(`${await reloader.stop()} reloads`, r, cpu));
    await sleep(2000);
  }
  for (const l of out) console.log(l);
  await ngx.stop();
  await fpm.stop();
}

/** `reload()` once a second until stop(), which resolves with how many were sent. */
function reloadEverySecond(reload: () => void): { stop(): Promise<number> } {
  let reloading = true;
  let reloads = 0;
  const loop = (async () => {
    while (reloading) {
      await sleep(1000);
      if (!reloading) break;
      reload();
      reloads++;
    }
  })();
  return {
    async stop() {
      reloading = false;
      await loop;
      return reloads;
    },
  };
}

/** Per reload, from the daemon's log lines: its phases (see the header). */
function printPhases(): void {
  interface Line { time: string; msg: string; kind?: string; ok?: boolean; spawnMs?: number; retuned?: string[]; handoverMs?: number; why?: string }
  const log: Line[] = [];
  for (const l of readFileSync(logFile, 'utf8').split('\n')) {
    try {
      log.push(JSON.parse(l) as Line);
    } catch {
      // not a JSON line
    }
  }
  const at = (l: Line): number => Date.parse(l.time);
  const windows: Array<{ name: string; from: number; to: number }> = [];
  const out = ['| reload | SIGHUP → commit ms | workers started by the commit | spawn → ready ms (mean / max) | workers started until the next reload | retuned in place |', '|---|---|---|---|---|---|'];
  let n = 0;
  for (let i = 0; i < log.length; i++) {
    if (!(log[i]!.kind === 'reload' && log[i]!.msg.startsWith('reloading'))) continue;
    const begin = at(log[i]!);
    const spawns: number[] = [];
    let retuned = '';
    let j = i + 1;
    for (; j < log.length && !(log[j]!.kind === 'reload' && log[j]!.ok !== undefined); j++) {
      if (log[j]!.spawnMs !== undefined) spawns.push(log[j]!.spawnMs!);
      if (log[j]!.retuned !== undefined) retuned = log[j]!.retuned!.join(', ');
    }
    const done = log[j];
    if (done === undefined) break;
    // A start paced by first requests (a reload under load) starts its other workers after the commit.
    let after = 0;
    for (let k = j + 1; k < log.length && !(log[k]!.kind === 'reload' && log[k]!.msg.startsWith('reloading')); k++) if (log[k]!.spawnMs !== undefined) after++;
    const mean = spawns.length > 0 ? spawns.reduce((a, b) => a + b, 0) / spawns.length : 0;
    windows.push({ name: 'starting the new generation', from: begin, to: at(done) }, { name: 'first second after the commit', from: at(done), to: at(done) + 1000 });
    out.push(`| ${++n} | ${at(done) - begin} | ${spawns.length} | ${spawns.length > 0 ? `${mean.toFixed(0)} / ${Math.max(...spawns)}` : '–'} | ${spawns.length + after} | ${retuned || '–'} |`);
  }
  for (const l of out) console.log(l);
  // The hand-overs, as the daemon says each ended (in the order they ended), and the old generations' drains.
  const handovers = log.filter((l) => l.handoverMs !== undefined).map((l) => `${l.handoverMs} ms (${l.why})`);
  if (handovers.length > 0) console.log(`hand-overs: ${handovers.join(', ')}`);
  const drains: number[] = [];
  for (let k = 0; k < log.length; k++) {
    if (!/ stopping$/.test(log[k]!.msg)) continue;
    const stopped = log.slice(k).find((l) => / stopped$/.test(l.msg));
    if (stopped !== undefined) drains.push(at(stopped) - at(log[k]!));
  }
  if (drains.length > 0) console.log(`old generations drained in (ms): ${drains.join(', ')}`);
  // Where the probe's requests waited: by the window they started in (a later reload's window wins).
  const by = new Map<string, number[]>();
  for (const p of probes) {
    const name = [...windows].reverse().find((w) => p.at >= w.from && p.at < w.to)?.name ?? 'otherwise';
    by.set(name, [...(by.get(name) ?? []), p.ms]);
  }
  const q = (xs: number[], f: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(f * xs.length))] ?? 0;
  console.log(`probe (one request every 20 ms beside wrk during the reloads runs), by when it started:\n| window | requests | p50 ms | p90 ms | max ms | over 2× steady p99 (${(2 * steadyP99).toFixed(1)} ms) |\n|---|---|---|---|---|---|`);
  for (const [name, xs] of by) console.log(`| ${name} | ${xs.length} | ${q(xs, 0.5).toFixed(1)} | ${q(xs, 0.9).toFixed(1)} | ${Math.max(...xs).toFixed(1)} | ${xs.filter((x) => x > 2 * steadyP99).length} |`);
}
