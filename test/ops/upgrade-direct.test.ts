/**
 * Upgrade in place of a daemon with an accept: direct pool on TCP: the new daemon gets
 * the pool's socket with the others (a TCP address could not be bound twice), its workers
 * accept on it while the old ones drain, and no request through nginx fails.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { startDaemon } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { fastcgiParams, startNginx } from '../helpers/nginx.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { isAlive } from '../helpers/proc.js';
import { trackPid, untrackPid, type Scope } from '../helpers/scope.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { directSocketSupport } from '../../src/worker/shared-socket.js';

async function upgradeDirect(t: Scope, mode: 'exec' | 'spawn'): Promise<void> {
  const dir = makeTempDir(t, 'fpm-upd-');
  const directPort = await freePort();
  const d = await startDaemon(t, {
    listen: [{ protocol: 'fastcgi', address: `unix:${dir}/overflow.sock`, pool: 'php', mode: '0666' }],
    pools: { php: { command: phpCommand(dir, 'upgrade-direct'), accept: 'direct', direct_listen: `127.0.0.1:${directPort}`, pm: 'static', max_children: 3, kill_timeout: '1s' } },
    runtime_dir: join(dir, 'run'),
    control_socket: join(dir, 'control.sock'),
    shutdown_timeout: '20s',
    upgrade: mode,
  }, { dir });
  await d.waitForLog((l) => l.kind === 'ready', { what: 'ready', timeout: 15_000 });
  const ngx = await startNginx(t, `root ${PHP_FIXTURES}; location ~ \\.php$ { fastcgi_pass app; ${fastcgiParams()} }`, {
    httpExtra: `upstream app { server 127.0.0.1:${directPort} max_fails=0; server unix:${dir}/overflow.sock backup; }`,
  });
  let running = true;
  const counts = new Map<string, number>();
  const loops = Array.from({ length: 4 }, async (_, i) => {
    while (running) {
      const key = await httpRequest(`${ngx.url}/${i % 2 === 0 ? 'hello.php' : 'sleep.php?ms=40'}`, { timeout: 20_000 }).then(
        (r) => (r.status === 200 ? '200' : `${r.status} ${r.text.slice(0, 100)}`),
        (e: Error) => `error ${e.message}`,
      );
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
  });
  t.after(async () => {
    running = false;
    await Promise.all(loops);
  });
  const served = (): number => counts.get('200') ?? 0;
  await waitFor(() => served() >= 20, { timeout: 20_000, what: 'requests served by the old daemon' });
  const since = d.mark();
  d.signal('SIGUSR2');
  let newPid = d.pid;
  if (mode === 'spawn') {
    const handed = await d.waitForLog((l) => l.kind === 'upgrade' && typeof l.new_pid === 'number', { since, timeout: 30_000, what: 'handed over' });
    newPid = handed.new_pid as number;
    trackPid(newPid, 'SIGKILL');
    t.after(async () => {
      if (isAlive(newPid)) process.kill(newPid, 'SIGTERM');
      await waitFor(() => !isAlive(newPid), { timeout: 15_000 }).catch(() => process.kill(newPid, 'SIGKILL'));
      untrackPid(newPid);
    });
    assert.deepEqual(await d.child.exited, { code: 0, signal: null }, d.dump(since));
  } else {
    // The same process runs the new code: its workers accept on the socket it kept.
    await d.waitForLog((l) => l.kind === 'ready', { since, timeout: 60_000, what: 'the new code ready' });
    assert.ok(d.running);
  }
  const atExit = served();
  await waitFor(() => served() >= atExit + 20, { timeout: 20_000, what: 'requests served by the new daemon alone' });
  running = false;
  await Promise.all(loops);
  const failed = [...counts].filter(([k]) => k !== '200');
  assert.deepEqual(failed, [], `requests failed across the upgrade:\n${d.dump(since)}`);
  // Served by the new daemon's workers, on the same TCP socket.
  const after = await httpRequest(`${ngx.url}/hello.php`);
  assert.equal(after.status, 200);
  assert.ok(isAlive(newPid), d.dump(since));
}

test('SIGUSR2 with a direct pool (upgrade: spawn): the new daemon takes its socket, no request fails', { timeout: 120_000, skip: directSocketSupport() }, (t) => upgradeDirect(t, 'spawn'));
test('SIGUSR2 with a direct pool (upgrade: exec): the same pid keeps its socket, no request fails', { timeout: 120_000, skip: directSocketSupport() }, (t) => upgradeDirect(t, 'exec'));
