/**
 * Profiles the daemon's hot path: fcgi-pm runs under `node --cpu-prof` behind nginx
 * (FastCGI keep-alive, as in bench/compare.sh; --no-keepalive for a connection per request,
 * nginx's default) or with its own HTTP listener, serving
 * php-cgi or the trivial backend, while wrk loads it; then prints the daemon's CPU time
 * per request and the functions that cost most (bench/cpuprofile-top.ts).
 *
 *   node dist/bench/profile.js [--page p100.php|p8750.php] [--seconds 10] [--workers 2]
 *       [--front nginx|http] [--no-keepalive] [--backend php|trivial] [--keep DIR] [--strace] [--node-args "--max-semi-space-size=1"]
 *
 * --strace also counts the daemon's system calls per request (strace -c, which slows it).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, cpSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cpuSeconds, rssAnon } from '../src/bench/proc-info.js';
import { summarise } from './cpuprofile-top.js';
import { freePort, sleep, stopAll, track, untrack } from './compare-procs.js';
import { REPO, startFcgiPm, startNginx, writePages } from './compare-stacks.js';
import { runWrk } from './compare-wrk.js';

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1]! : def;
}

async function main(): Promise<void> {
  const page = arg('--page', 'p100.php');
  const seconds = Number(arg('--seconds', '10'));
  const workers = Number(arg('--workers', '2'));
  const front = arg('--front', 'nginx');
  const backend = arg('--backend', 'php');
  const keepAlive = !process.argv.includes('--no-keepalive');
  const keep = process.argv.includes('--keep') ? arg('--keep', '') : undefined;
  const dir = mkdtempSync(join(tmpdir(), 'fcgi-pm-prof-'));
  const doc = join(dir, 'www');
  writePages(doc);
  const profDir = join(dir, 'prof');
  const httpPort = await freePort();
  const command = backend === 'trivial' ? [process.execPath, join(REPO, 'dist/bench/trivial-backend.js'), '--fastcgi', 'fd0', '--size', page === 'p8750.php' ? '8750' : '100'] : ['/usr/bin/php-cgi'];
  const extra = arg('--node-args', '').split(' ').filter((x) => x !== '');
  const d = await startFcgiPm(join(dir, 'fcgi-pm'), doc, { pm: 'static', workers, httpPort, command, nodeArgs: [...extra, '--cpu-prof', `--cpu-prof-dir=${profDir}`] });
  let url = `http://127.0.0.1:${httpPort}`;
  let ngx: { stop(): Promise<void> } | undefined;
  if (front === 'nginx') {
    const port = await freePort();
    ngx = await startNginx(join(dir, 'nginx'), doc, [{ port, upstream: `unix:${d.sock}`, keepAlive }]);
    url = `http://127.0.0.1:${port}`;
  }
  try {
    await runWrk(`${url}/${page}`, 10, 2); // warm-up
    let strace: ReturnType<typeof spawn> | undefined;
    let straceOut = '';
    if (process.argv.includes('--strace')) {
      strace = spawn('strace', ['-c', '-f', '-p', String(d.pid)], { stdio: ['ignore', 'ignore', 'pipe'] });
      if (strace.pid !== undefined) track(strace.pid, 'strace', 'SIGINT');
      strace.stderr!.on('data', (b: Buffer) => (straceOut += b.toString()));
      await sleep(500);
    }
    const c0 = cpuSeconds(d.pid)!;
    const r = await runWrk(`${url}/${page}`, 10, seconds);
    const c1 = cpuSeconds(d.pid)!;
    if (strace !== undefined && strace.pid !== undefined) {
      process.kill(strace.pid, 'SIGINT');
      await new Promise((res) => strace!.once('exit', res));
      untrack(strace.pid);
    }
    const anon = rssAnon(d.pid);
    process.stdout.write(`${front}${front === 'nginx' && !keepAlive ? ' (no keep-alive)' : ''} → fcgi-pm → ${backend}, ${page}, c=10, ${seconds} s: ${r.rps.toFixed(0)} req/s, p99 ${r.p99Ms.toFixed(2)} ms; daemon CPU ${(((c1 - c0) * 1e6) / r.requests).toFixed(1)} µs/request, RssAnon ${((anon ?? 0) / 1048576).toFixed(1)} MiB${extra.length > 0 ? ` (node ${extra.join(' ')})` : ''}\n`);
    if (straceOut !== '') {
      process.stdout.write(`\nstrace -c (system calls of the daemon${strace ? ', under strace so slower' : ''}); divide "calls" by ~${r.requests} requests:\n${straceOut.split('\n').slice(0, 22).join('\n')}\n`);
    }
  } finally {
    await ngx?.stop();
    await d.stop();
    await stopAll();
  }
  // --cpu-prof writes its file as the daemon exits.
  for (let i = 0; i < 50 && readdirSync(profDir, { withFileTypes: true }).length === 0; i++) await sleep(100);
  const file = readdirSync(profDir).find((f) => f.endsWith('.cpuprofile'));
  if (file === undefined) throw new Error('no .cpuprofile written');
  const s = summarise(JSON.parse(readFileSync(join(profDir, file), 'utf8')));
  const top = (xs: typeof s.costs, by: 'selfMs' | 'totalMs', n: number): typeof s.costs => [...xs].sort((a, b) => b[by] - a[by]).slice(0, n);
  const lines = [`\nbusy ${s.busyMs.toFixed(0)} ms, GC ${s.gcMs.toFixed(0)} ms; % of busy time`, '  self%  total%  function  (file:line)'];
  for (const c of top(s.costs, 'selfMs', 25)) lines.push(`  ${c.selfPct.toFixed(1).padStart(5)}  ${c.totalPct.toFixed(1).padStart(6)}  ${c.name}  ${c.where}`);
  lines.push('', "  total%  self%  fcgi-pm's own functions, inclusive");
  for (const c of top(s.costs.filter((x) => x.where.startsWith('dist/src/')), 'totalMs', 25)) lines.push(`  ${c.totalPct.toFixed(1).padStart(6)}  ${c.selfPct.toFixed(1).padStart(5)}  ${c.name}  ${c.where}`);
  process.stdout.write(`${lines.join('\n')}\n`);
  if (keep !== undefined && keep !== '') {
    cpSync(join(profDir, file), join(keep, file));
    process.stdout.write(`\nprofile kept: ${join(keep, file)} (open in Chrome DevTools → Performance)\n`);
  }
  rmSync(dir, { recursive: true, force: true });
}

process.once('SIGINT', () => void stopAll().then(() => process.exit(130)));
main().catch(async (err: unknown) => {
  process.stderr.write(`profile: ${err instanceof Error ? err.stack : String(err)}\n`);
  await stopAll();
  process.exit(1);
});
