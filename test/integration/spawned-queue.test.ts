/**
 * Issue acceptance (h), overload through nginx: max_children 1 and queue_limit 2 with
 * 10 concurrent slow requests → 1 running + 2 queued succeed, 7 get 503 at once (before
 * any of the slow ones finish), and no client sees a connection error.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { startDaemon, type Daemon } from '../helpers/daemon.js';
import { httpRequest, type HttpResponse } from '../helpers/http-client.js';
import { fastcgiParams, startNginx, type Nginx } from '../helpers/nginx.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { Cleanup } from '../helpers/scope.js';
import { orphanPids, phpCommand, workerPids } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';

const MARKER = 'queue-worker';

describe('spawned pool overload: queue_limit and 503', { timeout: 60_000 }, () => {
  const scope = new Cleanup();
  let daemon: Daemon;
  let ngx: Nginx;
  let dir: string;

  before(async () => {
    dir = makeTempDir(scope);
    const port = await freePort();
    daemon = await startDaemon(scope, {
      listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'one' }],
      pools: {
        one: {
          command: phpCommand(dir, MARKER),
          pm: 'ondemand',
          max_children: 1,
          queue_limit: 2,
          queue_timeout: '20s',
          idle_timeout: '30s',
          kill_timeout: '1s',
        },
      },
      log: { level: 'info', access: true },
    });
    ngx = await startNginx(scope, `root ${PHP_FIXTURES}; location ~ \\.php$ { fastcgi_pass 127.0.0.1:${port}; ${fastcgiParams()} }`);
    scope.after(() => {
      for (const pid of orphanPids(dir)) process.kill(pid, 'SIGKILL');
    });
  });
  after(() => scope.run());

  it('a first request starts the single worker', async () => {
    const r = await httpRequest(`${ngx.url}/hello.php`);
    assert.equal(r.status, 200);
    assert.equal(workerPids(daemon, MARKER).length, 1);
  });

  it('10 concurrent slow requests: 3 succeed, 7 get 503 before any slow one finishes, no connection error', async () => {
    const agent = new http.Agent({ keepAlive: false, maxSockets: 10 });
    const order: Array<{ i: number; status: number }> = [];
    let results: HttpResponse[];
    try {
      results = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          httpRequest(`${ngx.url}/sleep.php?ms=1500&i=${i}`, { agent, timeout: 30_000 }).then((r) => {
            order.push({ i, status: r.status });
            return r;
          }),
        ),
      );
    } finally {
      agent.destroy();
    }
    const statuses = results.map((r) => r.status).sort();
    assert.deepEqual(statuses, [200, 200, 200, 503, 503, 503, 503, 503, 503, 503], JSON.stringify(order));
    for (const r of results.filter((x) => x.status === 200)) assert.match(r.text, /^slept 1500/);
    for (const r of results.filter((x) => x.status === 503)) assert.ok(r.body.length < 1024, 'short 503 body');
    const firstOk = order.findIndex((o) => o.status === 200);
    assert.equal(firstOk, 7, `every 503 answered before the first slow request finished: ${JSON.stringify(order)}`);
    assert.ok(workerPids(daemon, MARKER).length <= 1);
  });

  it('after the overload the pool serves normally', async () => {
    const r = await httpRequest(`${ngx.url}/hello.php`);
    assert.equal(r.status, 200);
  });

  it('stops on SIGTERM with exit code 0 and leaves no php-cgi behind', async () => {
    assert.deepEqual(await daemon.stop(), { code: 0, signal: null }, daemon.dump());
    assert.deepEqual(orphanPids(dir), []);
  });
});
