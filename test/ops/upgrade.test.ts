/**
 * Signals operators of nginx and PHP-FPM use, against the real daemon behind nginx and
 * php-cgi: QUIT is a graceful stop; USR2 (and `fcgi-pm upgrade`) hands every listening
 * socket to a new daemon without a failed request; a new daemon that cannot start
 * leaves the old one serving; `reopen-logs` after logrotate's mv; the runtime dir of a
 * daemon killed with SIGKILL is swept by the next start.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { poolStatusOf, statusOf } from '../helpers/control-status.js';
import { startDaemon, type Daemon } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { startNginxKeptAlive, unixPhpLocation } from '../helpers/nginx.js';
import { FCGI_PM_BIN, PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { isAlive } from '../helpers/proc.js';
import { trackPid, untrackPid, type Scope } from '../helpers/scope.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor, withTimeout } from '../helpers/wait.js';
import { startLoad, type LoadPage } from './load.js';

const run = promisify(execFile);

/** The daemon an upgrade started is not our child: stopped by its pid when the test ends. */
function adopt(scope: Scope, pid: number): void {
  trackPid(pid, 'SIGKILL');
  scope.after(async () => {
    if (!isAlive(pid)) return untrackPid(pid);
    process.kill(pid, 'SIGTERM');
    await waitFor(() => !isAlive(pid), { timeout: 15_000, what: `pid ${pid} to exit` }).catch(() => process.kill(pid, 'SIGKILL'));
    untrackPid(pid);
  });
}

async function phpBehindNginx(t: Scope, marker: string, extra: Record<string, unknown> = {}, poolExtra: Record<string, unknown> = {}) {
  const dir = makeTempDir(t, 'fpm-up-');
  const port = await freePort();
  const sock = join(dir, 'fcgi.sock');
  const config = {
    listen: [
      { protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'php' },
      { protocol: 'fastcgi', address: `unix:${sock}`, pool: 'php', mode: '0666' },
    ],
    pools: { php: { command: phpCommand(dir, marker), pm: 'static', max_children: 3, kill_timeout: '1s', ...poolExtra } },
    runtime_dir: join(dir, 'run'),
    pid_file: join(dir, 'fcgi-pm.pid'),
    control_socket: join(dir, 'control.sock'),
    shutdown_timeout: '20s',
    // A new daemon with a new pid, while the old one drains (upgrade-exec.test.ts: the same pid).
    upgrade: 'spawn',
    ...extra,
  };
  const d = await startDaemon(t, config, { dir });
  await d.waitForLog((l) => l.kind === 'ready', { what: 'ready', timeout: 15_000 });
  const ngx = await startNginxKeptAlive(t, port, { keepalive: 8, locations: unixPhpLocation(sock) });
  return { d, dir, port, ngx, pidFile: join(dir, 'fcgi-pm.pid') };
}

/** Kept-alive clients on each page until stopped (test/ops/load.ts); stopped at the test's end at the latest. */
function load(scope: Scope, url: string, pages: LoadPage[]): { served(n: number, what: string): Promise<void>; stop(): Promise<{ ok: number; failures: string[] }> } {
  const loads = pages.map((p) => startLoad(url, 2, p));
  const stop = async (): Promise<{ ok: number; failures: string[] }> => {
    await Promise.all(loads.map((l) => l.stop()));
    return { ok: loads.reduce((n, l) => n + l.ok, 0), failures: loads.flatMap((l) => l.failures) };
  };
  scope.after(stop);
  /** Resolves once every page was served `n` more times from now. */
  const served = (n: number, what: string): Promise<void> =>
    withTimeout(Promise.all(loads.map((l) => l.more(n))).then(() => undefined), 30_000, `${what}: ${loads.map((l) => `${l.ok} served, ${l.failures.length} failed`).join('; ')}`);
  return { served, stop };
}

const readPid = (path: string): number => Number(readFileSync(path, 'utf8').trim());

test('SIGQUIT under load: running requests finish, the daemon exits 0 and removes its pid file and runtime dir', { timeout: 90_000 }, async (t) => {
  const { d, dir, ngx, pidFile } = await phpBehindNginx(t, 'quit-test');
  assert.equal(readPid(pidFile), d.pid);
  const ready = d.findLog((l) => l.kind === 'ready')!;
  const running = Promise.all([1, 2, 3].map(() => httpRequest(`${ngx.url}/sleep.php?ms=1200`)));
  await waitFor(async () => (await poolStatusOf(join(dir, 'control.sock'), 'php')).active === 3, { timeout: 10_000, what: 'three requests running' });
  d.signal('SIGQUIT');
  for (const r of await running) assert.equal(r.status, 200, r.text);
  const exit = await d.child.exited;
  assert.deepEqual(exit, { code: 0, signal: null }, d.dump());
  assert.ok(d.findLog((l) => l.kind === 'shutdown' && l.signal === 'SIGQUIT'), d.dump());
  assert.equal(existsSync(pidFile), false);
  assert.equal(existsSync(String(ready.runtime_dir)), false);
});

