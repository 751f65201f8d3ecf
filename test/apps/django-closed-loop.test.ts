/**
 * A closed loop on the Django example's SQLite page is load, not overload: 20 clients
 * through nginx on the example's FastCGI pool (4 workers) with the default queue
 * settings get every answer, none refused at admission (docs/overload.md).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { poolStatusOf } from '../helpers/control-status.js';
import { startDaemon } from '../helpers/daemon.js';
import { freePort } from '../helpers/ports.js';
import { makeTempDir } from '../helpers/tmp.js';
import { exampleConfig, migrateDjango, WORKLOAD_COUNTS } from './examples.js';
import { soak } from './load.js';
import { startNginxSite } from './servers.js';
import { exampleFile } from './templates.js';

const CLIENTS = 20;
const SECONDS = 6;

test(`Django's SQLite page, ${CLIENTS} clients in a closed loop on 4 workers: all served, none refused`, { timeout: 120_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-djcl-');
  const db = join(dir, 'db.sqlite3');
  migrateDjango(db);
  const control = join(dir, 'control.sock');
  const [fcgiPort, scgiPort, web] = [await freePort(), await freePort(), await freePort()];
  const cfg = exampleConfig('django/fcgi-pm.yaml', {
    listen: { '127.0.0.1:9001': `127.0.0.1:${fcgiPort}`, '127.0.0.1:9002': `127.0.0.1:${scgiPort}` },
    pools: { django: { env: { DJANGO_DB_PATH: db } } },
  });
  cfg.control_socket = control;
  cfg.log = { level: 'warn' };
  await startDaemon(t, cfg);
  const site = await startNginxSite(
    t,
    exampleFile('django/nginx-fastcgi.conf', [['listen 127.0.0.1:8080', `listen 127.0.0.1:${web}`], ['127.0.0.1:9001', `127.0.0.1:${fcgiPort}`]]),
    web,
  );
  const result = await soak([`${site.url}/app/db/`], CLIENTS, SECONDS, (r) => {
    if (r.status !== 200) return `status ${r.status}: ${r.text.slice(0, 160)}`;
    return JSON.stringify(JSON.parse(r.text)) === JSON.stringify(WORKLOAD_COUNTS) ? undefined : `wrong counts: ${r.text.slice(0, 160)}`;
  });
  const p = await poolStatusOf(control, 'django');
  t.diagnostic(`${result.requests} requests, queue max ${p.queue.max}, refused ${JSON.stringify(p.rejected)}`);
  assert.equal(p.rejected.queueFull, 0, 'a standing queue is not refused at admission');
  // Every answer is right; on a machine so loaded that a wait passes queue_timeout (5 s:
  // 16 waiting for 4 workers), that request is answered 503 ERR_QUEUE_TIMEOUT, as the
  // rule says, and nothing else goes wrong.
  const timedOut = result.errors.filter((e) => /status 503: .*ERR_QUEUE_TIMEOUT/.test(e));
  assert.deepEqual(result.errors.filter((e) => !timedOut.includes(e)).slice(0, 5), []);
  assert.equal(timedOut.length, p.rejected.queueTimeout);
  assert.ok(p.queue.max >= CLIENTS - 4 - 2, `the queue stood at ${p.queue.max}: the clients were there at once`);
});
