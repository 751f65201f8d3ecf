// A changed pool's reload under load hands over (src/pool/handover.ts): the new generation's
// workers take their first requests a core's worth at a time, and the old generation's warm
// workers serve the other requests sent meanwhile, then drain and go. Before, every request
// after the commit went to a new, cold worker.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { availableParallelism } from 'node:os';
import { freePort } from '../helpers/ports.js';
import { isAlive } from '../helpers/proc.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { opsDaemon } from './helpers.js';
import { loadThroughNginx, poolPids } from './load.js';

const pidOf = (body: string): number => Number(/pid (\d+)/.exec(body)![1]);

/**
 * A daemon whose one pool `a` runs a second-long page for more clients than first requests
 * may run at once on a new generation (the others must go to the old one), under that load
 * until every client has a worker; `generation` changes the pool for a reload.
 */
async function poolUnderLoad(t: TestContext, name: string) {
  const dir = makeTempDir(t, `fpm-${name}-`);
  const port = await freePort();
  const cmd = phpCommand(dir, `ops-${name}`);
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
  const reload = async (generation: number): Promise<string> => {
    d.rewrite(config(generation));
    const r = await d.ctl(['reload'], 60_000);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    return r.stdout;
  };
  return { d, load, clients, reload, old: await poolPids(d, 'a') };
}

test('reloading a changed pool under load: the old generation serves beside the new workers until they have served', { timeout: 120_000 }, async (t) => {
  const { d, load, clients, reload, old } = await poolUnderLoad(t, 'handover');
  assert.match(await reload(1), /pools changed: a/);
  await load.more(3 * clients);
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
  const { d, load, clients, reload, old } = await poolUnderLoad(t, 'handover2');
  // The first reload's new workers take their first requests (a second each) one at a time:
  // its hand-over runs for seconds when the second reload commits.
  const since = d.daemon.mark();
  await reload(1);
  await reload(2);
  // From the second commit as the daemon logged it (the CLI may return late on a loaded machine).
  const commits = d.daemon.logsSince(since).filter((l) => l.kind === 'reload' && l.ok === true);
  assert.equal(commits.length, 2, JSON.stringify(commits));
  const second = Date.parse(String(commits[1]!.time));
  // Requests sent after the second commit, not answers after the CLI returned: on a loaded
  // machine the requests in flight at the commit (sent before it) made up the answers
  // awaited, and the few sent after met the old workers still busy with them.
  while (load.answers.filter((a) => a.sentAt >= second).length < 2 * clients) await load.more(clients);
  const byOld = load.answers.filter((a) => a.sentAt >= second && old.includes(pidOf(a.body)));
  assert.ok(byOld.length > 0, `no request sent after the second reload was served by the warm generation (${old.join(', ')}): ${load.answers.filter((a) => a.sentAt >= second).map((a) => pidOf(a.body)).join(', ')}`);
  await load.stop();
  assert.deepEqual(load.failures, []);
});
