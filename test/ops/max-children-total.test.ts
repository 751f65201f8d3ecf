// max_children_total (PHP-FPM's process.max) shared fairly: a noisy pool that holds every
// place cannot starve a quiet pool. The quiet pool's request takes a place from the noisy
// pool (its worker retires after its request), is served while the noisy load still runs,
// and the total never passes the cap.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { PoolStatus } from '../../src/control/types.js';
import { statusOf } from '../helpers/control-status.js';
import { httpRequest } from '../helpers/http-client.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { opsDaemon } from './helpers.js';

const TOTAL = 4;

test(`max_children_total ${TOTAL}: a quiet pool gets its share while a noisy pool keeps every place busy`, { timeout: 90_000 }, async (t) => {
  const [noisyPort, quietPort] = [await freePort(), await freePort()];
  const dir = makeTempDir(t);
  const d = await opsDaemon(t, {
    max_children_total: TOTAL,
    listen: [
      { protocol: 'http', address: `127.0.0.1:${noisyPort}`, pool: 'noisy', document_root: PHP_FIXTURES },
      { protocol: 'http', address: `127.0.0.1:${quietPort}`, pool: 'quiet', document_root: PHP_FIXTURES },
    ],
    pools: {
      noisy: { command: phpCommand(dir, 'share-noisy'), pm: 'ondemand', max_children: TOTAL, queue_timeout: '60s' },
      quiet: { command: phpCommand(dir, 'share-quiet'), pm: 'ondemand', max_children: 2, queue_timeout: '60s' },
    },
    log: { level: 'info' },
  });
  const pools = async (): Promise<Map<string, PoolStatus>> => new Map((await statusOf(d.control)).pools.map((p) => [p.name, p]));

  // The noisy pool: 6 clients in a closed loop on a 500 ms page, more than every place.
  let running = true;
  let maxTotal = 0;
  let watch: NodeJS.Timeout | undefined;
  // However the test ends, the load and the watch stop with it.
  t.after(() => {
    running = false;
    clearInterval(watch);
  });
  const noisy = Array.from({ length: 6 }, async () => {
    while (running) await httpRequest(`http://127.0.0.1:${noisyPort}/sleep.php?ms=500`, { timeout: 60_000 }).catch(() => undefined);
  });
  await waitFor(async () => ((await pools()).get('noisy')!.processes.busy === TOTAL ? true : undefined), { timeout: 20_000, what: 'the noisy pool holding every place' });
  watch = setInterval(() => {
    void pools().then((ps) => {
      let n = 0;
      for (const p of ps.values()) n += p.processes.total;
      maxTotal = Math.max(maxTotal, n);
    }).catch(() => undefined);
  }, 200);

  // A quiet request: answered while the noisy loop still runs (before the fix it waited for the noisy load to end).
  const quiet = await httpRequest(`http://127.0.0.1:${quietPort}/hello.php`, { timeout: 30_000 });
  const noisyStillRunning = running;
  const ps = await pools();
  running = false;
  await Promise.all(noisy);
  clearInterval(watch);
  assert.equal(quiet.status, 200);
  assert.ok(noisyStillRunning);
  const noisyPool = ps.get('noisy')!;
  t.diagnostic(`noisy recycles ${JSON.stringify(noisyPool.recycles)}, max total seen ${maxTotal}`);
  assert.ok((noisyPool.recycles['host_share'] ?? 0) >= 1, 'a noisy worker gave its place');
  assert.ok(maxTotal <= TOTAL, `never more than ${TOTAL} workers alive: ${maxTotal}`);
  assert.ok(d.daemon.logs.some((l) => l.reason === 'host_share' || String(l.msg).includes('above its share of max_children_total')), 'one line says why');
});
