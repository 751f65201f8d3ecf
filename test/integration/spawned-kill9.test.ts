/**
 * `kill -9` of the daemon leaves no worker running, idle or busy: single php-cgi workers,
 * php-cgi groups and preload parents with their forks.
 */
import { test, type TestContext } from 'node:test';
import http from 'node:http';
import assert from 'node:assert/strict';
import { startDaemon, type Daemon } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { join } from 'node:path';
import { PHP_FIXTURES, REPO_ROOT } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { isAlive } from '../helpers/proc.js';
import { orphanPids, phpCommand, workerPids } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { sleep, waitFor } from '../helpers/wait.js';


/** Whatever the daemon leaves behind is ours to remove, found by the marker (`dir`) in its argv. */
function removeLeftovers(t: TestContext, dir: string): void {
  t.after(() => {
    for (const pid of orphanPids(dir)) process.kill(pid, 'SIGKILL');
  });
}

/** kill -9 of the daemon; then every one of `pids`, and anything else carrying the marker, must exit. */
async function killDaemonLeavingNone(daemon: Daemon, dir: string, pids: number[], what: string): Promise<void> {
  daemon.signal('SIGKILL');
  await daemon.child.exited;
  await waitFor(() => pids.every((p) => !isAlive(p)) && orphanPids(dir).length === 0, {
    timeout: 10_000,
    interval: 50,
    what: `${what} ${pids.join(',')} to exit after the daemon was killed (alive: ${orphanPids(dir).join(',')})`,
  });
}

/**
 * A daemon with one pool `app` behind one listener, in a temp dir that marks its processes;
 * whatever it leaves behind is removed after the test.
 */
async function markedDaemon(t: TestContext, protocol: 'http' | 'fastcgi', pool: (dir: string) => Record<string, unknown>): Promise<{ dir: string; port: number; daemon: Daemon }> {
  const dir = makeTempDir(t);
  removeLeftovers(t, dir);
  const port = await freePort();
  const listener = protocol === 'http' ? { document_root: PHP_FIXTURES } : {};
  const daemon = await startDaemon(t, {
    listen: [{ protocol, address: `127.0.0.1:${port}`, pool: 'app', ...listener }],
    pools: { app: pool(dir) },
    log: { level: 'info' },
  });
  return { dir, port, daemon };
}

test('kill -9 of the daemon leaves no php-cgi worker running', { timeout: 30_000 }, async (t) => {
  const { dir, port, daemon } = await markedDaemon(t, 'http', (d) => ({ command: phpCommand(d, 'k9-worker'), pm: 'static', max_children: 3 }));
  await waitFor(() => workerPids(daemon, 'k9-worker').length === 3, { timeout: 5000, what: '3 workers' });
  assert.equal((await httpRequest(`http://127.0.0.1:${port}/hello.php`)).status, 200);

  // One worker busy in a long request when the daemon dies (its head arrives once PHP runs).
  const req = http.get(`http://127.0.0.1:${port}/sleep.php?ms=20000&flush=1`);
  req.on('error', () => undefined);
  t.after(() => req.destroy());
  const started = await Promise.race([new Promise((r) => req.once('response', () => r(true))), sleep(2000).then(() => false)]);
  t.diagnostic(started ? 'busy request running in PHP' : 'no response head within 2 s; killing anyway');
  const pids = workerPids(daemon, 'k9-worker');

  await killDaemonLeavingNone(daemon, dir, pids, 'workers');
});

test('kill -9 of the daemon leaves no php-cgi group child running (group_size 2)', { timeout: 30_000 }, async (t) => {
  const { dir, port, daemon } = await markedDaemon(t, 'http', (d) => ({ command: phpCommand(d, 'k9-group'), pm: 'static', max_children: 4, group_size: 2 }));
  // Two parents and their two children each: six php-cgi processes.
  await waitFor(() => orphanPids(dir).length === 6, { timeout: 5000, what: '2 groups of 2 children' });
  assert.equal((await httpRequest(`http://127.0.0.1:${port}/hello.php`)).status, 200);
  const pids = orphanPids(dir);
  await killDaemonLeavingNone(daemon, dir, pids, 'group parents and children');
});

test('kill -9 of the daemon leaves no preload parent or fork running', { timeout: 30_000 }, async (t) => {
  // `dir` on the command line marks the processes (an extra sys.path entry).
  const { dir, daemon } = await markedDaemon(t, 'fastcgi', (d) => ({
    command: ['/usr/bin/python3', join(REPO_ROOT, 'bin', 'fcgi-pm-wsgi'), '--preload', '--path', d, '--path', join(REPO_ROOT, 'test', 'python'), 'wsgi_apps:app'],
    preload: true, pm: 'static', max_children: 2,
  }));
  // The parent, its two forks and the spare it keeps forked ahead.
  await waitFor(() => orphanPids(dir).length === 4, { timeout: 10_000, what: 'a preload parent, 2 forks and a spare' });
  const pids = orphanPids(dir);
  await killDaemonLeavingNone(daemon, dir, pids, 'the parent, its forks and its spare');
});
