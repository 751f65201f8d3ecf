// The real daemon inside a memory cgroup the test creates (a 64 MiB board, a container,
// a unit with MemoryMax): the budget comes from the cgroup limit, a pool whose guessed
// worker size does not fit still serves its first request, a pool with memory_limit gets
// its own cgroup where the kernel enforces it (an allocation past it is OOM-killed there:
// 503, the log names it, everything else keeps serving), and workers are the OOM
// killer's first choice, not the daemon. Needs root and a memory controller; skips with
// the reason otherwise.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { memoryFiles } from '../../src/memory/cgroup.js';
import { makeMemoryBox } from '../helpers/cgroup.js';
import { httpRequest } from '../helpers/http-client.js';
import { PHP_CGI, PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { opsDaemon } from '../ops/helpers.js';

const MiB = 1024 * 1024;
/** php-cgi with PHP's own memory_limit off: only the cgroup stops an allocation. */
const PHP = [PHP_CGI, '-d', 'memory_limit=-1', '-d', 'opcache.enable=0', '-d', 'display_errors=stderr'];

function oomScoreAdj(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/oom_score_adj`, 'latin1').trim());
}

test('memory_budget 80% inside a 64 MiB cgroup: the budget is 80% of the cgroup limit, in the start-up line and in fcgi-pm status', { timeout: 60_000 }, async (t) => {
  const box = makeMemoryBox(t, 64 * MiB);
  if (typeof box === 'string') return t.skip(box);
  const port = await freePort();
  const o = await opsDaemon(t, {
    listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'php', document_root: PHP_FIXTURES }],
    memory_budget: '80%',
    pools: { php: { command: PHP, user: 'root', max_children: 2 } },
  }, { cgroupProcs: box.procs });
  const line = await o.daemon.waitForLog((l) => l.kind === 'memory', { what: 'the memory start-up line' });
  const budget = Math.floor(64 * MiB * 0.8);
  assert.equal(line.budget, budget, o.daemon.dump());
  assert.equal(line.cgroupLimit, 64 * MiB);
  assert.equal(line.cgroupLimitDir, box.dir);
  assert.match(String(line.msg), new RegExp(`^memory budget 51\\.2MiB = 80% of cgroup limit 64\\.0MiB \\(${box.dir}\\)`));

  const status = await o.ctl(['status']);
  assert.match(status.stdout, new RegExp(`memory budget \\S+ \\(80% of cgroup limit 64\\.0MiB \\(${box.dir}\\)\\)`), status.stdout + status.stderr);
  assert.match(status.stdout, new RegExp(`memory cgroup ${box.dir}: limit 64MiB`));
  const json = JSON.parse((await o.ctl(['status', '--json'])).stdout) as { memory: { budget: number; cgroup: { limit: number; dir: string } } };
  assert.equal(json.memory.budget, budget);
  assert.deepEqual([json.memory.cgroup.dir, json.memory.cgroup.limit], [box.dir, 64 * MiB]);
  const r = await httpRequest(`http://127.0.0.1:${port}/hello.php`, { timeout: 20_000 });
  assert.equal(r.status, 200, r.text);

  // The box grows (a resized container): a reload takes the budget from the new limit.
  writeFileSync(join(box.dir, memoryFiles(box.cg.version).limit), String(128 * MiB));
  const since = o.daemon.mark();
  const reload = await o.ctl(['reload']);
  assert.equal(reload.code, 0, reload.stdout + reload.stderr);
  const now = await o.daemon.waitForLog((l) => /^memory budget now/.test(String(l.msg)), { since, what: 'the new budget' });
  assert.equal(now.budget, Math.floor(128 * MiB * 0.8));
  assert.match(String(now.msg), /^memory budget now 102\.4MiB = 80% of cgroup limit 128\.0MiB/);
});

