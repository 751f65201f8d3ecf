/**
 * A closed loop is load, not overload: 20 clients that each wait for their answer on a
 * pool of 4 php-cgi workers serving a 100 ms page, through nginx, with the default queue
 * settings. The standing queue (16) is past what the workers serve within
 * queue_max_wait (12 at 100 ms), yet it never grows, so every request waits its turn and
 * none is refused (docs/overload.md).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { poolStatusOf } from '../helpers/control-status.js';
import { startDaemon } from '../helpers/daemon.js';
import { fastcgiParams, startNginx } from '../helpers/nginx.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { soak } from '../apps/load.js';

const CLIENTS = 20;
const WORKERS = 4;
const SECONDS = 6;

test(`${CLIENTS} clients in a closed loop on ${WORKERS} workers of a 100 ms page: all served, none refused`, { timeout: 90_000 }, async (t) => {
  const dir = makeTempDir(t);
  const control = join(dir, 'control.sock');
  const port = await freePort();
  await startDaemon(t, {
    control_socket: control,
    listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'app' }],
    // queue_limit, queue_max_wait and queue_timeout left at their defaults.
    pools: { app: { command: phpCommand(dir, 'closed-loop'), pm: 'static', max_children: WORKERS } },
    log: { level: 'warn' },
  });
  const ngx = await startNginx(t, `root ${PHP_FIXTURES}; location ~ \\.php$ { fastcgi_pass 127.0.0.1:${port}; ${fastcgiParams()} }`);
  const url = `${ngx.url}/sleep.php?ms=100`;
  const result = await soak([url], CLIENTS, SECONDS, (r) => (r.status === 200 ? undefined : `status ${r.status}: ${r.text.slice(0, 120)}`));
  const p = await poolStatusOf(control, 'app');
  t.diagnostic(`${result.requests} requests, queue max ${p.queue.max}, refused ${JSON.stringify(p.rejected)}`);
  assert.deepEqual(result.errors.slice(0, 5), [], 'every answer a 200');
  assert.equal(p.rejected.queueFull, 0);
  assert.equal(p.rejected.queueTimeout, 0);
  // The rule was put to the test: the queue stood past the 12 served within queue_max_wait.
  assert.ok(p.queue.max > 12, `the queue stood at ${p.queue.max}`);
});
