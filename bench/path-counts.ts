/**
 * The daemon's request path counted rather than timed: JavaScript calls and bytes
 * allocated a request, nginx (keep-alive) → fcgi-pm → php-cgi (static, 2 workers, wrk
 * -c10), or the floor relay (bench/relay-floor.ts) in fcgi-pm's place. A loaded machine
 * moves CPU times, not these counts, so two builds can be compared while others run.
 *
 *   node dist/bench/path-counts.js [--mode calls|alloc|syscalls] [--page p100.php] [--seconds 5]
 *       [--warm 8] [--floor] [--repo ../other-checkout] [--top 40]
 *
 * calls: V8's precise coverage with call counts (the daemon runs slower meanwhile; the
 * counts are what it did). alloc: the sampling heap profiler at a 64-byte interval, objects
 * the GC took included, by function and caller. syscalls: `strace -c -f` attached to the
 * daemon (or the floor) and its threads for the counted run, by system call (strace slows
 * it; the counts are what it did). Divided by the requests wrk completed (calls: by the
 * Exchange constructor's count, the requests the daemon began).
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, sleep, start, stopAll, waitReady } from './compare-procs.js';
import { REPO, startFcgiPm, startNginx, writePages } from './compare-stacks.js';
import { runWrk } from './compare-wrk.js';

const argv = process.argv.slice(2);
const opt = (name: string, def: string): string => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1]! : def;
};
const MODE = ((m) => (m === 'alloc' || m === 'syscalls' ? m : 'calls'))(opt('--mode', 'calls'));
const PAGE = opt('--page', 'p100.php');
const SECONDS = Number(opt('--seconds', '5'));
const WARM = Number(opt('--warm', '8'));
const TOP = Number(opt('--top', '40'));
const FLOOR = argv.includes('--floor');
const FROM = argv.includes('--repo') ? opt('--repo', REPO) : REPO;

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'fcgi-pm-counts-'));
  const doc = join(dir, 'www');
  writePages(doc);
  const out = join(dir, 'counts.json');
  process.env.PATH_COUNTS_OUT = out;
  process.env.PATH_COUNTS_MODE = MODE;
  const preload = join(REPO, 'dist', 'bench', 'path-counts-preload.js');
  const nodeArgs = ['--max-semi-space-size=2', '--max-old-space-size=256', ...(MODE === 'syscalls' ? [] : ['--import', preload])];
  try {
    let pid: number;
    let sock: string;
    if (FLOOR) {
      mkdirSync(join(dir, 'floor'));
      sock = join(dir, 'floor', 'floor.sock');
      const p = start('relay-floor', process.execPath, [...nodeArgs, join(REPO, 'dist', 'bench', 'relay-floor.js'), '--listen', `unix:${sock}`, '--workers', '2']);
      await waitReady('relay-floor', { path: sock }, p);
      pid = p.pid;
    } else {
      const d = await startFcgiPm(join(dir, 'fcgi-pm'), doc, { pm: 'static', workers: 2, nodeArgs, repo: FROM });
      pid = d.pid;
      sock = d.sock;
    }
    const port = await freePort();
    await startNginx(join(dir, 'nginx'), doc, [{ port, upstream: `unix:${sock}`, keepAlive: true }]);
    const url = `http://127.0.0.1:${port}/${PAGE}`;
    const until = async (f: string): Promise<void> => {
      while (!existsSync(f)) await sleep(50);
    };
    await runWrk(url, 10, WARM);
    const counting = MODE === 'syscalls' ? await straceFrom(pid, out) : undefined;
    if (counting === undefined) {
      process.kill(pid, 'SIGWINCH');
      await until(`${out}.started`);
    }
    const r = await runWrk(url, 10, SECONDS);
    if (counting === undefined) {
      process.kill(pid, 'SIGWINCH');
      await until(`${out}.done`);
    } else await counting();
    const counts = JSON.parse(readFileSync(out, 'utf8')) as Record<string, number>;
    const begun = Object.entries(counts).find(([k]) => k.startsWith('Exchange src/protocol/exchange.js'))?.[1];
    const n = MODE === 'calls' && begun !== undefined ? begun : r.requests;
    const rows = Object.entries(counts)
      .map(([k, v]) => [k, v / n] as const)
      .sort((a, b) => b[1] - a[1]);
    const total = rows.reduce((a, [, v]) => a + v, 0);
    const ours = rows.filter(([k]) => /(^| )(src|bench)\//.test(k.split(' < ')[0]!)).reduce((a, [, v]) => a + v, 0);
    const what = MODE === 'calls' ? 'JavaScript calls' : MODE === 'alloc' ? 'bytes allocated' : 'system calls';
    process.stdout.write(
      `${FLOOR ? 'floor relay' : `fcgi-pm${FROM === REPO ? '' : ` from ${FROM}`}`}, ${PAGE}, ${r.requests} requests (${r.rps.toFixed(0)} req/s while counted): ` +
        `${what} a request ${total.toFixed(MODE === 'alloc' ? 0 : 2)}${MODE === 'syscalls' ? '' : `, in our own code ${ours.toFixed(MODE === 'calls' ? 1 : 0)}`} (load average ${readFileSync('/proc/loadavg', 'utf8').split(' ')[0]})\n`,
    );
    for (const [k, v] of rows.slice(0, TOP)) process.stdout.write(`${v.toFixed(2).padStart(9)}  ${k}\n`);
  } finally {
    await stopAll();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * strace -c -f attached to pid and its threads; the function returned detaches it and
 * writes its table to `out` as {syscall: calls}.
 */
async function straceFrom(pid: number, out: string): Promise<() => Promise<void>> {
  const table = `${out}.strace`;
  const p = start('strace', 'strace', ['-c', '-f', '-o', table, '-p', String(pid)], {}, 'SIGINT');
  await sleep(500);
  return async () => {
    await p.stop();
    const counts: Record<string, number> = {};
    for (const line of readFileSync(table, 'utf8').split('\n')) {
      const f = line.trim().split(/\s+/);
      const name = f[f.length - 1]!;
      if (f.length >= 5 && /^\d+$/.test(f[3]!) && name !== 'total') counts[name] = Number(f[3]);
    }
    writeFileSync(out, JSON.stringify(counts));
  };
}

process.once('SIGINT', () => void stopAll().then(() => process.exit(130)));
main().catch(async (err: unknown) => {
  process.stderr.write(`path-counts: ${err instanceof Error ? err.stack : String(err)}\n`);
  await stopAll();
  process.exit(1);
});
