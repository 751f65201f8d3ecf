/**
 * Reloading a changed php-cgi pool under load, for docs/BENCHMARKS.md: wrk through
 * fcgi-pm's HTTP listener on the generated 400-class app (bench/php-app.ts), first
 * steady, then while the pool's config is changed and reloaded (SIGHUP) every second.
 * Prints figures, asserts nothing.
 *
 *   npx tsc -p . && node dist/bench/reload-under-load.js [--seconds 8] [--connections 8] [--rounds 2] [--fcgi-pm BIN] [--resident]
 *
 * --fcgi-pm runs another build's bin/fcgi-pm (an older commit's, for a before/after).
 * --resident: the pool has resident_parent (one php-cgi group: each generation is one exec
 * whose children share its opcache, instead of one exec per worker).
 *
 * The daemon is bin/fcgi-pm run (its own temp dir and config); pool: ondemand,
 * max_children 8, idle_timeout 60 s; each reload changes its env, so the pool is replaced.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { runWrk, type WrkResult } from './compare-wrk.js';
import { generatePhpApp } from './php-app.js';

const arg = (name: string, def: number): number => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
};
const SECONDS = arg('--seconds', 8);
const CONNECTIONS = arg('--connections', 8);
const ROUNDS = arg('--rounds', 2);
const RESIDENT = process.argv.includes('--resident');
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const dir = mkdtempSync(join(tmpdir(), 'fpm-reload-bench-'));
const app = join(dir, 'app');
generatePhpApp(app, 400);
const port = 20_000 + Math.floor(Math.random() * 20_000);
const file = join(dir, 'fcgi-pm.yaml');
const config = (generation: number): void =>
  writeFileSync(file, stringify({
    control_socket: join(dir, 'control.sock'),
    runtime_dir: join(dir, 'run'),
    log: { access: false, level: 'warn' },
    listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'php', document_root: app }],
    pools: { php: { command: ['php-cgi'], pm: 'ondemand', max_children: 8, idle_timeout: '60s', env: { GENERATION: String(generation) }, ...(RESIDENT ? { resident_parent: true } : {}) } },
  }));
config(0);
const bin = process.argv.includes('--fcgi-pm') ? process.argv[process.argv.indexOf('--fcgi-pm') + 1]! : join(ROOT, 'bin', 'fcgi-pm');
const daemon = spawn(process.execPath, [bin, 'run', '--allow-root', '-c', file], { stdio: ['ignore', 'ignore', 'inherit'] });
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

const row = (what: string, r: WrkResult): string => `| ${what} | ${r.rps.toFixed(0)} | ${r.p50Ms.toFixed(1)} | ${r.p99Ms.toFixed(1)} | ${r.errors + r.non2xx} |`;
console.log(`${new Date().toISOString()} load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}; wrk -c${CONNECTIONS} ${SECONDS} s per run; ${bin}${RESIDENT ? '; resident_parent (one php-cgi group)' : ''}`);
const lines = ['| run | req/s | p50 ms | p99 ms | failed |', '|---|---|---|---|---|'];
await runWrk(url, CONNECTIONS, 3); // warm-up: the pool grows to its width under this load
let generation = 0;
for (let round = 0; round < ROUNDS; round++) {
  lines.push(row('steady', await runWrk(url, CONNECTIONS, SECONDS)));
  let reloading = true;
  let reloads = 0;
  const reloader = (async () => {
    while (reloading) {
      await sleep(1000);
      if (!reloading) break;
      config(++generation);
      daemon.kill('SIGHUP');
      reloads++;
    }
  })();
  const r = await runWrk(url, CONNECTIONS, SECONDS);
  reloading = false;
  await reloader;
  lines.push(row(`${reloads} reloads`, r));
  await sleep(2000);
}
for (const l of lines) console.log(l);
console.log(`load average at the end ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
daemon.kill('SIGTERM');
await new Promise((r) => daemon.once('exit', r));
rmSync(dir, { recursive: true, force: true });
