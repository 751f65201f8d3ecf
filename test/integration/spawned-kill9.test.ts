/**
 * Issue acceptance (h): `kill -9` of the daemon leaves no worker running, idle or busy.
 */
import { test } from 'node:test';
import http from 'node:http';
import assert from 'node:assert/strict';
import { startDaemon } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { isAlive } from '../helpers/proc.js';
import { orphanPids, phpCommand, workerPids } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { sleep, waitFor } from '../helpers/wait.js';

test('kill -9 of the daemon leaves no php-cgi worker running', { timeout: 30_000 }, async (t) => {
  const dir = makeTempDir(t);
  // Whatever the daemon leaves behind is ours to remove, found by the marker in its argv.
  t.after(() => {
    for (const pid of orphanPids(dir)) process.kill(pid, 'SIGKILL');
  });
  const port = await freePort();
  const daemon = await startDaemon(t, {
    listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'app', document_root: PHP_FIXTURES }],
    pools: {
      app: { command: phpCommand(dir, 'k9-worker'), pm: 'static', max_children: 3 },
    },
    log: { level: 'info' },
  });
  await waitFor(() => workerPids(daemon, 'k9-worker').length === 3, { timeout: 5000, what: '3 workers' });
  assert.equal((await httpRequest(`http://127.0.0.1:${port}/hello.php`)).status, 200);

  // One worker busy in a long request when the daemon dies (its head arrives once PHP runs).
  const req = http.get(`http://127.0.0.1:${port}/sleep.php?ms=20000&flush=1`);
  req.on('error', () => undefined);
  t.after(() => req.destroy());
  const started = await Promise.race([new Promise((r) => req.once('response', () => r(true))), sleep(2000).then(() => false)]);
  t.diagnostic(started ? 'busy request running in PHP' : 'no response head within 2 s; killing anyway');
  const pids = workerPids(daemon, 'k9-worker');

  daemon.signal('SIGKILL');
  await daemon.child.exited;
  await waitFor(() => pids.every((p) => !isAlive(p)) && orphanPids(dir).length === 0, {
    timeout: 10_000,
    interval: 50,
    what: `workers ${pids.join(',')} to exit after the daemon was killed (alive: ${orphanPids(dir).join(',')})`,
  });
});
