/**
 * A request whose wait can be told at admission to pass queue_timeout is refused then,
 * not after waiting it out: one php-cgi worker of a 2 s page, default queue settings,
 * five requests at once. The first runs, two wait their turn (2 s and 4 s), and the last
 * two, whose turn would come after 6 s and 8 s, get their 503 at once (docs/overload.md).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { join } from 'node:path';
import { poolStatusOf } from '../helpers/control-status.js';
import { startDaemon } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';

const PAGE_MS = 2000;

test('a request that would wait past queue_timeout is refused at admission, not after waiting', { timeout: 90_000 }, async (t) => {
  const dir = makeTempDir(t);
  const control = join(dir, 'control.sock');
  const port = await freePort();
  await startDaemon(t, {
    control_socket: control,
    listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'app', document_root: PHP_FIXTURES }],
    // queue_limit, queue_max_wait and queue_timeout (5 s) left at their defaults.
    pools: { app: { command: phpCommand(dir, 'past-timeout'), pm: 'static', max_children: 1 } },
    log: { level: 'warn' },
  });
  const url = `http://127.0.0.1:${port}/sleep.php?ms=${PAGE_MS}`;
  // One request first: the pool knows its service time.
  assert.equal((await httpRequest(url, { timeout: 30_000 })).status, 200);

  const agent = new http.Agent({ keepAlive: false });
  const answers = await Promise.all(
    Array.from({ length: 5 }, async (_, i) => {
      await new Promise((r) => setTimeout(r, 20 * i));
      return httpRequest(url, { agent, timeout: 30_000 });
    }),
  );
  agent.destroy();
  const p = await poolStatusOf(control, 'app');
  t.diagnostic(`statuses ${answers.map((a) => a.status).join(' ')}, refused ${JSON.stringify(p.rejected)}`);
  // The daemon may read two new connections in another order than they were made: which
  // request got which turn is not asked, only that three were served and two refused.
  assert.deepEqual(
    answers.map((a) => a.status).sort(),
    [200, 200, 200, 503, 503],
  );
  assert.equal(p.rejected.queueTimeout, 0, 'no request waited out queue_timeout');
  assert.equal(p.rejected.queueFull, 2, 'the two that would have were refused at admission');
});
