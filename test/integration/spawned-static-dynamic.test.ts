/**
 * Issue acceptance (h), process counts over time for static and dynamic pools, through
 * fcgi-pm's HTTP listeners: static keeps exactly max_children (and replaces a killed
 * one), dynamic starts start_children, grows under load up to max_children, and shrinks
 * back to the spare range when idle.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { startDaemon, type Daemon } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { Cleanup } from '../helpers/scope.js';
import { orphanPids, phpCommand, sampleWorkers, workerPids } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';

const ST = 'static-worker';
const DY = 'dynamic-worker';

describe('static and dynamic pools: worker counts over time', { timeout: 60_000 }, () => {
  const scope = new Cleanup();
  let daemon: Daemon;
  let dir: string;
  let stUrl: string;
  let dyUrl: string;

  before(async () => {
    dir = makeTempDir(scope);
    const p1 = await freePort();
    const p2 = await freePort();
    stUrl = `http://127.0.0.1:${p1}`;
    dyUrl = `http://127.0.0.1:${p2}`;
    daemon = await startDaemon(scope, {
      listen: [
        { protocol: 'http', address: `127.0.0.1:${p1}`, pool: 'st', document_root: PHP_FIXTURES },
        { protocol: 'http', address: `127.0.0.1:${p2}`, pool: 'dy', document_root: PHP_FIXTURES },
      ],
      pools: {
        st: { command: phpCommand(dir, ST), pm: 'static', max_children: 3, kill_timeout: '1s' },
        dy: {
          command: phpCommand(dir, DY),
          pm: 'dynamic',
          max_children: 5,
          start_children: 2,
          min_spare: 1,
          max_spare: 2,
          idle_timeout: '1s',
          kill_timeout: '1s',
        },
      },
      log: { level: 'info', access: true },
    });
    scope.after(() => {
      for (const pid of orphanPids(dir)) process.kill(pid, 'SIGKILL');
    });
  });
  after(() => scope.run());

  async function load(url: string, n: number, ms: number): Promise<void> {
    const agent = new http.Agent({ keepAlive: false, maxSockets: n });
    try {
      const rs = await Promise.all(Array.from({ length: n }, (_, i) => httpRequest(`${url}/sleep.php?ms=${ms}&i=${i}`, { agent, timeout: 30_000 })));
      assert.deepEqual(rs.map((r) => r.status), rs.map(() => 200), rs.map((r) => r.text.slice(0, 60)).join(' | '));
    } finally {
      agent.destroy();
    }
  }

  it('at start: static has max_children (3), dynamic has start_children (2)', async () => {
    await waitFor(() => workerPids(daemon, ST).length === 3, { timeout: 5000, what: 'static pool at 3 workers' });
    // The daemon reports ready once every pool's start workers are ready, and from then
    // idle_timeout (1 s) may stop one dynamic worker down to min_spare: a later process count
    // races that, the log of the start does not.
    const readyAt = daemon.logs.indexOf(await daemon.waitForLog((l) => l.kind === 'ready', { what: 'fcgi-pm ready' }));
    const started = daemon.logs
      .slice(0, readyAt)
      .filter((l) => l.pool === 'dy' && typeof l.wpid === 'number' && /^worker \d+ ready after/.test(String(l.msg)))
      .map((l) => l.wpid as number);
    assert.equal(new Set(started).size, 2, `dynamic workers ready at start: ${started.join(', ')}\n${daemon.dump()}`);
    // No other dynamic worker since, and a missing one was stopped by idle_timeout, not lost.
    const now = workerPids(daemon, DY);
    assert.ok(now.length >= 1 && now.every((p) => started.includes(p)), `dynamic workers now ${now.join(', ')}, started ${started.join(', ')}`);
    for (const pid of started.filter((p) => !now.includes(p))) {
      assert.ok(daemon.findLog((l) => l.wpid === pid && l.reason === 'idle_timeout'), `worker ${pid} gone without an idle_timeout stop\n${daemon.dump()}`);
    }
  });

  it('static: exactly 3 workers all through a load of 10 concurrent requests, same pids after', async () => {
    const before = workerPids(daemon, ST);
    const s = sampleWorkers(daemon, ST);
    try {
      await load(stUrl, 10, 300);
    } finally {
      s.stop();
    }
    assert.deepEqual([...new Set(s.samples.map((x) => x.pids.length))], [3], 'count stayed at 3');
    assert.deepEqual(workerPids(daemon, ST), before, 'no worker was replaced');
  });

  it('static: a worker killed with SIGKILL is replaced', async () => {
    const before = workerPids(daemon, ST);
    const victim = before[0]!;
    process.kill(victim, 'SIGKILL');
    await waitFor(
      () => {
        const now = workerPids(daemon, ST);
        return now.length === 3 && !now.includes(victim);
      },
      { timeout: 5000, what: 'a replacement worker' },
    );
    const r = await httpRequest(`${stUrl}/hello.php`);
    assert.equal(r.status, 200);
  });

  it('dynamic: grows under 8 concurrent slow requests, never above max_children (5)', async (t) => {
    const s = sampleWorkers(daemon, DY);
    try {
      await load(dyUrl, 8, 600);
    } finally {
      s.stop();
    }
    t.diagnostic(`${s.samples.length} samples, max ${s.max()} workers`);
    assert.ok(s.max() <= 5, `max seen ${s.max()}`);
    assert.ok(s.max() >= 3, `grew beyond start_children under load (max seen ${s.max()})`);
  });

  it('dynamic: shrinks back to at most max_spare (2) and keeps min_spare (1) when idle', async () => {
    await waitFor(() => workerPids(daemon, DY).length <= 2, { timeout: 6000, interval: 50, what: 'dynamic pool to shrink to max_spare' });
    assert.ok(workerPids(daemon, DY).length >= 1, 'min_spare kept');
  });

  it('stops on SIGTERM with exit code 0 and leaves no php-cgi behind', async () => {
    assert.deepEqual(await daemon.stop(), { code: 0, signal: null }, daemon.dump());
    assert.deepEqual(orphanPids(dir), []);
  });
});
