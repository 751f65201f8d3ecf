/**
 * The rows of the overload-as-users-expect-it table that are not open loops (those are
 * bench/overload.ts), each fcgi-pm beside PHP-FPM in the same run, through one nginx,
 * every server with its defaults for queueing:
 *
 *   closed     20 clients in a closed loop (each waits for its answer, kept-alive to
 *              nginx) on a pool of 4 workers of a 100 ms page: answers by status,
 *              latency p50/p99.
 *   noisy      a quiet pool (1 client, a small page) alone, then beside a noisy pool (30
 *              clients of a 20 ms CPU-bound page, from wrk), 4 workers each, one daemon
 *              (one php-fpm master): the quiet pool's p99 beside ÷ alone, and what the
 *              noisy pool was served.
 *   slowloris  a request head sent one byte every 0.5 s, header_timeout 3 s (nginx:
 *              client_header_timeout 3s): when each closes the connection, from the
 *              connect.
 *
 *   node dist/bench/fairness.js [--rows closed,noisy,slowloris] [--seconds 8]
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { start, stopAll, waitReady, type Started } from './compare-procs.js';
import { findPhpFpm, REPO, runNginx } from './compare-stacks.js';
import { runWrk } from './compare-wrk.js';
import { freePort, machineLine } from './django.js';
import { pct } from './overload.js';

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1]! : def;
}

const PAGES: Record<string, string> = {
  'sleep.php': '<?php usleep(100000); echo "slept\\n";',
  'cpu.php': '<?php $t = hrtime(true) + 20000000; $x = 0; while (hrtime(true) < $t) { $x++; } echo "spun $x\\n";',
  'small.php': '<?php echo "hello\\n";',
};

interface Pool {
  name: string;
  workers: number;
}

/** One fcgi-pm with a FastCGI Unix listener per pool, pm static, every queue key at its default. */
async function startFcgiPm(dir: string, pools: Pool[]): Promise<{ proc: Started; socks: Map<string, string> }> {
  mkdirSync(dir, { recursive: true });
  const socks = new Map(pools.map((p) => [p.name, join(dir, `${p.name}.sock`)]));
  const listen = pools.map((p) => `  - { protocol: fastcgi, address: "unix:${socks.get(p.name)}", pool: ${p.name} }`).join('\n');
  const body = pools.map((p) => `  ${p.name}:\n    command: [/usr/bin/php-cgi]\n    pm: static\n    max_children: ${p.workers}\n`).join('');
  writeFileSync(join(dir, 'fcgi-pm.yaml'), `listen:\n${listen}\npools:\n${body}log: { level: warn, access: false }\nruntime_dir: ${dir}\ncontrol_socket: ${dir}/control.sock\n`);
  const proc = start('fcgi-pm', join(REPO, 'bin', 'fcgi-pm'), ['run', '-c', join(dir, 'fcgi-pm.yaml'), '--allow-root'], { cwd: dir });
  for (const s of socks.values()) await waitReady('fcgi-pm', { path: s }, proc);
  return { proc, socks };
}

/** One php-fpm master with a pool per entry, pm static, listen.backlog at its default. */
async function startFpm(dir: string, pools: Pool[]): Promise<{ proc: Started; socks: Map<string, string> }> {
  mkdirSync(dir, { recursive: true });
  const root = process.getuid?.() === 0;
  const socks = new Map(pools.map((p) => [p.name, join(dir, `${p.name}.sock`)]));
  const conf = `[global]\npid = ${dir}/fpm.pid\nerror_log = ${dir}/fpm-error.log\ndaemonize = no\n` +
    pools.map((p) => `[${p.name}]\n${root ? 'user = root\n' : ''}listen = ${socks.get(p.name)}\npm = static\npm.max_children = ${p.workers}\n`).join('');
  writeFileSync(join(dir, 'php-fpm.conf'), conf);
  const proc = start('php-fpm', findPhpFpm(), ['-F', '-y', join(dir, 'php-fpm.conf'), '-p', dir, ...(root ? ['-R'] : [])], {}, 'SIGTERM');
  for (const s of socks.values()) await waitReady('php-fpm', { path: s }, proc);
  return { proc, socks };
}

/** nginx with one server per (stack, pool), each passing *.php to that pool's socket. */
async function startFront(dir: string, doc: string, routes: Array<{ port: number; sock: string }>, extra = ''): Promise<Started> {
  const blocks = routes.map(
    (r, i) => `upstream u${i} { server unix:${r.sock}; }
  server { listen 127.0.0.1:${r.port} backlog=4096; root ${doc}; ${extra}
    location ~ \\.php$ { include /etc/nginx/fastcgi_params; fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name; fastcgi_pass u${i}; } }`,
  );
  return runNginx(dir, blocks, routes.map((r) => r.port));
}

interface LoopResult {
  statuses: Record<number, number>;
  errors: number;
  ms: number[];
}

