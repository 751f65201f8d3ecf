// Per-worker caps with real php-cgi behind the real daemon (HTTP front end): a page that
// holds N MiB (test/fixtures/php/alloc.php). Over max_memory the worker finishes the
// request and is replaced; over max_memory_hard it is killed during the request and
// the client gets 503 at once; rlimit_as makes the kernel refuse the allocation.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon, type LogLine } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { isAlive } from '../helpers/proc.js';
import { phpCommand, workerPids } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';

const T = { timeout: 60_000 };
const MiB = 1024 * 1024;

function pidOf(text: string): number {
  const m = /pid (\d+)/.exec(text);
  assert.ok(m, `no pid in ${JSON.stringify(text)}`);
  return Number(m[1]);
}

test('max_memory, max_memory_hard and rlimit_as on php-cgi workers', T, async (t) => {
  const dir = makeTempDir(t, 'fpm-mem-');
  const [soft, hard, limited, drain] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const listener = (port: number, pool: string) => ({ protocol: 'http', address: `127.0.0.1:${port}`, pool, document_root: PHP_FIXTURES });
  const d = await startDaemon(t, {
    listen: [listener(soft, 'soft'), listener(hard, 'hard'), listener(limited, 'limited'), listener(drain, 'drain')],
    memory_sample_interval: '100ms',
    pools: {
      soft: { command: phpCommand(dir, 'memsoft'), max_children: 2, max_memory: '40MiB', kill_timeout: '2s' },
      hard: { command: phpCommand(dir, 'memhard'), max_children: 2, max_memory_hard: '80MiB', kill_timeout: '10s' },
      limited: { command: phpCommand(dir, 'memrlimit'), max_children: 1, rlimit_as: '400MiB', crash_limit: 0 },
      drain: { command: phpCommand(dir, 'memdrain'), max_children: 1, max_memory: '40MiB', kill_timeout: '60s', keep_alive: true },
    },
  });

  await t.test('recycled during its request, the worker exits on SIGTERM once it ends, not after kill_timeout', async () => {
    const first = await httpRequest(`http://127.0.0.1:${drain}/alloc.php?mb=1`);
    const a = pidOf(first.text);
    const mark = d.mark();
    const big = await httpRequest(`http://127.0.0.1:${drain}/alloc.php?mb=60&ms=700`);
    assert.equal(big.status, 200);
    await d.waitForLog((l: LogLine) => l.reason === 'memory' && l.wpid === a && /after its current request/.test(String(l.msg)), { since: mark, what: 'the recycle decision, while busy' });
    // Its kept-alive connection must be closed first: php-cgi waiting on it ignores SIGTERM until kill_timeout (60 s).
    await waitFor(() => !isAlive(a), { timeout: 10_000, what: `worker ${a} to exit on SIGTERM` });
    assert.equal(d.findLog((l: LogLine) => /did not exit within kill_timeout/.test(String(l.msg)), mark), undefined, d.dump(mark));
  });

  await t.test('over max_memory: the request completes, then the worker is replaced', async () => {
    const first = await httpRequest(`http://127.0.0.1:${soft}/alloc.php?mb=1`);
    assert.equal(first.status, 200);
    const a = pidOf(first.text);
    const mark = d.mark();
    const big = await httpRequest(`http://127.0.0.1:${soft}/alloc.php?mb=60&ms=700`);
    assert.equal(big.status, 200, 'graceful: the request that grew is answered');
    assert.equal(pidOf(big.text), a);
    const line = await d.waitForLog((l: LogLine) => l.reason === 'memory' && l.wpid === a && /over max_memory/.test(String(l.msg)), { since: mark, what: 'the recycle decision' });
    assert.ok(Number(line.value) > 40 * MiB, `measured ${line.value} (${line.measure})`);
    assert.equal(line.measure, 'pss');
    assert.equal(line.maxMemory, 40 * MiB);
    await waitFor(() => !isAlive(a), { what: `worker ${a} to exit after its request` });
    const next = await httpRequest(`http://127.0.0.1:${soft}/alloc.php?mb=1`);
    assert.equal(next.status, 200);
    assert.notEqual(pidOf(next.text), a, 'a new worker serves the next request');
  });

  await t.test('over max_memory_hard: killed during the request, the client gets 503 MEMORY_HARD_LIMIT', async () => {
    const mark = d.mark();
    // The page would hold 150 MiB for 30 s; the client gives up after 15 s. Only a kill
    // during the request answers it in time.
    const r = await httpRequest(`http://127.0.0.1:${hard}/alloc.php?mb=150&ms=30000`, { timeout: 15_000 });
    assert.equal(r.status, 503);
    assert.match(r.text, /ERR_MEMORY_HARD_LIMIT/);
    const line = await d.waitForLog((l) => /over max_memory_hard/.test(String(l.msg)), { since: mark, what: 'the kill decision' });
    assert.equal(line.level, 40);
    assert.match(String(line.msg), /killing it now; its request to .*alloc\.php gets 503 MEMORY_HARD_LIMIT/);
    const victim = Number(line.wpid);
    await waitFor(() => !isAlive(victim), { timeout: 5000, what: `worker ${victim} gone` });
    await d.waitForLog((l) => l.wpid === victim && l.reason === 'memory_hard' && l.signal === 'SIGKILL', { since: mark, what: 'its exit, by SIGKILL' });
    assert.deepEqual(workerPids(d, 'memhard').filter((p) => p === victim), []);
    const again = await httpRequest(`http://127.0.0.1:${hard}/alloc.php?mb=1`);
    assert.equal(again.status, 200, 'the pool goes on with a new worker');
  });

  await t.test('rlimit_as: the worker runs under the address-space limit and the kernel refuses more', async () => {
    const r = await httpRequest(`http://127.0.0.1:${limited}/alloc.php?mb=1`);
    assert.equal(r.status, 200);
    const pid = pidOf(r.text);
    assert.deepEqual(workerPids(d, 'memrlimit'), [pid], 'prlimit exec()s php-cgi: the pool spawned this very pid');
    const limits = await import('node:fs').then((fs) => fs.readFileSync(`/proc/${pid}/limits`, 'utf8'));
    assert.match(limits, /Max address space\s+419430400\s+419430400\s+bytes/);
    const mark = d.mark();
    const tooBig = await httpRequest(`http://127.0.0.1:${limited}/alloc.php?mb=500`);
    assert.equal(tooBig.status, 502);
    assert.match(tooBig.text, /ERR_WORKER_CRASHED/);
    await d.waitForLog((l) => /Cannot allocate memory|Out of memory/.test(String(l.msg)), { since: mark, what: 'PHP out of memory' });
  });
});
