/**
 * Upgrade in place under a foreground supervisor (runit, s6, supervisord, a container's
 * PID 1): the supervisor started the daemon and waits on that pid. With the default
 * `upgrade: exec` the pid it holds keeps serving through SIGUSR2, running the new code on
 * the same sockets, and a new version that cannot start leaves the old code serving.
 * Real php-cgi behind real nginx; the daemon is this test's child, as a supervisor's is.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { appendFileSync, cpSync, existsSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { stringify as stringifyYaml } from 'yaml';
import { statusOf } from '../helpers/control-status.js';
import { ManagedChild } from '../helpers/child.js';
import { Daemon } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { startNginxKeptAlive, unixPhpLocation } from '../helpers/nginx.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import type { Scope } from '../helpers/scope.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor, withTimeout } from '../helpers/wait.js';
import { isAlive } from '../helpers/proc.js';
import { trackPid, untrackPid } from '../helpers/scope.js';
import { startLoad, type LoadPage } from './load.js';

const run = promisify(execFile);

/**
 * An installed copy of fcgi-pm (bin, dist, package.json, the native addons) that the test
 * may change under the running daemon, as a package upgrade changes the files on disk.
 */
function installCopy(t: Scope): string {
  const root = makeTempDir(t, 'fpm-install-');
  cpSync(join(REPO_ROOT, 'bin'), join(root, 'bin'), { recursive: true });
  cpSync(join(REPO_ROOT, 'dist', 'src'), join(root, 'dist', 'src'), { recursive: true });
  cpSync(join(REPO_ROOT, 'package.json'), join(root, 'package.json'));
  cpSync(join(REPO_ROOT, 'native', 'build'), join(root, 'native', 'build'), { recursive: true });
  symlinkSync(join(REPO_ROOT, 'node_modules'), join(root, 'node_modules'));
  return root;
}

/** The daemon run from `root`, as a supervisor's run script does: `exec fcgi-pm run -c FILE` in the foreground. */
async function supervised(t: Scope, root: string, marker: string) {
  const dir = makeTempDir(t, 'fpm-upx-');
  const port = await freePort();
  const sock = join(dir, 'fcgi.sock');
  const config = {
    listen: [
      { protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'php' },
      { protocol: 'fastcgi', address: `unix:${sock}`, pool: 'php', mode: '0666' },
    ],
    pools: { php: { command: phpCommand(dir, marker), pm: 'dynamic', max_children: 6, min_spare: 1, max_spare: 2, start_children: 2, kill_timeout: '1s' } },
    runtime_dir: join(dir, 'run'),
    pid_file: join(dir, 'fcgi-pm.pid'),
    control_socket: join(dir, 'control.sock'),
    shutdown_timeout: '20s',
  };
  const configPath = join(dir, 'fcgi-pm.yaml');
  writeFileSync(configPath, stringifyYaml(config));
  const child = new ManagedChild('fcgi-pm', process.execPath, [join(root, 'bin', 'fcgi-pm'), 'run', '-c', configPath, '--allow-root'], { cwd: dir, env: process.env });
  const d = new Daemon(child, configPath, config);
  t.after(() => d.stop().then(() => undefined));
  await d.waitForLog((l) => l.kind === 'ready', { what: 'ready', timeout: 20_000 }).catch((err: Error) => {
    throw new Error(`${err.message}\n${d.dump()}`);
  });
  const ngx = await startNginxKeptAlive(t, port, { keepalive: 8, locations: unixPhpLocation(sock) });
  return { d, dir, ngx, control: join(dir, 'control.sock'), pidFile: join(dir, 'fcgi-pm.pid') };
}

function load(t: Scope, url: string, pages: LoadPage[]) {
  const loads = pages.map((p) => startLoad(url, 2, p));
  const stop = async (): Promise<string[]> => {
    await Promise.all(loads.map((l) => l.stop()));
    return loads.flatMap((l) => l.failures);
  };
  t.after(stop);
  const served = (n: number, what: string): Promise<void> =>
    withTimeout(Promise.all(loads.map((l) => l.more(n))).then(() => undefined), 60_000, `${what}: ${loads.map((l) => `${l.ok} served, ${l.failures.length} failed`).join('; ')}`);
  return { served, stop };
}

const PAGES: LoadPage[] = [
  { path: '/hello.php', expect: /^Hello from PHP/ },
  { path: '/sleep.php?ms=40', expect: /^slept \d+ pid/ },
  { path: '/unix/hello.php', expect: /^Hello from PHP/ },
];

test('SIGUSR2 under a foreground supervisor: the pid it waits on keeps serving, now running the new code', { timeout: 150_000 }, async (t) => {
  const root = installCopy(t);
  const { d, ngx, control, pidFile } = await supervised(t, root, 'upx-ok');
  const before = await statusOf(control);
  assert.equal(before.daemon.pid, d.pid);
  const traffic = load(t, ngx.url, PAGES);
  await traffic.served(5, 'served by the old code');
  // The package upgrade: a new version on disk.
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
  writeFileSync(join(root, 'package.json'), JSON.stringify({ ...pkg, version: `${pkg.version}-next` }));
  const since = d.mark();
  d.signal('SIGUSR2');
  await d.waitForLog((l) => l.kind === 'ready', { since, timeout: 60_000, what: 'the new code ready' });
  await traffic.served(5, 'served by the new code');
  const failures = await traffic.stop();
  assert.deepEqual(failures, [], 'requests failed across the upgrade');
  // What the supervisor holds never exited, and it is the daemon that answers.
  assert.ok(d.running, d.dump(since));
  const after = await statusOf(control);
  assert.equal(after.daemon.pid, d.pid);
  assert.equal(after.daemon.version, `${pkg.version}-next`);
  assert.ok(after.daemon.startedAt > before.daemon.startedAt);
  assert.equal(readFileSync(pidFile, 'utf8').trim(), String(d.pid));
  assert.equal((await httpRequest(`${ngx.url}/unix/hello.php`)).status, 200);
  assert.deepEqual(d.logsSince(since).filter((l) => (l.level ?? 0) >= 50), [], 'no error across the upgrade');
  // With a bridge, its start was the new code's check: one start of the new code before the exec, not two.
  const phases = d.findLog((l) => l.kind === 'upgrade_phases', since);
  if (phases?.['bridge'] === true) assert.equal(phases['check'], 'bridge');
});