test('a pool whose expected_worker_memory does not fit the budget still serves: the first worker starts, is measured, and more follow', { timeout: 60_000 }, async (t) => {
  const port = await freePort();
  // No cgroup needed: the budget alone leaves far less than the 1 GiB guess.
  const o = await opsDaemon(t, {
    listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'php', document_root: PHP_FIXTURES }],
    memory_budget: '256MiB',
    pools: { php: { command: PHP, user: 'root', pm: 'ondemand', max_children: 2, expected_worker_memory: '1GiB', queue_timeout: '20s' } },
  });
  const d = o.daemon;
  const answers = await Promise.all(Array.from({ length: 4 }, () => httpRequest(`http://127.0.0.1:${port}/alloc.php?mb=2&ms=300`, { timeout: 30_000 })));
  for (const r of answers) assert.equal(r.status, 200, `${r.status} ${r.text}\n${d.dump()}`);
  // The kernel's OOM killer would take a worker first: its oom_score_adj is above the daemon's.
  const workers = d.descendants('php-cgi');
  assert.ok(workers.length > 0, 'idle workers still live');
  for (const w of workers) assert.ok(oomScoreAdj(w) > oomScoreAdj(d.pid), `worker ${w}: ${oomScoreAdj(w)} vs daemon ${oomScoreAdj(d.pid)}`);
  // The first worker was a probe: the log says the budget, not max_children, held the others back.
  const refused = d.findLog((l) => /not spawning \d+ worker\(s\): the memory budget/.test(String(l.msg)));
  assert.ok(refused, d.dump());
  assert.match(String(refused.msg), /expected_worker_memory, not measured yet/);
  const ready = d.logs.findIndex((l) => /worker \d+ ready/.test(String(l.msg)));
  const maxChildren = d.logs.findIndex((l) => /reached max_children/.test(String(l.msg)));
  assert.ok(maxChildren < 0 || maxChildren > ready, `"reached max_children" before any worker was ready:\n${d.dump()}`);
  const json = JSON.parse((await o.ctl(['status', '--json'])).stdout) as { pools: Array<{ memory: { estimateSource: string; estimate: number } }> };
  assert.equal(json.pools[0]!.memory.estimateSource, 'measured');
  assert.ok(json.pools[0]!.memory.estimate < 256 * MiB, `${json.pools[0]!.memory.estimate}`);
});

test('memory_limit gets the pool its own cgroup: a page allocating past it is OOM-killed by the kernel, 503, logged; the daemon and the other pool keep serving; workers rank above the daemon for the OOM killer', { timeout: 90_000 }, async (t) => {
  const box = makeMemoryBox(t, undefined);
  if (typeof box === 'string') return t.skip(box);
  const dir = makeTempDir(t, 'fpm-oom-');
  const ports = { big: await freePort(), other: await freePort() };
  const o = await opsDaemon(t, {
    listen: [
      { protocol: 'http', address: `127.0.0.1:${ports.big}`, pool: 'big', document_root: PHP_FIXTURES },
      { protocol: 'http', address: `127.0.0.1:${ports.other}`, pool: 'other', document_root: PHP_FIXTURES },
    ],
    pools: {
      big: { command: [...PHP, '-d', `error_log=${join(dir, 'big.log')}`], user: 'root', pm: 'ondemand', max_children: 1, memory_limit: '40MiB', expected_worker_memory: '12MiB' },
      other: { command: PHP, user: 'root', pm: 'ondemand', max_children: 1 },
    },
  }, { cgroupProcs: box.procs });
  const d = o.daemon;
  const created = await d.waitForLog((l) => /workers run in memory cgroup/.test(String(l.msg)), { what: 'the pool cgroup line' });
  const poolDir = String(created.cgroup);
  assert.ok(poolDir.startsWith(box.dir + '/'), `${poolDir} is under the daemon's cgroup ${box.dir}`);
  assert.equal(Number(readFileSync(join(poolDir, memoryFiles(box.cg.version).limit), 'latin1')), 40 * MiB);

  const warm = await httpRequest(`http://127.0.0.1:${ports.big}/alloc.php?mb=4`, { timeout: 20_000 });
  assert.equal(warm.status, 200, warm.text);
  const wpid = Number(/pid (\d+)/.exec(warm.text)![1]);
  const procs = readFileSync(join(poolDir, 'cgroup.procs'), 'latin1').split('\n').filter((x) => x !== '').map(Number);
  assert.ok(procs.includes(wpid), `worker ${wpid} in ${poolDir}: ${procs.join(',')}`);
  assert.ok(oomScoreAdj(wpid) > oomScoreAdj(d.pid), `worker ${oomScoreAdj(wpid)} vs daemon ${oomScoreAdj(d.pid)}`);
  assert.equal(oomScoreAdj(wpid), 800);

  const since = d.mark();
  const killed = await httpRequest(`http://127.0.0.1:${ports.big}/alloc.php?mb=200`, { timeout: 30_000 });
  assert.equal(killed.status, 503, `${killed.status} ${killed.text}\n${d.dump(since)}`);
  assert.match(killed.text, /ERR_WORKER_OOM_KILLED/);
  const line = await d.waitForLog((l) => l.code === 'ERR_WORKER_OOM_KILLED', { since, what: 'the OOM-kill line' });
  assert.equal(line.wpid, wpid);
  assert.match(String(line.msg), /killed by the kernel's OOM killer in its pool's memory cgroup \(limit 40\.0MiB\)/);
  assert.ok(d.running, 'the daemon lives');

  const other = await httpRequest(`http://127.0.0.1:${ports.other}/hello.php`, { timeout: 20_000 });
  assert.equal(other.status, 200, other.text);
  const again = await httpRequest(`http://127.0.0.1:${ports.big}/alloc.php?mb=4`, { timeout: 20_000 });
  assert.equal(again.status, 200, `the pool serves again: ${again.text}\n${d.dump(since)}`);

  await d.stop();
  await waitFor(() => !existsSync(poolDir), { timeout: 5000, what: `${poolDir} removed when the pool stopped` });
});
