/**
 * resident_parent (warm zero): a php-cgi pool scaled to zero keeps its workers' parent,
 * paused, and the next request is served by a child it forks, which finds the scripts in
 * the parent's opcache, as does a worker that starts while another is busy (the pool is
 * one php-cgi group); the parent shows in status and workers with its memory,
 * counts in the pool's, and is the first thing given back under memory pressure, after
 * which the pool starts cold; the children kept beside the paused parent are ones that
 * served, so a request beside a busy one after warm zero finds a warm child. Real php-cgi
 * behind real nginx.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { PoolStatus, StatusSnapshot } from '../../src/control/types.js';
import { fixtureCommand } from '../fixtures/workers/index.js';
import { httpRequest } from '../helpers/http-client.js';
import { fastcgiParams, startNginx } from '../helpers/nginx.js';
import { PHP_FIXTURES, REPO_ROOT } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { isAlive, listProcesses } from '../helpers/proc.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { opsDaemon } from './helpers.js';

interface Served {
  pid: number;
  ppid: number;
  opcache_start: number;
  hits: number;
  cached: boolean;
}

test('warm zero: the next request, and one beside a busy worker, are served by forks of the paused parent, from its opcache; the parent is in status and workers, and memory pressure gives it back first', { timeout: 120_000 }, async (t) => {
  const MiB = 1024 * 1024;
  const port = await freePort();
  const ports = { keep: await freePort(), other: await freePort() };
  const logs = makeTempDir(t, 'fpm-resident-');
  const config = (budget: string): Record<string, unknown> => ({
    listen: [
      { protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'php' },
      { protocol: 'http', address: `127.0.0.1:${ports.keep}`, pool: 'keep', document_root: REPO_ROOT },
      { protocol: 'http', address: `127.0.0.1:${ports.other}`, pool: 'other', document_root: REPO_ROOT },
    ],
    memory_budget: budget,
    memory_sample_interval: '100ms',
    pools: {
      php: { command: phpCommand(logs, 'resident'), pm: 'ondemand', max_children: 2, idle_timeout: '1s', resident_parent: true, opcache_file_cache: false, max_requests: 2 },
      // Never asked: charged at this estimate, so the budget can sit below what is counted and above what is used.
      keep: { command: fixtureCommand('responder'), pm: 'static', max_children: 1, expected_worker_memory: '200MiB', inherit_env: ['PATH'] },
      other: { command: fixtureCommand('responder'), pm: 'ondemand', max_children: 1, expected_worker_memory: '1MiB', inherit_env: ['PATH'], queue_timeout: '20s' },
    },
  });
  const d = await opsDaemon(t, config('4GiB'));
  const ngx = await startNginx(t, `root ${PHP_FIXTURES}; location ~ \\.php$ { fastcgi_pass 127.0.0.1:${port}; ${fastcgiParams()} }`);
  const status = async (): Promise<StatusSnapshot> => JSON.parse((await d.ctl(['status', '--json'])).stdout) as StatusSnapshot;
  const pool = (s: StatusSnapshot, name: string): PoolStatus => s.pools.find((p) => p.name === name)!;
  const get = async (): Promise<Served> => {
    const r = await httpRequest(`${ngx.url}/warm.php`, { timeout: 30_000 });
    assert.equal(r.status, 200, r.text);
    return JSON.parse(r.text) as Served;
  };

  const first = await get();
  // No file cache: whatever the next worker finds compiled comes from the parent's shared memory.
  assert.equal(first.cached, true);
  // Scaled to zero: the parent stays, paused, with its two children paused beside it, measured and counted.
  const atZero = await waitFor(async () => {
    const p = pool(await status(), 'php');
    return p.workers.length === 0 && p.preload?.memory !== undefined ? p : undefined;
  }, { timeout: 20_000, what: 'php at warm zero with its parent measured' });
  const parent = atZero.preload!;
  assert.equal(parent.kind, 'php-cgi');
  assert.equal(parent.pid, first.ppid, 'the parent is the first child\'s parent');
  await waitFor(() => {
    const kept = listProcesses().filter((x) => x.ppid === parent.pid && x.state !== 'Z');
    return kept.length === 2 && kept.every((x) => x.state === 'T');
  }, { timeout: 5_000, what: 'the group of two kept, stopped (SIGSTOP)' });
  assert.equal(listProcesses().find((x) => x.pid === parent.pid)?.state, 'T', 'the parent is stopped (SIGSTOP)');
  assert.ok(parent.memory! > 0);
  assert.ok((atZero.memory as { committed: number }).committed >= parent.memory!, 'the parent counts in the pool');
  assert.equal(atZero.processes.total, 0);
  const workers = await d.ctl(['workers']);
  assert.match(workers.stdout, new RegExp(`^php\\s+${parent.pid}\\s+php-cgi parent \\(paused\\)\\s+0 wakes`, 'm'), workers.stdout);
  const text = await d.ctl(['status', '--pool', 'php']);
  assert.match(text.stdout, new RegExp(`php-cgi parent ${parent.pid}: paused at warm zero, woken 0 time\\(s\\)`));

  // The next request: a child of the same parent (the kept one, or one it forks on waking), whose opcache (started with the parent) already holds the page.
  const second = await get();
  assert.equal(second.ppid, parent.pid, 'forked by the resident parent');
  assert.equal(second.opcache_start, first.opcache_start, 'the same opcache shared memory');
  assert.ok(second.hits > first.hits, `opcache hits on the new child's first request (${first.hits} → ${second.hits})`);

  // A worker that starts while another is busy is a child of the same parent too, not an exec.
  // Long enough that a status CLI run (seconds on a loaded machine) still finds it running.
  const slow = httpRequest(`${ngx.url}/sleep.php?ms=6000`, { timeout: 30_000 });
  await waitFor(async () => pool(await status(), 'php').workers.some((w) => w.state === 'busy' || (w.busySlots ?? 0) > 0), { timeout: 10_000, what: 'the slow request running' });
  const beside = await get();
  assert.equal(beside.ppid, parent.pid, 'the worker beside a busy one is forked by the resident parent');
  assert.equal(beside.opcache_start, first.opcache_start, 'and shares its opcache');
  const slept = await slow;
  assert.equal(slept.status, 200, slept.text);
  assert.doesNotMatch(slept.text, new RegExp(`pid ${beside.pid}\\b`), 'two children served the two requests');

  // php-cgi recycles its children after max_requests (2) and the parent forks them again: the parent, and its opcache, stay.
  const served: Served[] = [];
  for (let i = 0; i < 5; i++) served.push(await get());
  for (const s of served) assert.deepEqual([s.ppid, s.opcache_start], [parent.pid, first.opcache_start]);
  assert.ok(new Set(served.map((s) => s.pid)).size > 2, `two children served five requests, two each at most: ${served.map((s) => s.pid).join(' ')}`);

  // Back at warm zero, then memory pressure: a budget just short of what is counted. other's
  // demand cannot fit beside the parent, and the parent alone makes room for it.
  const before = await waitFor(async () => {
    const s = await status();
    const p = pool(s, 'php');
    return p.workers.length === 0 && p.preload?.memory !== undefined && pool(s, 'keep').workers[0]?.state === 'idle' ? s : undefined;
  }, { timeout: 20_000, what: 'php at warm zero again' });
  const again = pool(before, 'php').preload!;
  assert.equal(again.pid, parent.pid);
  assert.ok(again.memory! >= 2 * MiB, `the parent measures ${again.memory} bytes`);
  const parked = await waitFor(() => listProcesses().find((x) => x.ppid === again.pid && x.state === 'T'), { timeout: 5_000, what: 'a child kept beside the parent again' });
  // other's 1 MiB must not fit (budget < committed + 1 MiB) and must fit once the parent is
  // gone (budget ≥ committed − parent + 1 MiB). The daemon's own memory, in committed, moves
  // between this read and the reload (a GC frees megabytes): the budget sits in the middle of
  // that window, half the parent's size from each end, not 2 MiB from one of them.
  const budget = Math.floor((before.memory!.committed! + 1 * MiB - again.memory! / 2) / 1024);

  d.rewrite(config(`${budget}KiB`));
  const since = d.daemon.mark();
  assert.equal((await d.ctl(['reload'])).code, 0);
  const r = await httpRequest(`http://127.0.0.1:${ports.other}/app`, { timeout: 30_000 });
  assert.equal(r.status, 200, r.text + d.daemon.dump(since));
  const line = await d.daemon.waitForLog((l) => l.code === 'ERR_PRELOAD_PARENT_EVICTED', { since, what: 'the parent evicted' });
  assert.equal(line.wpid, parent.pid);
  await waitFor(() => !isAlive(parent.pid), { timeout: 10_000, what: 'the parent gone' });
  await waitFor(() => !isAlive(parked.pid), { timeout: 10_000, what: `its kept child ${parked.pid} gone too (continued, it gets its parent's SIGTERM)` });
  const evictions = d.daemon.logsSince(since).filter((l) => l.victimPool !== undefined);
  assert.deepEqual(evictions.map((l) => l.victimPid), [parent.pid], `only the parent was given back:\n${d.daemon.dump(since)}`);
  assert.equal(pool(await status(), 'php').preload, undefined);

  // Cold zero: with room again the next request is an exec, with an opcache of its own.
  d.rewrite(config('4GiB'));
  assert.equal((await d.ctl(['reload'])).code, 0);
  const cold = await get();
  assert.notEqual(cold.ppid, parent.pid);
  assert.notEqual(cold.opcache_start, first.opcache_start, 'a new opcache');
});

test('warm zero keeps the two children that served beside the paused parent, which take the requests after it', { timeout: 120_000 }, async (t) => {
  const port = await freePort();
  const logs = makeTempDir(t, 'fpm-resident-spare-');
  const d = await opsDaemon(t, {
    listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'php' }],
    pools: { php: { command: phpCommand(logs, 'spare'), pm: 'ondemand', max_children: 4, idle_timeout: '1s', resident_parent: true, opcache_file_cache: false } },
  });
  const ngx = await startNginx(t, `root ${PHP_FIXTURES}; location ~ \\.php$ { fastcgi_pass 127.0.0.1:${port}; ${fastcgiParams()} }`);
  const status = async (): Promise<StatusSnapshot> => JSON.parse((await d.ctl(['status', '--json'])).stdout) as StatusSnapshot;
  const pidOf = (text: string): number => Number(/pid (\d+)/.exec(text)![1]);
  const sleep = async (ms: number): Promise<number> => {
    const r = await httpRequest(`${ngx.url}/sleep.php?ms=${ms}`, { timeout: 30_000 });
    assert.equal(r.status, 200, r.text);
    return pidOf(r.text);
  };

  // Two children serve at once; the group's two others never serve.
  const served = new Set(await Promise.all([sleep(1500), sleep(1500)]));
  assert.equal(served.size, 2, 'two children served the two requests');
  const parent = await waitFor(async () => {
    const p = (await status()).pools.find((x) => x.name === 'php')!;
    return p.workers.length === 0 && p.preload !== undefined ? p.preload : undefined;
  }, { timeout: 20_000, what: 'php at warm zero' });
  const kept = await waitFor(() => {
    const live = listProcesses().filter((x) => x.ppid === parent.pid && x.state !== 'Z');
    return live.length === 2 && live.every((x) => x.state === 'T') ? live : undefined;
  }, { timeout: 5_000, what: 'two children stopped beside the parent' });
  assert.deepEqual(new Set(kept.map((x) => x.pid)), served, 'the kept children are the two that served');

  // Woken by a request that stays busy, the next request meets the warm spare.
  const slow = sleep(4000);
  await waitFor(async () => (await status()).pools.find((x) => x.name === 'php')!.workers.some((w) => w.state === 'busy' || (w.busySlots ?? 0) > 0), { timeout: 10_000, what: 'the slow request running' });
  const r = await httpRequest(`${ngx.url}/warm.php`, { timeout: 30_000 });
  assert.equal(r.status, 200, r.text);
  const beside = JSON.parse(r.text) as Served;
  assert.equal(beside.ppid, parent.pid);
  const woke = await slow;
  // The parent runs again only once a third request comes: a child it forks on waking,
  // running into accept() as a connection arrives, would take it ahead of the kept ones
  // still being woken (before, in two runs of five).
  assert.ok(served.has(woke) && served.has(beside.pid), `the two requests after warm zero (${woke}, ${beside.pid}) met the children that served before (${[...served].join(', ')})`);
});
