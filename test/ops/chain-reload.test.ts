// A changed pool's reload under load is a chain: the new generation starts as many
// workers as the old one has ready before it takes a request, so the pool is never
// narrower than before the reload (sampled from status all along), and no request fails.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { poolStatusOf } from '../helpers/control-status.js';
import { freePort } from '../helpers/ports.js';
import { isAlive } from '../helpers/proc.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { opsDaemon } from './helpers.js';
import { loadThroughNginx, poolPids } from './load.js';

const WIDTH = 4;

test('reloading a changed pool under load: never fewer ready workers than before, no request fails', { timeout: 120_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-chain-');
  const port = await freePort();
  const cmd = phpCommand(dir, 'ops-chain');
  // ondemand: without the chain the new generation would start with no worker at all.
  const config = (maxRequests: number): Record<string, unknown> => ({
    listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'a' }],
    pools: { a: { command: cmd, pm: 'ondemand', max_children: WIDTH, idle_timeout: '60s', max_requests: maxRequests } },
    shutdown_timeout: '20s',
  });
  const d = await opsDaemon(t, config(0), { dir });
  // Each request holds its worker 30 ms: four clients keep four workers.
  const { load } = await loadThroughNginx(t, port, WIDTH, { path: '/sleep.php?ms=30', expect: /^slept 30 pid \d+\n$/ });

  /** Workers of pool a that take requests (idle or busy), from the daemon's status. */
  const ready = async (): Promise<number> => {
    const pool = await poolStatusOf(d.control, 'a');
    return pool.processes.idle + pool.processes.busy;
  };
  await waitFor(async () => (await ready()) === WIDTH, { timeout: 30_000, what: `${WIDTH} workers under load` });
  await load.more(20);

  const samples: number[] = [];
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      samples.push(await ready());
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  try {
    for (let i = 1; i <= 3; i++) {
      const old = await poolPids(d, 'a');
      d.rewrite(config(1000 + i));
      const r = await d.ctl(['reload'], 60_000);
      assert.equal(r.code, 0, `reload ${i}: ${r.stdout}${r.stderr}`);
      assert.match(r.stdout, /changed.*\ba\b/);
      await load.more(20);
      await waitFor(() => old.every((p) => !isAlive(p)), { timeout: 20_000, what: `reload ${i}: the old generation's workers ${old.join(', ')} gone` });
    }
  } finally {
    sampling = false;
    await sampler;
  }
  await load.stop();
  assert.deepEqual(load.failures, []);
  assert.ok(samples.length >= 20, `status sampled ${samples.length} times`);
  const narrower = samples.filter((n) => n < WIDTH);
  assert.deepEqual(narrower, [], `${narrower.length} of ${samples.length} status samples had fewer than ${WIDTH} ready workers (least ${Math.min(...samples)})`);
});
