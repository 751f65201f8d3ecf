/**
 * The daemon's CPU while nothing happens: `bin/fcgi-pm run` (as operators start it, with
 * its heap flags) with --pools ondemand php-cgi pools at zero workers, one FastCGI
 * listener each, no traffic. Two phases: fresh (never a worker), then after one request
 * to every pool once their workers have stopped again (idle_timeout 1s), which is when
 * timers left armed by the traffic would show. Each phase waits --settle seconds (V8's
 * own collections after start-up or traffic run for about half a minute), then reads
 * every thread's CPU time (/proc/PID/task/TID/schedstat, nanoseconds, not
 * /proc/PID/stat's 10 ms ticks) and the main thread's context switches over --seconds,
 * and prints the CPU as a share of one core and the main thread's wake-ups per second.
 *
 *   node dist/bench/idle-cpu.js [--pools 10] [--seconds 60] [--settle 40] [--baseline DIR]
 *
 * --baseline DIR runs a second built checkout's daemon at the same time (both idle, same
 * window: the machine's load weighs on both alike) for a before/after.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildReport } from '../src/bench/report.js';
import { runBench } from '../src/bench/runner.js';
import { parseTarget } from '../src/bench/target.js';
import { childPids } from '../src/bench/proc-info.js';
import { sleep, start, stopAll, waitReady } from './compare-procs.js';
import { REPO } from './compare-stacks.js';

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1]! : def;
}

interface ThreadTimes {
  /** CPU time of all threads, ns. */
  cpuNs: number;
  /** Voluntary + involuntary context switches of the main thread (each is a wake-up after a block). */
  mainSwitches: number;
}

function threadTimes(pid: number): ThreadTimes {
  let cpuNs = 0;
  let mainSwitches = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      cpuNs += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'latin1').split(' ')[0]);
      if (tid === String(pid)) {
        const st = readFileSync(`/proc/${pid}/task/${tid}/status`, 'latin1');
        mainSwitches = Number(/^voluntary_ctxt_switches:\s*(\d+)/m.exec(st)?.[1] ?? 0) + Number(/^nonvoluntary_ctxt_switches:\s*(\d+)/m.exec(st)?.[1] ?? 0);
      }
    } catch {
      // a thread that just ended
    }
  }
  return { cpuNs, mainSwitches };
}

async function startDaemon(dir: string, repo: string, pools: number): Promise<{ pid: number; dir: string; label: string }> {
  mkdirSync(dir, { recursive: true });
  const listen: string[] = [];
  const defs: string[] = [];
  for (let i = 0; i < pools; i++) {
    listen.push(`  - { protocol: fastcgi, address: "unix:${dir}/p${i}.sock", pool: p${i} }`);
    defs.push(`  p${i}: { command: ["/usr/bin/php-cgi"], pm: ondemand, max_children: 4, idle_timeout: 1s }`);
  }
  const conf = `listen:\n${listen.join('\n')}\npools:\n${defs.join('\n')}\nlog: { level: warn }\nruntime_dir: ${dir}\n`;
  writeFileSync(join(dir, 'fcgi-pm.yaml'), conf);
  const p = start('fcgi-pm', join(repo, 'bin', 'fcgi-pm'), ['run', '-c', join(dir, 'fcgi-pm.yaml'), '--allow-root'], { cwd: dir });
  for (let i = 0; i < pools; i++) await waitReady('fcgi-pm', { path: `${dir}/p${i}.sock` }, p);
  return { pid: p.pid, dir, label: repo === REPO ? 'this build' : `baseline ${repo}` };
}

/** One request to every pool (each spawns a worker), then until every worker has stopped. */
async function traffic(d: { pid: number; dir: string }, pools: number, doc: string): Promise<void> {
  for (let i = 0; i < pools; i++) {
    const opts = {
      target: parseTarget(`fcgi://unix:${d.dir}/p${i}.sock:/idle.php`),
      request: { method: 'GET', body: undefined, headers: [], params: [['DOCUMENT_ROOT', doc]] as Array<[string, string]>, keepAlive: false },
      concurrency: 1,
      requests: 1,
      timeoutMs: 30_000,
    };
    const r = buildReport(opts, await runBench(opts));
    if (r.status['2xx'] !== 1) throw new Error(`pool p${i}: no 200: ${JSON.stringify(r.status)} ${JSON.stringify(r.errors)}`);
  }
  const deadline = Date.now() + 30_000;
  while (childPids(d.pid).length > 0) {
    if (Date.now() > deadline) throw new Error('workers did not stop after idle_timeout');
    await sleep(100);
  }
}

async function main(): Promise<void> {
  const pools = Number(arg('--pools', '10'));
  const seconds = Number(arg('--seconds', '60'));
  const settle = Number(arg('--settle', '40'));
  const baseline = process.argv.includes('--baseline') ? arg('--baseline', '') : undefined;
  const dir = mkdtempSync(join(tmpdir(), 'fcgi-pm-idle-'));
  const doc = join(dir, 'www');
  mkdirSync(doc);
  writeFileSync(join(doc, 'idle.php'), "<?php echo 'ok';\n");
  try {
    const daemons = [await startDaemon(join(dir, 'a'), REPO, pools)];
    if (baseline !== undefined) daemons.push(await startDaemon(join(dir, 'b'), baseline, pools));
    process.stdout.write(`idle daemon, ${pools} ondemand pools at zero workers, ${seconds} s after ${settle} s of settling\n`);
    for (const phase of ['fresh', 'after one request per pool, workers stopped again']) {
      if (phase !== 'fresh') for (const d of daemons) await traffic(d, pools, doc);
      await sleep(settle * 1000);
      const load0 = readFileSync('/proc/loadavg', 'utf8').split(' ')[0];
      const before = daemons.map((d) => threadTimes(d.pid));
      const t0 = process.hrtime.bigint();
      await sleep(seconds * 1000);
      const wallS = Number(process.hrtime.bigint() - t0) / 1e9;
      const after = daemons.map((d) => threadTimes(d.pid));
      const load1 = readFileSync('/proc/loadavg', 'utf8').split(' ')[0];
      process.stdout.write(`${phase} (load average, 1 min, ${load0} → ${load1}):\n`);
      for (const [i, d] of daemons.entries()) {
        const cpuMs = (after[i]!.cpuNs - before[i]!.cpuNs) / 1e6;
        const wakeups = after[i]!.mainSwitches - before[i]!.mainSwitches;
        process.stdout.write(`  ${d.label}: CPU ${cpuMs.toFixed(1)} ms = ${(cpuMs / 10 / wallS).toFixed(3)} % of a core; main thread ${(wakeups / wallS).toFixed(2)} wake-ups/s\n`);
      }
    }
  } finally {
    await stopAll();
    rmSync(dir, { recursive: true, force: true });
  }
}

process.once('SIGINT', () => void stopAll().then(() => process.exit(130)));
main().catch(async (err: unknown) => {
  process.stderr.write(`idle-cpu: ${err instanceof Error ? err.stack : String(err)}\n`);
  await stopAll();
  process.exit(1);
});
