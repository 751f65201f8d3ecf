/**
 * Overload with the default queue settings: an open-loop load at twice what the pool
 * serves (php-cgi pages of 25 ms on 2 workers, a new connection per request) gets every
 * request answered; once the queue is seen to grow, those past what the workers serve
 * within queue_max_wait are refused with 503 at admission (queue full) rather than after
 * waiting out queue_timeout, and no client is left waiting until its own timeout.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { join } from 'node:path';
import type { PoolStatus } from '../../src/control/types.js';
import { poolStatusOf } from '../helpers/control-status.js';
import { startDaemon } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { sleep } from '../helpers/wait.js';

const WORKERS = 2;
const PAGE_MS = 25;
/** Twice what WORKERS serve of PAGE_MS pages. */
const RATE = (2 * WORKERS * 1000) / PAGE_MS;
const SECONDS = 3;
/** Far beyond any wait the defaults allow (queue_timeout 5 s): hitting it is a failure. */
const CLIENT_TIMEOUT_MS = 20_000;

test(`default queue under 2× open-loop load (${RATE} req/s for ${SECONDS} s): fast 503s at admission, every request answered`, { timeout: 90_000 }, async (t) => {
  const dir = makeTempDir(t);
  const control = join(dir, 'control.sock');
  const port = await freePort();
  await startDaemon(t, {
    control_socket: control,
    listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'app', document_root: PHP_FIXTURES }],
    // queue_limit, queue_max_wait and queue_timeout left at their defaults.
    pools: { app: { command: phpCommand(dir, 'queue-overload'), pm: 'static', max_children: WORKERS } },
    log: { level: 'warn' },
  });
  const pool = (): Promise<PoolStatus> => poolStatusOf(control, 'app', 5000);
  const url = `http://127.0.0.1:${port}/sleep.php?ms=${PAGE_MS}`;
  // A few requests one after another: the pool has measured its service time before the load.
  for (let i = 0; i < 4; i++) assert.equal((await httpRequest(url)).status, 200);

  const statuses = new Map<number, number>();
  const failures: string[] = [];
  const inFlight: Array<Promise<void>> = [];
  const agent = new http.Agent({ keepAlive: false });
  const begin = performance.now();
  let sent = 0;
  while (sent < RATE * SECONDS) {
    // Open loop: requests leave on schedule, whatever happened to the earlier ones.
    const due = Math.min(RATE * SECONDS, Math.floor(((performance.now() - begin) / 1000) * RATE) + 1);
    for (; sent < due; sent++) {
      inFlight.push(
        httpRequest(url, { agent, timeout: CLIENT_TIMEOUT_MS }).then(
          (r) => void statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1),
          (err: Error) => void failures.push(err.message),
        ),
      );
    }
    await sleep(5);
  }
  await Promise.all(inFlight);
  agent.destroy();
  t.diagnostic(`statuses ${JSON.stringify(Object.fromEntries(statuses))}, failures ${failures.length}`);

  assert.deepEqual(failures.slice(0, 5), [], 'no client error or timeout');
  assert.deepEqual([...statuses.keys()].sort(), [200, 503]);
  const p = await pool();
  assert.equal(p.rejected.queueFull, statuses.get(503), 'every 503 was a refusal at admission');
  assert.equal(p.rejected.queueTimeout, 0, 'no request waited out queue_timeout');
  // Refused once the queue was seen to grow, not at the end: unrefused, half of what was
  // sent would have waited by then (the workers serve half of it).
  assert.ok(p.queue.max < (RATE * SECONDS) / 4, `at most ${p.queue.max} waited at once`);
});
