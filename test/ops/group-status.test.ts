/**
 * Status of a php-cgi group pool through the control socket and the CLI: each worker
 * (a php-cgi parent) shows its k slots, how many run a request, and its children as
 * /proc has them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { listProcesses } from '../helpers/proc.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { opsDaemon } from './helpers.js';

interface WorkerJson {
  pid: number;
  slots?: number;
  busySlots?: number;
  children?: Array<{ pid: number; memory?: number }>;
}

test('status --json and --fpm --full: two groups of 3, each with 3 slots and its 3 children', { timeout: 60_000 }, async (t) => {
  const dir = makeTempDir(t);
  const port = await freePort();
  const d = await opsDaemon(t, {
    listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'app', document_root: PHP_FIXTURES }],
    pools: { app: { command: phpCommand(dir, 'grp-status'), pm: 'static', max_children: 6, group_size: 3 } },
  });
  const kids = (parent: number): number[] => listProcesses().filter((p) => p.ppid === parent && p.state !== 'Z').map((p) => p.pid).sort((a, b) => a - b);
  let workers: WorkerJson[] = [];
  await waitFor(async () => {
    const st = JSON.parse((await d.ctl(['status', '--json'])).stdout) as { pools: Array<{ workers: WorkerJson[] }> };
    workers = st.pools[0]!.workers;
    return workers.length === 2 && workers.every((w) => kids(w.pid).length === 3 && w.children?.length === 3);
  }, { timeout: 20_000, interval: 200, what: 'two groups of 3 children in status' });
  for (const w of workers) {
    assert.equal(w.slots, 3);
    assert.equal(w.busySlots, 0);
    assert.deepEqual(w.children!.map((c) => c.pid).sort((a, b) => a - b), kids(w.pid), `children of ${w.pid} as /proc has them`);
  }
  const fpm = (await d.ctl(['status', '--fpm', '--full'])).stdout;
  assert.equal(fpm.match(/^slots:\s+3$/gm)?.length, 2, fpm.slice(0, 2000));
});
