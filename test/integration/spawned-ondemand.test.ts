/**
 * Issue acceptance (h), ondemand pool through nginx: starts with no php-cgi, never runs
 * more than max_children, recycles after max_requests, reaps idle workers, turns a
 * crash into 502 and a runaway request into 504 with its worker killed.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { startDaemon, type Daemon } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { fastcgiParams, startNginx, type Nginx } from '../helpers/nginx.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { isAlive } from '../helpers/proc.js';
import { Cleanup } from '../helpers/scope.js';
import { orphanPids, phpCommand, sampleWorkers, workerPids } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';

const MARKER = 'ondemand-worker';
const MAX_CHILDREN = 4;

describe('spawned ondemand pool through nginx', { timeout: 90_000 }, () => {
  const scope = new Cleanup();
  let daemon: Daemon;
  let ngx: Nginx;
  let dir: string;
  const workers = (): number[] => workerPids(daemon, MARKER);

  before(async () => {
    dir = makeTempDir(scope);
    const port = await freePort();
    daemon = await startDaemon(scope, {
      listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'app' }],
      pools: {
        app: {
          command: phpCommand(dir, MARKER),
          pm: 'ondemand',
          max_children: MAX_CHILDREN,
          idle_timeout: '1s',
          max_requests: 3,
          request_timeout: '2s',
          kill_timeout: '1s',
          // Every one of the 50 slow requests waits its turn (12.5 × 200 ms, longer on a loaded
          // machine): a burst, queued whole, and no queue_timeout to reach.
          queue_limit: 100,
          queue_timeout: '60s',
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

  it('starts with zero php-cgi processes', () => {
    // That none comes later without a request is checked on the fake clock (spawned-pool.test.ts).
    assert.deepEqual(workers(), []);
  });

  it('the first request spawns a worker and is answered', async () => {
    const r = await httpRequest(`${ngx.url}/hello.php`);
    assert.equal(r.status, 200);
    assert.equal(r.text, 'Hello from PHP\n');
    const n = workers().length;
    assert.ok(n >= 1 && n <= MAX_CHILDREN, `${n} workers`);
  });

  it('a crashing script gives 502 and the next request succeeds', async () => {
    const r = await httpRequest(`${ngx.url}/crash.php`);
    assert.equal(r.status, 502);
    const ok = await httpRequest(`${ngx.url}/hello.php`);
    assert.equal(ok.status, 200);
    assert.equal(ok.text, 'Hello from PHP\n');
  });

  it('max_requests 3: no worker answers more than 3 requests; the PID changes', async () => {
    const pids: number[] = [];
    for (let i = 0; i < 9; i++) {
      const r = await httpRequest(`${ngx.url}/pid.php`);
      assert.equal(r.status, 200);
      pids.push(Number(r.text));
    }
    const counts = new Map<number, number>();
    for (const p of pids) counts.set(p, (counts.get(p) ?? 0) + 1);
    for (const [pid, n] of counts) assert.ok(n <= 3, `pid ${pid} answered ${n} requests: ${pids.join(',')}`);
    assert.ok(counts.size >= 3, `9 requests need at least 3 workers: ${pids.join(',')}`);
  });

  it(`50 concurrent slow requests: all answered, never more than max_children (${MAX_CHILDREN}) php-cgi`, async (t) => {
    const sampler = sampleWorkers(daemon, MARKER, 20);
    const agent = new http.Agent({ keepAlive: false, maxSockets: 50 });
    try {
      const results = await Promise.all(
        Array.from({ length: 50 }, (_, i) => httpRequest(`${ngx.url}/sleep.php?ms=200&i=${i}`, { agent, timeout: 45_000 })),
      );
      const bad = results.filter((r) => r.status !== 200 || !r.text.startsWith('slept 200'));
      assert.equal(bad.length, 0, `failed: ${bad.slice(0, 3).map((r) => `${r.status} ${r.text.slice(0, 80)}`).join('; ')}`);
    } finally {
      agent.destroy();
      sampler.stop();
    }
    t.diagnostic(`${sampler.samples.length} samples, max ${sampler.max()} workers`);
    const over = sampler.samples.filter((s) => s.pids.length > MAX_CHILDREN);
    assert.equal(over.length, 0, `more than ${MAX_CHILDREN} php-cgi at times: ${over.slice(0, 3).map((s) => s.pids.join(',')).join(' | ')}`);
    assert.ok(sampler.max() >= 2, `load ran in parallel (max ${sampler.max()} workers seen)`);
  });

  it('after idle_timeout (1s) + 1s all workers are gone', async () => {
    await waitFor(() => workers().length === 0, { timeout: 2500, interval: 50, what: `idle workers to exit (left: ${workers().join(',')})` });
  });

  it('a request past request_timeout (2s) gets 504 and its worker is killed', async () => {
    assert.deepEqual(workers(), []);
    let pid: number | undefined;
    const watch = setInterval(() => {
      pid ??= workers()[0];
    }, 20);
    try {
      const r = await httpRequest(`${ngx.url}/sleep.php?ms=8000`, { timeout: 15_000 });
      assert.equal(r.status, 504);
    } finally {
      clearInterval(watch);
    }
    assert.ok(pid !== undefined, 'saw the worker that ran the request');
    await waitFor(() => !isAlive(pid!), { timeout: 3000, what: `worker ${pid} to be killed` });
    const ok = await httpRequest(`${ngx.url}/hello.php`);
    assert.equal(ok.status, 200);
  });

  it('stops on SIGTERM with exit code 0 and leaves no php-cgi behind', async () => {
    assert.deepEqual(await daemon.stop(), { code: 0, signal: null }, daemon.dump());
    assert.deepEqual(orphanPids(dir), []);
  });
});