/** `clients` loops, each one request after another on its own kept-alive connection, for `seconds`. */
async function closedLoop(url: string, clients: number, seconds: number): Promise<LoopResult> {
  const r: LoopResult = { statuses: {}, errors: 0, ms: [] };
  const end = performance.now() + seconds * 1000;
  const one = (agent: http.Agent): Promise<void> =>
    new Promise((resolve) => {
      const t0 = performance.now();
      const req = http.get(url, { agent, timeout: 30_000 }, (res) => {
        res.resume();
        res.on('end', () => {
          r.ms.push(performance.now() - t0);
          const s = res.statusCode ?? 0;
          r.statuses[s] = (r.statuses[s] ?? 0) + 1;
          resolve();
        });
      });
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', () => {
        r.errors++;
        resolve();
      });
    });
  await Promise.all(
    Array.from({ length: clients }, async () => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      while (performance.now() < end) await one(agent);
      agent.destroy();
    }),
  );
  return r;
}

function statusText(r: LoopResult): string {
  return Object.entries(r.statuses).map(([s, n]) => `${n} × ${s}`).join(', ') + (r.errors > 0 ? `, ${r.errors} client errors` : '');
}

async function rowClosed(dir: string, doc: string, seconds: number): Promise<void> {
  const pools = [{ name: 'app', workers: 4 }];
  const fpm = await startFpm(join(dir, 'fpm-closed'), pools);
  const ours = await startFcgiPm(join(dir, 'ours-closed'), pools);
  const [pf, po] = [await freePort(), await freePort()];
  const ngx = await startFront(join(dir, 'nginx-closed'), doc, [{ port: pf, sock: fpm.socks.get('app')! }, { port: po, sock: ours.socks.get('app')! }]);
  process.stdout.write(`\nclosed loop: 20 clients (kept-alive to nginx) on 4 workers of a 100 ms page, ${seconds} s each, windows interleaved; ${machineLine()}\n`);
  process.stdout.write('| stack | answers | req/s | p50 ms | p99 ms |\n|---|---|---|---|---|\n');
  for (let round = 0; round < 2; round++) {
    for (const [name, port] of [['php-fpm', pf], ['fcgi-pm', po]] as const) {
      const r = await closedLoop(`http://127.0.0.1:${port}/sleep.php`, 20, seconds);
      process.stdout.write(`| ${name} | ${statusText(r)} | ${(r.ms.length / seconds).toFixed(1)} | ${pct(r.ms, 50).toFixed(0)} | ${pct(r.ms, 99).toFixed(0)} |\n`);
    }
  }
  await ngx.stop();
  await fpm.proc.stop();
  await ours.proc.stop();
}

async function rowNoisy(dir: string, doc: string, seconds: number): Promise<void> {
  const pools = [{ name: 'quiet', workers: 4 }, { name: 'noisy', workers: 4 }];
  const fpm = await startFpm(join(dir, 'fpm-noisy'), pools);
  const ours = await startFcgiPm(join(dir, 'ours-noisy'), pools);
  const ports = { fpm: { quiet: await freePort(), noisy: await freePort() }, ours: { quiet: await freePort(), noisy: await freePort() } };
  const ngx = await startFront(join(dir, 'nginx-noisy'), doc, [
    { port: ports.fpm.quiet, sock: fpm.socks.get('quiet')! },
    { port: ports.fpm.noisy, sock: fpm.socks.get('noisy')! },
    { port: ports.ours.quiet, sock: ours.socks.get('quiet')! },
    { port: ports.ours.noisy, sock: ours.socks.get('noisy')! },
  ]);
  process.stdout.write(`\nnoisy neighbour: quiet pool (1 client, small page) alone, then beside a noisy pool (30 clients of a 20 ms CPU-bound page), 4 workers each, ${seconds} s windows; ${machineLine()}\n`);
  process.stdout.write('| stack | quiet p99 alone ms | quiet p99 beside ms | ratio | noisy served req/s | noisy answers |\n|---|---|---|---|---|---|\n');
  for (let round = 0; round < 2; round++) {
    for (const name of ['php-fpm', 'fcgi-pm'] as const) {
      const p = name === 'php-fpm' ? ports.fpm : ports.ours;
      const quietUrl = `http://127.0.0.1:${p.quiet}/small.php`;
      const alone = await closedLoop(quietUrl, 1, seconds);
      // The noise from wrk, a process of its own: timed in this one, the quiet client's
      // answers would wait behind the event loop's handling of 30 noisy ones.
      const [beside, noise] = await Promise.all([closedLoop(quietUrl, 1, seconds), runWrk(`http://127.0.0.1:${p.noisy}/cpu.php`, 30, seconds)]);
      const a = pct(alone.ms, 99);
      const b = pct(beside.ms, 99);
      const answers = `${noise.requests - noise.non2xx} × 200${noise.non2xx > 0 ? `, ${noise.non2xx} other` : ''}${noise.errors > 0 ? `, ${noise.errors} socket errors` : ''}`;
      process.stdout.write(`| ${name} | ${a.toFixed(1)} | ${b.toFixed(1)} | ${(b / a).toFixed(1)}× | ${((noise.requests - noise.non2xx) / seconds).toFixed(0)} | ${answers} |\n`);
    }
  }
  await ngx.stop();
  await fpm.proc.stop();
  await ours.proc.stop();
}

