// A pool's rolling restart and drain through the control socket (`fcgi-pm restart --rolling`,
// `fcgi-pm drain`), on real php-cgi workers behind nginx under a steady load: no request
// fails, every worker is replaced, and a dynamic pool drained starts its spare afresh.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { freePort } from '../helpers/ports.js';
import { isAlive } from '../helpers/proc.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { opsDaemon } from './helpers.js';
import { loadThroughNginx, poolPids } from './load.js';

test('rolling restart and drain under load: no failed request, every pid replaced, a drained dynamic pool starts afresh', { timeout: 120_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-pa-');
  const port = await freePort();
  const d = await opsDaemon(
    t,
    {
      listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'a' }],
      pools: {
        a: { command: phpCommand(dir, 'ops-actions-a'), pm: 'static', max_children: 3 },
        b: { command: phpCommand(dir, 'ops-actions-b'), pm: 'dynamic', max_children: 3, start_children: 2, min_spare: 1, max_spare: 3 },
      },
      shutdown_timeout: '20s',
    },
    { dir },
  );
  const { load } = await loadThroughNginx(t, port, 4);
  await load.more(20);

  const old = await poolPids(d, 'a');
  assert.equal(old.length, 3);
  const r = await d.ctl(['restart', '--pool', 'a', '--rolling'], 60_000);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /restarted pool a \(3 retired, 3 started\)/);
  await load.more(20);
  const fresh = await poolPids(d, 'a');
  assert.equal(fresh.length, 3);
  assert.deepEqual(fresh.filter((p) => old.includes(p)), [], 'every worker replaced');
  await waitFor(() => old.every((p) => !isAlive(p)), { timeout: 20_000, what: `old workers ${old.join(', ')} gone` });
  const retired = d.daemon.logs.filter((l) => l.reason === 'restart' && typeof l.msg === 'string' && l.msg.startsWith('retiring worker'));
  assert.equal(retired.length, 3);

  // A static pool's drain replaces its workers one by one too: it never stops serving.
  const dr = await d.ctl(['drain', '--pool', 'a'], 60_000);
  assert.equal(dr.code, 0, dr.stdout + dr.stderr);
  await load.more(20);
  assert.deepEqual((await poolPids(d, 'a')).filter((p) => fresh.includes(p)), []);

  // A dynamic pool: both workers go (idle: at once), and the mode starts its one spare anew.
  // The plain restart swaps the pool as a reload does.
  const swap = await d.ctl(['restart', '--pool', 'b']);
  assert.equal(swap.code, 0, swap.stderr);
  assert.match(swap.stdout, /^restarted pool b \(pid \d+/);
  const oldB = await poolPids(d, 'b');
  assert.equal(oldB.length, 2);
  const st = await d.ctl(['drain', '--pool', 'b']);
  assert.equal(st.code, 0, st.stderr);
  assert.match(st.stdout, /drained pool b: 2 worker\(s\) retired/);
  await waitFor(() => oldB.every((p) => !isAlive(p)), { timeout: 20_000, what: `pool b's workers ${oldB.join(', ')} gone` });
  await waitFor(async () => (await poolPids(d, 'b')).length === 1, { timeout: 20_000, what: "pool b's spare worker started again" });
  assert.deepEqual((await poolPids(d, 'b')).filter((p) => oldB.includes(p)), []);

  const bad = await d.ctl(['drain', '--pool', 'nope']);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /no pool named "nope"/);

  await load.stop();
  assert.deepEqual(load.failures, [], `failed requests: ${load.failures.slice(0, 5).join('; ')}`);
});
