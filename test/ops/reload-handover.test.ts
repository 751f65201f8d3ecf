// A changed pool's reload under load hands over (src/pool/handover.ts): the new generation's
// workers take their first requests a core's worth at a time, and the old generation's warm
// workers serve the other requests sent meanwhile, then drain and go. Before, every request
// after the commit went to a new, cold worker.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { availableParallelism } from 'node:os';
import { freePort } from '../helpers/ports.js';
import { isAlive } from '../helpers/proc.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { opsDaemon } from './helpers.js';
import { loadThroughNginx, poolPids } from './load.js';

test('reloading a changed pool under load: the old generation serves beside the new workers until they have served', { timeout: 120_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-handover-');
  const port = await freePort();
  const cmd = phpCommand(dir, 'ops-handover');
  // More clients than first requests may run at once on the new generation: the others must go to the old one.
  const clients = Math.max(1, Math.floor(availableParallelism() / 2)) + 2;
  const config = (generation: number): Record<string, unknown> => ({
    listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'a' }],
    pools: { a: { command: cmd, pm: 'ondemand', max_children: clients, idle_timeout: '60s', env: { GENERATION: String(generation) } } },
    shutdown_timeout: '20s',
  });
  const d = await opsDaemon(t, config(0), { dir });
  // Each request holds its worker a second: the clients keep `clients` workers busy.
  const { load } = await loadThroughNginx(t, port, clients, { path: '/sleep.php?ms=1000', expect: /^slept 1000 pid \d+\n$/ });
  await waitFor(async () => (await poolPids(d, 'a')).length === clients, { timeout: 30_000, what: `${clients} workers under load` });
  await load.more(2 * clients);
  const old = await poolPids(d, 'a');

  d.rewrite(config(1));
  const r = await d.ctl(['reload'], 60_000);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /pools changed: a/);
  await load.more(3 * clients);
  const pidOf = (body: string): number => Number(/pid (\d+)/.exec(body)![1]);
  // From the first request a new worker took (not from when the CLI returned: on a loaded
  // machine the hand-over may be over by then), the old generation still took some.
  const firstNew = load.answers.filter((a) => !old.includes(pidOf(a.body))).reduce((t, a) => Math.min(t, a.sentAt), Infinity);
  assert.ok(firstNew < Infinity, 'no request went to the new generation');
  const byOld = load.answers.filter((a) => a.sentAt >= firstNew && old.includes(pidOf(a.body)));
  assert.ok(byOld.length > 0, `no request sent after the new generation's first was served by the old generation (${old.join(', ')}): ${load.answers.filter((a) => a.sentAt >= firstNew).map((a) => pidOf(a.body)).join(', ')}`);
  await waitFor(() => old.every((p) => !isAlive(p)), { timeout: 30_000, what: `the old generation's workers ${old.join(', ')} gone` });
  const fresh = await poolPids(d, 'a');
  assert.ok(fresh.length > 0 && fresh.every((p) => !old.includes(p)), `${fresh.join(', ')}`);
  await load.stop();
  assert.deepEqual(load.failures, []);
});

test('a reload while a hand-over runs: the newest generation hands over from the warm old one, not from the one still taking its first requests', { timeout: 120_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-handover2-');
  const port = await freePort();
  const cmd = phpCommand(dir, 'ops-handover2');
  const clients = Math.max(1, Math.floor(availableParallelism() / 2)) + 2;
  const config = (generation: number): Record<string, unknown> => ({
    listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'a' }],
    pools: { a: { command: cmd, pm: 'ondemand', max_children: clients, idle_timeout: '60s', env: { GENERATION: String(generation) } } },
    shutdown_timeout: '20s',
  });
  const d = await opsDaemon(t, config(0), { dir });
  const { load } = await loadThroughNginx(t, port, clients, { path: '/sleep.php?ms=1000', expect: /^slept 1000 pid \d+\n$/ });
  await waitFor(async () => (await poolPids(d, 'a')).length === clients, { timeout: 30_000, what: `${clients} workers under load` });
  await load.more(2 * clients);
  const old = await poolPids(d, 'a');

  // The first reload's new workers take their first requests (a second each) one at a time:
  // its hand-over runs for seconds when the second reload commits.
  for (const g of [1, 2]) {
    d.rewrite(config(g));
    const r = await d.ctl(['reload'], 60_000);
    assert.equal(r.code, 0, r.stdout + r.stderr);
  }
  const after = Date.now();
  await load.more(2 * clients);
  const pidOf = (body: string): number => Number(/pid (\d+)/.exec(body)![1]);
  const byOld = load.answers.filter((a) => a.sentAt >= after && old.includes(pidOf(a.body)));
  assert.ok(byOld.length > 0, `no request sent after the second reload was served by the warm generation (${old.join(', ')}): ${load.answers.filter((a) => a.sentAt >= after).map((a) => pidOf(a.body)).join(', ')}`);
  await load.stop();
  assert.deepEqual(load.failures, []);
});