test('a new version that cannot start leaves the old code serving, and fcgi-pm upgrade says so', { timeout: 150_000 }, async (t) => {
  const root = installCopy(t);
  const { d, ngx, control } = await supervised(t, root, 'upx-broken');
  const before = await statusOf(control);
  // A broken package on disk: the daemon module no longer parses.
  appendFileSync(join(root, 'dist', 'src', 'daemon', 'daemon.js'), '\nexport const broken = ;\n');
  const traffic = load(t, ngx.url, PAGES);
  await traffic.served(3, 'served before');
  const since = d.mark();
  d.signal('SIGUSR2');
  const line = await d.waitForLog((l) => l.code === 'ERR_UPGRADE_FAILED', { since, timeout: 60_000, what: 'ERR_UPGRADE_FAILED' });
  assert.match(String(line.msg), /the new code cannot start \(its check exited with code 1: .*Unexpected token.*\); not upgrading, still serving/);
  await traffic.served(3, 'served after the failed upgrade');
  const cmd = await run(process.execPath, [join(root, 'bin', 'fcgi-pm'), 'upgrade', '-c', d.configPath]).catch((err: { code: number; stderr: string }) => err);
  assert.equal((cmd as { code: number }).code, 1);
  assert.match((cmd as { stderr: string }).stderr, /keeps serving/);
  assert.deepEqual(await traffic.stop(), []);
  assert.ok(d.running);
  const after = await statusOf(control);
  // The same process, never re-executed.
  assert.equal(after.daemon.pid, d.pid);
  assert.equal(after.daemon.startedAt, before.daemon.startedAt);
  assert.equal(d.findLog((l) => l.kind === 'ready', since), undefined);
});

test('fcgi-pm upgrade waits until the same pid answers with the new code', { timeout: 150_000 }, async (t) => {
  const root = installCopy(t);
  const { d, control } = await supervised(t, root, 'upx-cmd');
  const before = await statusOf(control);
  const out = await run(process.execPath, [join(root, 'bin', 'fcgi-pm'), 'upgrade', '-c', d.configPath]);
  assert.match(out.stdout, new RegExp(`upgraded fcgi-pm: pid ${d.pid} serves, running the new code`));
  const after = await statusOf(control);
  assert.equal(after.daemon.pid, d.pid);
  assert.ok(after.daemon.startedAt > before.daemon.startedAt);
  assert.ok(d.running);
});

test('the stop after two upgrades removes the Unix socket files the first daemon created (listener and control socket)', { timeout: 150_000 }, async (t) => {
  const root = installCopy(t);
  const { d, dir, control } = await supervised(t, root, 'upx-files');
  const sock = join(dir, 'fcgi.sock');
  for (let i = 0; i < 2; i++) await run(process.execPath, [join(root, 'bin', 'fcgi-pm'), 'upgrade', '-c', d.configPath]);
  assert.ok(existsSync(sock) && existsSync(control), 'the files serve while the daemon runs');
  await d.stop();
  assert.deepEqual([sock, control].filter((f) => existsSync(f)), [], `socket files left behind by the final stop\n${d.dump()}`);
});

test('without the exec addon the upgrade falls back to a new pid, and says so', { timeout: 150_000 }, async (t) => {
  const root = installCopy(t);
  rmSync(join(root, 'native', 'build', 'exec-in-place.node'));
  const { d, ngx, control } = await supervised(t, root, 'upx-noaddon');
  const traffic = load(t, ngx.url, PAGES);
  await traffic.served(3, 'served before');
  const since = d.mark();
  d.signal('SIGUSR2');
  const warned = await d.waitForLog((l) => l.code === 'ERR_UPGRADE_NO_EXEC', { since, timeout: 30_000, what: 'ERR_UPGRADE_NO_EXEC' });
  assert.equal(warned.level, 40);
  assert.match(String(warned.msg), /exec-in-place\.node is not built.*new pid/);
  const handed = await d.waitForLog((l) => l.kind === 'upgrade' && typeof l.new_pid === 'number', { since, timeout: 60_000, what: 'handed over' });
  const newPid = handed.new_pid as number;
  trackPid(newPid, 'SIGKILL');
  t.after(async () => {
    if (isAlive(newPid)) process.kill(newPid, 'SIGTERM');
    await waitFor(() => !isAlive(newPid), { timeout: 15_000 }).catch(() => process.kill(newPid, 'SIGKILL'));
    untrackPid(newPid);
  });
  assert.deepEqual(await d.child.exited, { code: 0, signal: null });
  await traffic.served(3, 'served by the new daemon');
  assert.deepEqual(await traffic.stop(), []);
  assert.equal((await statusOf(control)).daemon.pid, newPid);
});
