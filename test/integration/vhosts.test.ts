// Virtual hosts with the real daemon, real php-cgi and nginx in front passing the Host:
// 1,000 sites from a directory and from an SQLite table; no worker before a site's first
// request, one worker (as the site's own user, serving its own document_root) after it,
// eviction once idle, sites added without a restart, broken definitions reported while
// the others keep serving.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { stringify as stringifyYaml } from 'yaml';
import type { Daemon } from '../helpers/daemon.js';
import { httpRequest, type HttpResponse } from '../helpers/http-client.js';
import { startNginxForSites } from '../helpers/nginx.js';
import { PHP_FLAGS } from '../helpers/paths.js';
import { descendantsMatching, isAlive } from '../helpers/proc.js';
import { freePort } from '../helpers/ports.js';
import type { Scope } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { opsDaemon, type OpsDaemon } from '../ops/helpers.js';

const skip = process.geteuid?.() !== 0 && 'runs as root (each site runs as its own user)';
const SITES = 1000;
const USERS = ['www-data', 'nobody'];
const PAGE = `<?php
header('Content-Type: application/json');
echo json_encode(['site' => trim(file_get_contents(__DIR__ . '/site.txt')), 'pid' => getmypid(), 'uid' => posix_getuid(),
  'script' => $_SERVER['SCRIPT_FILENAME'], 'root' => $_SERVER['DOCUMENT_ROOT']]);
`;

interface Fixture {
  base: string;
  root(i: number): string;
}

/** SITES document roots (world-readable: workers run as www-data and nobody), each with its page. */
function makeRoots(scope: Scope): Fixture {
  const base = makeTempDir(scope, 'fpm-vh-');
  chmodSync(base, 0o755);
  const root = (i: number): string => join(base, 'www', `site${i}`);
  for (let i = 0; i <= SITES + 2; i++) makeRoot(root(i), i);
  return { base, root };
}

function makeRoot(dir: string, i: number): void {
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  writeFileSync(join(dir, 'index.php'), PAGE, { mode: 0o644 });
  writeFileSync(join(dir, 'site.txt'), `site${i}\n`, { mode: 0o644 });
}

const userOf = (i: number): string => USERS[i % USERS.length]!;
const siteDef = (f: Fixture, i: number) => ({ names: [`site${i}.test`, `*.site${i}.test`], document_root: f.root(i), pool: { user: userOf(i) } });

/** The daemon's config: a FastCGI listener routing by host; every site shares the defaults. */
async function daemonConfig(vhosts: Record<string, unknown>) {
  const port = await freePort();
  const http = await freePort();
  return {
    port,
    http,
    config: {
      listen: [
        { protocol: 'fastcgi', address: `127.0.0.1:${port}`, vhosts: true },
        { protocol: 'http', address: `127.0.0.1:${http}`, vhosts: true },
      ],
      vhosts: {
        ...vhosts,
        // Long at first (status sees the sites in use); a reload makes it short to see them evicted.
        idle_timeout: '1h',
        poll_interval: '300ms',
        defaults: { command: ['php-cgi', ...PHP_FLAGS], max_children: 2, idle_timeout: '60s' },
      },
      log: { level: 'info', access: false },
    },
  };
}


const get = (url: string, host: string): Promise<HttpResponse> => httpRequest(`${url}/index.php`, { headers: { host }, timeout: 20_000 });

function uidOf(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('Uid:'))!;
  return Number(line.split(/\s+/)[1]);
}

const workers = (d: Daemon) => descendantsMatching(d.pid, 'php-cgi');

/**
 * The behaviour both sources share. `add(i)` defines one more site, `breakOne(i)`
 * writes a definition that does not validate; both without touching the daemon.
 */