async function upgradeUnderLoad(t: Scope, how: 'SIGUSR2' | 'command'): Promise<void> {
  const { d, dir, ngx, pidFile } = await phpBehindNginx(t, `upgrade-${how}`);
  const oldPid = d.pid;
  const hello = /^Hello from PHP/;
  const slept = /^slept \d+ pid/;
  const traffic = load(t, ngx.url, [
    { path: '/hello.php', expect: hello },
    { path: '/sleep.php?ms=50', expect: slept },
    { path: '/unix/hello.php', expect: hello },
    { path: '/unix/sleep.php?ms=30', expect: slept },
  ]);
  await traffic.served(5, 'every page served by the old daemon');
  const since = d.mark();
  if (how === 'SIGUSR2') d.signal('SIGUSR2');
  else {
    const out = await run(process.execPath, [FCGI_PM_BIN, 'upgrade', '-c', d.configPath]);
    assert.match(out.stdout, /upgraded fcgi-pm: pid \d+ serves/);
  }
  const handed = await d.waitForLog((l) => l.kind === 'upgrade' && typeof l.new_pid === 'number', { since, timeout: 30_000, what: 'handed over' });
  const newPid = handed.new_pid as number;
  adopt(t, newPid);
  assert.notEqual(newPid, oldPid);
  const exit = await d.child.exited;
  assert.deepEqual(exit, { code: 0, signal: null }, d.dump(since));
  // The new daemon serves on the same sockets, TCP and Unix, after the old one left.
  await traffic.served(5, 'every page served by the new daemon');
  const { failures } = await traffic.stop();
  assert.deepEqual(failures, [], `requests failed across the upgrade; the daemons' log since the upgrade:\n${d.dump(since)}`);
  assert.equal(isAlive(oldPid), false);
  assert.ok(isAlive(newPid));
  assert.equal(readPid(pidFile), newPid, 'the pid file names the new daemon');
  assert.equal((await httpRequest(`${ngx.url}/unix/hello.php`)).status, 200);
  // The control socket went over too: status answers from the new daemon.
  const st = await run(process.execPath, [FCGI_PM_BIN, 'status', '-c', d.configPath, '--json']);
  assert.equal((JSON.parse(st.stdout) as { daemon: { pid: number } }).daemon.pid, newPid);
  // One private runtime dir left: the new daemon's.
  assert.deepEqual(readdirSync(join(dir, 'run')).filter((n) => n.startsWith('fcgi-pm.')).map((n) => n.split('.')[1]), [String(newPid)]);
}

test('SIGUSR2 under load: a new daemon takes the sockets, no request fails, the old one exits 0', { timeout: 120_000 }, (t) => upgradeUnderLoad(t, 'SIGUSR2'));
test('fcgi-pm upgrade -c FILE does the same through the control socket', { timeout: 120_000 }, (t) => upgradeUnderLoad(t, 'command'));

test('an upgrade starts as many workers as the old daemon had ready before the new one takes a request', { timeout: 90_000 }, async (t) => {
  // ondemand: a cold start has no worker at all, so the handed count is the only reason for any.
  const { d, dir, ngx } = await phpBehindNginx(t, 'upgrade-warm', {}, { pm: 'ondemand', idle_timeout: '60s' });
  const control = join(dir, 'control.sock');
  assert.equal((await poolStatusOf(control, 'php')).processes.total, 0);
  await Promise.all([1, 2, 3].map(() => httpRequest(`${ngx.url}/sleep.php?ms=300`)));
  assert.equal((await poolStatusOf(control, 'php')).processes.idle, 3);
  const out = await run(process.execPath, [FCGI_PM_BIN, 'upgrade', '-c', d.configPath]);
  const newPid = Number(/pid (\d+) serves/.exec(out.stdout)?.[1]);
  adopt(t, newPid);
  // No request has reached the new daemon yet.
  const st = await statusOf(control);
  assert.equal(st.daemon.pid, newPid);
  const pool = st.pools.find((p) => p.name === 'php')!;
  assert.equal(pool.processes.idle, 3, JSON.stringify(pool.processes));
  assert.equal(pool.accepted, 0);
});

