// A preload pool's parent shows in status and workers (pid, forks served, memory) and
// its memory counts in the pool's, which memory_limit and the budget judge.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import type { PoolStatus } from '../../src/control/types.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { listProcesses } from '../helpers/proc.js';
import { waitFor } from '../helpers/wait.js';
import { opsDaemon } from './helpers.js';

test('the preload parent in status and workers, counted in the pool\'s memory', { timeout: 60_000 }, async (t) => {
  const port = await freePort();
  const d = await opsDaemon(t, {
    listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'py' }],
    memory_sample_interval: '200ms',
    pools: {
      py: {
        command: ['/usr/bin/python3', join(REPO_ROOT, 'bin', 'fcgi-pm-wsgi'), '--path', join(REPO_ROOT, 'test', 'python'), 'wsgi_apps:app'],
        preload: true, pm: 'static', max_children: 2, memory_limit: '1G',
      },
    },
  });
  const pool = async (): Promise<PoolStatus> => {
    const r = await d.ctl(['status', '--json']);
    return (JSON.parse(r.stdout) as { pools: PoolStatus[] }).pools.find((p) => p.name === 'py')!;
  };
  const p = await waitFor(async () => {
    const s = await pool();
    return s.preload?.memory !== undefined && s.workers.length === 2 && s.workers.every((w) => w.memory !== undefined) ? s : undefined;
  }, { timeout: 15_000, what: 'the parent and both workers measured' });
  const pre = p.preload!;
  // The parent is the daemon's child; the workers are its children.
  const procs = listProcesses();
  assert.equal(procs.find((x) => x.pid === pre.pid)?.ppid, d.daemon.pid, 'the parent is the daemon\'s child');
  for (const w of p.workers) assert.equal(procs.find((x) => x.pid === w.pid)?.ppid, pre.pid, `worker ${w.pid} was forked by the parent`);
  assert.equal(pre.ready, true);
  assert.ok(pre.forks >= 2, `${pre.forks} forks`);
  assert.ok(pre.memory! > 0);
  // memory_limit and the budget see the pool's total: the workers and the parent.
  const workersSum = p.workers.reduce((n, w) => n + (w.memory ?? 0), 0);
  const total = (p.memory as { total: number }).total;
  assert.ok(total >= workersSum + pre.memory! * 0.5 && total > workersSum, `pool total ${total} counts the parent (${pre.memory}) beside the workers (${workersSum})`);

  const text = await d.ctl(['status', '--full']);
  assert.match(text.stdout, new RegExp(`preload parent ${pre.pid}: ready, \\d+ worker\\(s\\) forked, \\d`));
  const table = await d.ctl(['workers']);
  assert.match(table.stdout, new RegExp(`^py\\s+${pre.pid}\\s+preload parent\\s+\\d+ forks\\s+\\d`, 'm'), table.stdout);
});
