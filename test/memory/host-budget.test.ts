// The host budget with three pools behind the real daemon: php-cgi (a page holding
// 24 MiB), a Node FastCGI responder, and a Node worker that grows on request. The budget
// fits only a few workers; bursts alternate between the pools. Measured from /proc by
// the test itself: the daemon plus its workers never exceed the budget by more than one
// worker's estimate; every request is answered (200, or 503 only from queue limits);
// idle workers of the other pools are evicted to make room, and the log says so.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startDaemon, type LogLine } from '../helpers/daemon.js';
import { httpRequest, type HttpResponse } from '../helpers/http-client.js';
import { PHP_FIXTURES, REPO_ROOT } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { fixtureCommand } from '../fixtures/workers/index.js';

const MiB = 1024 * 1024;
const BUDGET = 180 * MiB;
const EXPECTED = { php: 36 * MiB, node: 24 * MiB, grow: 40 * MiB };

function pss(pid: number): number {
  try {
    const m = /^Pss:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'latin1'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0; // exited meanwhile (or a zombie)
  }
}

test('memory_budget shared by three pools: never exceeded by more than one estimate, every request answered, idle workers of other pools evicted', { timeout: 90_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-bud-');
  const ports = { php: await freePort(), node: await freePort(), grow: await freePort() };
  const common = { max_children: 4, idle_timeout: '60s', queue_timeout: '20s', kill_timeout: '2s' };
  const d = await startDaemon(t, {
    listen: [
      { protocol: 'http', address: `127.0.0.1:${ports.php}`, pool: 'php', document_root: PHP_FIXTURES },
      { protocol: 'http', address: `127.0.0.1:${ports.node}`, pool: 'node', document_root: dir },
      { protocol: 'http', address: `127.0.0.1:${ports.grow}`, pool: 'grow', document_root: dir },
    ],
    memory_budget: `${BUDGET / MiB}MiB`,
    memory_sample_interval: '100ms',
    pools: {
      php: { command: phpCommand(dir, 'budphp'), expected_worker_memory: `${EXPECTED.php / MiB}MiB`, ...common },
      node: { command: fixtureCommand('responder'), expected_worker_memory: `${EXPECTED.node / MiB}MiB`, inherit_env: ['PATH'], ...common },
      grow: {
        command: [process.execPath, join(REPO_ROOT, 'test/fixtures/memory/grower.mjs')],
        expected_worker_memory: `${EXPECTED.grow / MiB}MiB`,
        max_memory: '96MiB',
        inherit_env: ['PATH'],
        ...common,
      },
    },
  });

  // The test's own view: PSS of the daemon and everything below it, every 20 ms.
  let maxTotal = 0;
  let maxWorkers = 0;
  const watch = setInterval(() => {
    const pids = d.descendants('');
    maxWorkers = Math.max(maxWorkers, pids.length);
    maxTotal = Math.max(maxTotal, pids.reduce((s, p) => s + pss(p), pss(d.pid)));
  }, 20);
  t.after(() => clearInterval(watch));

  const paths = { php: '/alloc.php?mb=24&ms=400', node: '/app?sleep=400', grow: '/app?grow=2&hold=16&sleep=400' };
  const answers: Array<{ pool: string; r: HttpResponse }> = [];
  for (let round = 0; round < 2; round++) {
    for (const pool of ['php', 'node', 'grow'] as const) {
      const burst = await Promise.all(Array.from({ length: 4 }, () => httpRequest(`http://127.0.0.1:${ports[pool]}${paths[pool]}`, { timeout: 40_000 })));
      for (const r of burst) answers.push({ pool, r });
    }
  }
  clearInterval(watch);

  for (const { pool, r } of answers) {
    const ok = r.status === 200 || (r.status === 503 && /ERR_QUEUE_(FULL|TIMEOUT)/.test(r.text));
    assert.ok(ok, `${pool}: ${r.status} ${r.text}\n${d.dump()}`);
  }
  const served = answers.filter((a) => a.r.status === 200).length;

  const logs = d.logsSince(0);
  const estimates = logs.map((l: LogLine) => Number(l.estimate)).filter((n) => Number.isFinite(n));
  const maxEstimate = Math.max(...Object.values(EXPECTED), ...estimates);
  const evictions = logs.filter((l) => /^evicting idle worker/.test(String(l.msg)));
  t.diagnostic(`served ${served}/${answers.length}; max PSS of daemon + workers ${(maxTotal / MiB).toFixed(1)} MiB (budget ${BUDGET / MiB} MiB, largest estimate ${(maxEstimate / MiB).toFixed(1)} MiB); at most ${maxWorkers} processes; ${evictions.length} evictions`);

  assert.ok(maxTotal <= BUDGET + maxEstimate, `measured ${maxTotal} > budget ${BUDGET} + one estimate ${maxEstimate}`);
  assert.ok(evictions.length > 0, 'idle workers of other pools were evicted');
  for (const e of evictions) {
    assert.notEqual(e.victimPool, e.forPool, 'only other pools are evicted');
    assert.equal(e.reason, 'memory_budget');
    assert.ok(typeof e.budget === 'number' && typeof e.committed === 'number' && typeof e.estimate === 'number', 'with the numbers behind it');
  }
  // The budget line at start says what it is and how it measures.
  const start = logs.find((l) => l.kind === 'memory')!;
  assert.equal(start.budget, BUDGET);
  assert.equal(start.measure, 'pss');
  assert.ok(maxWorkers < 12, `the budget kept the workers below the 12 the pools could have (${maxWorkers})`);
});