test('an upgrade whose new daemon cannot start leaves the old one serving', { timeout: 90_000 }, async (t) => {
  const { d, ngx, pidFile } = await phpBehindNginx(t, 'upgrade-fail');
  // The file on disk is broken now; the running config is not.
  writeFileSync(d.configPath, readFileSync(d.configPath, 'utf8') + '\nnot_a_key: 1\n');
  const since = d.mark();
  d.signal('SIGUSR2');
  const line = await d.waitForLog((l) => l.code === 'ERR_UPGRADE_FAILED', { since, timeout: 30_000, what: 'ERR_UPGRADE_FAILED' });
  assert.match(String(line.msg), /before it was ready/);
  assert.ok(d.running);
  assert.equal(readPid(pidFile), d.pid);
  assert.equal((await httpRequest(`${ngx.url}/hello.php`)).status, 200);
  assert.equal((await httpRequest(`${ngx.url}/unix/hello.php`)).status, 200);
  const cmd = await run(process.execPath, [FCGI_PM_BIN, 'upgrade', '-c', d.configPath]).catch((err: { code: number; stderr: string }) => err);
  assert.equal((cmd as { code: number }).code, 1);
  assert.match((cmd as { stderr: string }).stderr, /keeps serving/);
  assert.ok(d.running);
});

test('reopen-logs after mv: new lines go to new files; with no daemon it fails loudly', { timeout: 60_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-ro-');
  const port = await freePort();
  const mainLog = join(dir, 'fcgi-pm.log');
  const accessLog = join(dir, 'access.log');
  const d = await startDaemon(t, {
    listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'php', document_root: PHP_FIXTURES }],
    pools: { php: { command: phpCommand(dir, 'reopen-test'), pm: 'ondemand', max_children: 1 } },
    control_socket: join(dir, 'control.sock'),
    log: { file: mainLog, access_file: accessLog },
  }, { dir });
  await waitFor(() => existsSync(mainLog) && readFileSync(mainLog, 'utf8').includes('"ready"'), { timeout: 15_000, what: 'ready in the log file' });
  assert.equal((await httpRequest(`http://127.0.0.1:${port}/hello.php?before`)).status, 200);
  await waitFor(() => existsSync(accessLog) && readFileSync(accessLog, 'utf8').includes('before'), { what: 'first access line' });
  renameSync(mainLog, `${mainLog}.1`);
  renameSync(accessLog, `${accessLog}.1`);
  const out = await run(process.execPath, [FCGI_PM_BIN, 'reopen-logs', '-c', d.configPath]);
  assert.match(out.stdout, /reopened .*fcgi-pm\.log/);
  assert.equal((await httpRequest(`http://127.0.0.1:${port}/hello.php?after`)).status, 200);
  await waitFor(() => existsSync(accessLog) && readFileSync(accessLog, 'utf8').includes('after'), { what: 'access line in the new file' });
  assert.ok(!readFileSync(`${accessLog}.1`, 'utf8').includes('after'));
  assert.match(readFileSync(mainLog, 'utf8'), /reopen-logs: reopened/);
  await d.stop();
  const failed = await run(process.execPath, [FCGI_PM_BIN, 'reopen-logs', '-c', d.configPath]).catch((err: { code: number; stderr: string }) => err);
  assert.notEqual((failed as { code?: number }).code ?? 0, 0);
});

test('the runtime dir of a daemon killed with SIGKILL is swept by the next start of the same config', { timeout: 60_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-sw-');
  const base = join(dir, 'run');
  const config = (port: number) => ({
    listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'php' }],
    pools: { php: { command: phpCommand(dir, 'sweep-test'), pm: 'static', max_children: 1, kill_timeout: '1s' } },
    runtime_dir: base,
    control_socket: join(dir, 'control.sock'),
  });
  const first: Daemon = await startDaemon(t, config(await freePort()), { dir });
  const ready = await first.waitForLog((l) => l.kind === 'ready', { what: 'ready' });
  const deadDir = String(ready.runtime_dir);
  first.signal('SIGKILL');
  await first.child.exited;
  assert.ok(existsSync(deadDir), 'SIGKILL leaves the dir behind');
  // A directory whose pid runs (this test's) is never removed.
  const live = join(base, `fcgi-pm.${process.pid}.abcdef`);
  mkdirSync(live);
  const second = await startDaemon(t, config(await freePort()), { dir });
  const swept = await second.waitForLog((l) => l.kind === 'runtime_dir', { what: 'sweep line' });
  assert.deepEqual(swept.swept, [deadDir]);
  assert.equal(existsSync(deadDir), false);
  assert.ok(existsSync(live));
  assert.ok(existsSync(String((await second.waitForLog((l) => l.kind === 'ready')).runtime_dir)));
});