/** Connects, sends `head` one byte every `gapMs`; resolves with ms from connect to close (or to giving up). */
function trickle(port: number, head: Buffer, gapMs: number, giveUpMs: number): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let t0 = 0;
    let i = 0;
    let timer: NodeJS.Timeout | undefined;
    const giveUp = setTimeout(() => {
      s.destroy();
      resolve(`open after ${giveUpMs} ms`);
    }, giveUpMs);
    s.on('connect', () => {
      t0 = performance.now();
      timer = setInterval(() => i < head.length && s.write(head.subarray(i, ++i)), gapMs);
    });
    s.on('data', () => {});
    s.on('error', () => {});
    s.on('close', () => {
      clearInterval(timer);
      clearTimeout(giveUp);
      resolve(`${((performance.now() - t0) / 1000).toFixed(2)} s`);
    });
  });
}

async function rowSlowloris(dir: string, doc: string): Promise<void> {
  const d = join(dir, 'ours-slow');
  mkdirSync(d, { recursive: true });
  const [httpPort, fcgiPort, scgiPort, ngxPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const t = 'header_timeout: 3s';
  writeFileSync(
    join(d, 'fcgi-pm.yaml'),
    `listen:
  - { protocol: http, address: 127.0.0.1:${httpPort}, pool: app, document_root: ${doc}, ${t} }
  - { protocol: fastcgi, address: 127.0.0.1:${fcgiPort}, pool: app, ${t} }
  - { protocol: scgi, address: 127.0.0.1:${scgiPort}, pool: app, ${t} }
pools:
  app: { command: [/usr/bin/php-cgi], pm: ondemand, max_children: 1 }
log: { level: error }
runtime_dir: ${d}
control_socket: ${d}/control.sock
`,
  );
  const ours = start('fcgi-pm', join(REPO, 'bin', 'fcgi-pm'), ['run', '-c', join(d, 'fcgi-pm.yaml'), '--allow-root'], { cwd: d });
  await waitReady('fcgi-pm', { port: httpPort }, ours);
  const ngxDir = join(dir, 'nginx-slow');
  const ngx = await runNginx(ngxDir, [`server { listen 127.0.0.1:${ngxPort}; client_header_timeout 3s; root ${doc}; }`], [ngxPort]);
  const httpHead = Buffer.from(`GET /small.php HTTP/1.1\r\nHost: x\r\nX-Slow: ${'a'.repeat(40)}\r\n\r\n`, 'latin1');
  // FastCGI: BEGIN_REQUEST then a PARAMS record header, one byte at a time; SCGI: a netstring's head.
  const fcgiHead = Buffer.from('01010001000800000001000000000000010400010040000000', 'hex');
  const scgiHead = Buffer.from('100:CONTENT_LENGTH\u00000\u0000SCGI\u00001\u0000', 'latin1');
  process.stdout.write(`\nslowloris: a head sent one byte every 0.5 s, header_timeout 3 s; closed at, from the connect; ${machineLine()}\n`);
  process.stdout.write('| server | closed at |\n|---|---|\n');
  const rows = await Promise.all([
    trickle(ngxPort, httpHead, 500, 15_000).then((v) => `| nginx (client_header_timeout 3s) | ${v} |`),
    trickle(httpPort, httpHead, 500, 15_000).then((v) => `| fcgi-pm HTTP listener | ${v} |`),
    trickle(fcgiPort, fcgiHead, 500, 15_000).then((v) => `| fcgi-pm FastCGI listener | ${v} |`),
    trickle(scgiPort, scgiHead, 500, 15_000).then((v) => `| fcgi-pm SCGI listener | ${v} |`),
  ]);
  process.stdout.write(rows.join('\n') + '\n');
  await ngx.stop();
  await ours.stop();
}

async function main(): Promise<void> {
  const rows = arg('--rows', 'closed,noisy,slowloris').split(',');
  const seconds = Number(arg('--seconds', '8'));
  const dir = mkdtempSync(join(tmpdir(), 'fcgipm-fair-'));
  const doc = join(dir, 'doc');
  mkdirSync(doc);
  for (const [f, src] of Object.entries(PAGES)) writeFileSync(join(doc, f), src);
  try {
    if (rows.includes('closed')) await rowClosed(dir, doc, seconds);
    if (rows.includes('noisy')) await rowNoisy(dir, doc, seconds);
    if (rows.includes('slowloris')) await rowSlowloris(dir, doc);
  } finally {
    await stopAll();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch(async (err) => {
  process.stderr.write(`${(err as Error).stack ?? err}\n`);
  await stopAll();
  process.exit(1);
});