async function exercise(f: Fixture, ops: OpsDaemon, url: string, http: number, where: RegExp, add: (i: number) => void, breakOne: (i: number) => void): Promise<void> {
  const d = ops.daemon;
  const ready = await d.waitForLog((l) => l.kind === 'ready', { timeout: 15_000 });
  assert.equal(ready.sites, SITES);
  assert.equal(workers(d).length, 0, 'no worker before the first request');

  const mark = d.mark();
  const r = await get(url, 'site517.test');
  assert.equal(r.status, 200, r.text);
  const page = JSON.parse(r.text) as { site: string; pid: number; uid: number; script: string; root: string };
  assert.equal(page.site, 'site517');
  assert.equal(page.script, join(f.root(517), 'index.php'));
  assert.equal(page.root, f.root(517));
  const spawned = workers(d);
  assert.deepEqual(spawned.map((w) => w.pid), [page.pid], 'exactly one worker, for site 517');
  assert.equal(uidOf(page.pid), 65534, 'site 517 runs as nobody');
  // A wildcard name of another site, as another user.
  const w = JSON.parse((await get(url, 'Shop.Site42.TEST:8080')).text) as { site: string; uid: number };
  assert.equal(w.site, 'site42');
  assert.equal(w.uid, 33, 'site 42 runs as www-data');
  // The HTTP listener: the path is resolved in the site's root, and its static files are served from there.
  const direct = await get(`http://127.0.0.1:${http}`, 'site42.test');
  assert.equal((JSON.parse(direct.text) as { site: string }).site, 'site42');
  const txt = await httpRequest(`http://127.0.0.1:${http}/site.txt`, { headers: { host: 'site43.test' } });
  assert.equal(txt.text, 'site43\n');

  // Status: one pool per active site (site43 has one without a worker: its pool's
  // limit_extensions said the file is static); the defined ones counted, listed only when asked.
  const st = JSON.parse((await ops.ctl(['status', '--json'])).stdout) as { sites: { defined: number; active: number; list?: unknown[] }; pools: Array<{ name: string }> };
  assert.deepEqual({ ...st.sites, source: undefined }, { source: undefined, defined: SITES, active: 3, broken: 0, brokenSites: [] });
  assert.deepEqual(st.pools.map((p) => p.name).sort(), ['site42', 'site43', 'site517']);
  const all = (await ops.ctl(['status', '--all-sites'])).stdout;
  assert.equal(all.split('\n').filter((l) => /^ {2}site\d+/.test(l)).length, SITES);
  assert.match(all, /^ {2}site517 \(active\): site517\.test \*\.site517\.test → /m);
  const prom = (await ops.ctl(['status', '--prometheus'])).stdout;
  assert.match(prom, /^fcgipm_sites\{state="defined"\} 1000$/m);
  assert.deepEqual([...new Set([...prom.matchAll(/pool="([^"]+)"/g)].map((m) => m[1]))].sort(), ['site42', 'site43', 'site517'], 'series for active sites only');

  // Unknown hosts: 404, one warning per name however many requests.
  for (let k = 0; k < 3; k++) assert.equal((await get(url, 'nowhere.test')).status, 404);
  // The daemon writes log lines behind its answers (pino's asynchronous destination), so
  // the lines are counted once a later one arrived: another unknown name's, logged after
  // the three requests were handled, and lines reach stdout in the order they were logged.
  assert.equal((await get(url, 'elsewhere.test')).status, 404);
  await d.waitForLog((l) => l.code === 'ERR_VHOST_UNKNOWN' && l.host === 'elsewhere.test', { since: mark, what: 'the warning for elsewhere.test' });
  assert.equal(d.logsSince(mark).filter((l) => l.code === 'ERR_VHOST_UNKNOWN' && l.host === 'nowhere.test').length, 1);

  // Idle eviction, after a reload shortens idle_timeout: the pool stops and its worker exits.
  const cfg = d.config as { vhosts: Record<string, unknown> };
  ops.rewrite({ ...cfg, vhosts: { ...cfg.vhosts, idle_timeout: '1s' } });
  const reload = await ops.ctl(['reload']);
  assert.equal(reload.code, 0, reload.stderr);
  await d.waitForLog((l) => l.kind === 'vhosts' && l.site === 'site517' && l.why === 'idle', { since: mark, timeout: 15_000 });
  await waitFor(() => !isAlive(page.pid), { timeout: 10_000, what: `worker ${page.pid} of the evicted site to exit` });

  // A new site answers without a restart.
  add(SITES + 1);
  await waitFor(async () => (await get(url, `site${SITES + 1}.test`)).status === 200, { timeout: 5000, interval: 100, what: 'the added site to answer' });

  // A broken definition is reported with where it is; the others keep serving.
  const before = d.mark();
  breakOne(SITES + 2);
  const bad = await d.waitForLog((l) => l.code === 'ERR_VHOST_INVALID' && l.site === `site${SITES + 2}`, { since: before, timeout: 5000 });
  assert.match(String(bad.msg), where, String(bad.msg));
  // Status names it, with what is wrong.
  const named = JSON.parse((await ops.ctl(['status', '--json'])).stdout) as { sites: { broken: number; brokenSites: Array<{ id: string; error: string }> } };
  assert.equal(named.sites.broken, 1);
  assert.match(named.sites.brokenSites.find((x) => x.id === `site${SITES + 2}`)?.error ?? '', where);
  assert.equal((await get(url, 'site3.test')).status, 200);
  assert.equal((await get(url, `site${SITES + 2}.test`)).status, 404);
}

test('1,000 sites from a directory behind nginx', { skip, timeout: 120_000 }, async (t) => {
  const f = makeRoots(t);
  const dir = join(f.base, 'sites');
  mkdirSync(dir);
  const write = (i: number, text: string): void => writeFileSync(join(dir, `site${i}.yaml`), text);
  for (let i = 0; i < SITES; i++) write(i, stringifyYaml(siteDef(f, i)));
  const { port, http, config } = await daemonConfig({ dir });
  const d = await opsDaemon(t, config, { allowRoot: false, readyTimeout: 30_000 });
  const ngx = await startNginxForSites(t, port);
  await exercise(
    f,
    d,
    ngx.url,
    http,
    // file:line of the bad key
    /site1002\.yaml:4: pool\.max_children: must be a whole number/,
    (i) => write(i, stringifyYaml(siteDef(f, i))),
    (i) => write(i, `names: [site${i}.test]\ndocument_root: ${f.root(i)}\npool:\n  max_children: -1\n  user: nobody\n`),
  );
});

test('1,000 sites from an SQLite table behind nginx', { skip, timeout: 120_000 }, async (t) => {
  const f = makeRoots(t);
  const file = join(f.base, 'sites.db');
  const db = new Database(file);
  t.after(() => db.close());
  db.exec('CREATE TABLE sites (id TEXT PRIMARY KEY, names TEXT NOT NULL, document_root TEXT NOT NULL, pool TEXT NOT NULL DEFAULT \'{}\')');
  const insert = db.prepare('INSERT INTO sites (id, names, document_root, pool) VALUES (?, ?, ?, ?)');
  const row = (i: number): void => {
    const s = siteDef(f, i);
    insert.run(`site${i}`, s.names.join(' '), s.document_root, JSON.stringify(s.pool));
  };
  db.transaction(() => {
    for (let i = 0; i < SITES; i++) row(i);
  })();
  const { port, http, config } = await daemonConfig({ sqlite: file });
  const d = await opsDaemon(t, config, { allowRoot: false, readyTimeout: 30_000 });
  const ngx = await startNginxForSites(t, port);
  await exercise(
    f,
    d,
    ngx.url,
    http,
    // the table row by id; as root a site without a user is refused
    /sites\.db table sites row site1002: pool: workers would run as root/,
    row,
    (i) => insert.run(`site${i}`, `site${i}.test`, f.root(i), '{}'),
  );
});
