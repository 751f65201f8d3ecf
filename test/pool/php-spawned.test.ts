/**
 * Spawned pools with real php-cgi workers: process counts come from /proc, not from
 * the pool's bookkeeping.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ErrorCodes } from '../../src/errors.js';
import { isAlive } from '../helpers/proc.js';
import { waitFor, withTimeout } from '../helpers/wait.js';
import { phpPool } from './php-harness.js';

const T = { timeout: 60_000 };

test('ondemand: zero processes at start, never more than max_children under 20 concurrent requests, none after idle_timeout', T, async (t) => {
  const p = phpPool(t, { pm: 'ondemand', maxChildren: 3, idleTimeout: 500 });
  await p.pool.start();
  assert.deepEqual(p.processes(), [], 'no worker before the first request');

  let maxSeen = 0;
  const seen = new Set<number>();
  const sample = setInterval(() => {
    const procs = p.processes();
    for (const pid of procs) seen.add(pid);
    maxSeen = Math.max(maxSeen, procs.length);
  }, 5);
  t.after(() => clearInterval(sample));
  const reqs = Array.from({ length: 20 }, () => p.request('sleep.php', 'ms=150'));
  await withTimeout(Promise.all(reqs.map((r) => r.sink.answered)), 30_000, '20 requests');
  clearInterval(sample);

  for (const r of reqs) assert.equal(r.sink.status, 200, r.sink.error?.message);
  const pids = new Set(reqs.map((r) => Number(r.sink.text())));
  assert.equal(pids.size, 3, 'three workers served them');
  assert.ok(maxSeen <= 3, `saw ${maxSeen} php-cgi processes`);
  assert.equal(maxSeen, 3);
  const s = p.pool.snapshot();
  assert.equal(s.completed, 20);
  assert.equal(s.maxActive, 3);
  assert.ok(s.maxChildrenReached >= 1);

  // Idle for idle_timeout: all of them stop. processes() looks machine-wide for the pool's
  // marker, so reparented ones count too; a bare pid check would trip on pid reuse.
  await waitFor(() => p.processes().length === 0, { timeout: 10_000, what: 'idle workers to stop' });
  assert.equal(seen.size, 3);
  assert.equal(p.pool.snapshot().recycles['idle_timeout'], 3);
});

test('an idle php-cgi retired by idle_timeout gets SIGKILL at once (nothing to finish), logged as the planned stop it is', T, async (t) => {
  const p = phpPool(t, { pm: 'ondemand', maxChildren: 1, idleTimeout: 300 });
  await p.pool.start();
  const pid = Number((await p.get('pid.php')).sink.text());
  let exit: (typeof p.lines)[number] | undefined;
  await waitFor(() => (exit = p.lines.find((l) => l.wpid === pid && 'exitCode' in l)) !== undefined, { timeout: 10_000, what: 'the idle worker\'s exit' });
  assert.ok(exit !== undefined);
  assert.deepEqual([exit.reason, exit.signal], ['idle_timeout', 'SIGKILL'], exit.msg);
  assert.doesNotMatch(exit.msg, /needed SIGKILL/);
  assert.equal(p.pool.snapshot().recycles['idle_timeout'], 1);
});

test('max_requests recycles the worker: the pid changes', T, async (t) => {
  const p = phpPool(t, { pm: 'ondemand', maxChildren: 1, maxRequests: 2 });
  const pids: number[] = [];
  for (let i = 0; i < 5; i++) {
    const r = await p.get('pid.php');
    assert.equal(r.sink.status, 200, r.sink.error?.message);
    pids.push(Number(r.sink.text()));
  }
  assert.equal(pids[0], pids[1]);
  assert.notEqual(pids[1], pids[2]);
  assert.equal(pids[2], pids[3]);
  assert.notEqual(pids[3], pids[4]);
  await waitFor(() => !isAlive(pids[0]!) && !isAlive(pids[2]!), { timeout: 5000, what: 'recycled workers to exit' });
  assert.equal(p.pool.snapshot().recycles['max_requests'], 2);
});

test('a page that kills its worker: 502 WORKER_CRASHED, and the next request succeeds', T, async (t) => {
  const p = phpPool(t, { pm: 'ondemand', maxChildren: 2 });
  const first = await p.get('pid.php');
  const pid = Number(first.sink.text());
  const crash = await p.get('kill9.php');
  assert.equal(crash.sink.error?.code, ErrorCodes.WORKER_CRASHED, crash.sink.error?.message);
  assert.equal(crash.sink.status, 502);
  assert.match(crash.sink.error!.message, new RegExp(`worker ${pid} .*killed by SIGKILL while serving .*kill9.php`));
  const segv = await p.get('segv.php');
  assert.equal(segv.sink.error?.code, ErrorCodes.WORKER_CRASHED);
  assert.match(segv.sink.error!.message, /SIGSEGV/);
  const next = await p.get('pid.php');
  assert.equal(next.sink.status, 200, next.sink.error?.message);
  assert.notEqual(Number(next.sink.text()), pid);
  const s = p.pool.snapshot();
  assert.equal(s.crashes, 2);
  assert.equal(s.errors.crashed, 2);
});

test('a request past request_timeout gets 504 and its worker is gone from /proc', T, async (t) => {
  const p = phpPool(t, { pm: 'ondemand', maxChildren: 1, requestTimeout: 500, slowRequest: 200 });
  const pid = Number((await p.get('pid.php')).sink.text());
  const r = await p.get('sleep.php', 'ms=20000');
  assert.equal(r.sink.status, 504);
  assert.equal(r.sink.error?.code, ErrorCodes.REQUEST_TIMEOUT);
  await waitFor(() => !isAlive(pid), { timeout: 5000, what: `pid ${pid} to exit` });
  const line = p.lines.find((l) => String(l.msg).includes('past request_timeout'));
  assert.ok(line, 'a log line about the timeout');
  assert.equal(line.wpid, pid);
  assert.equal(line.pool, 'php');
  assert.match(String(line.script), /sleep\.php$/);
  assert.ok(Number(line.durationMs) >= 500);
  assert.equal(p.pool.snapshot().slowRequests, 1);
  // The pool goes on with a new worker.
  const next = await p.get('pid.php');
  assert.equal(next.sink.status, 200);
});

test('max_children 1 + queue_limit 2: of 10 concurrent slow requests 3 succeed and 7 get 503 at once', T, async (t) => {
  const p = phpPool(t, { pm: 'ondemand', maxChildren: 1, queueLimit: 2 });
  const reqs = Array.from({ length: 10 }, () => p.request('sleep.php', 'ms=300'));
  await withTimeout(Promise.all(reqs.map((r) => r.sink.answered)), 20_000, 'all answered');
  const ok = reqs.filter((r) => r.sink.status === 200);
  const full = reqs.filter((r) => r.sink.status === 503);
  assert.equal(ok.length, 3);
  assert.equal(full.length, 7);
  for (const r of full) assert.equal(r.sink.error?.code, ErrorCodes.QUEUE_FULL);
  // "At once": every rejection was answered before the first success.
  const firstOk = Math.min(...ok.map((r) => r.sink.answeredAt));
  for (const r of full) assert.ok(r.sink.answeredAt < firstOk);
  assert.equal(p.pool.snapshot().rejected.queueFull, 7);
});

test('static: max_children processes from start, a killed one is replaced', T, async (t) => {
  const p = phpPool(t, { pm: 'static', maxChildren: 3, idleTimeout: 200 });
  await p.pool.start();
  const first = p.processes();
  assert.equal(first.length, 3);
  process.kill(first[1]!, 'SIGKILL');
  await waitFor(() => !isAlive(first[1]!), { timeout: 5000, what: 'killed worker to go' });
  await waitFor(() => p.processes().length === 3 && !p.processes().includes(first[1]!), { timeout: 10_000, what: 'replacement' });
  // That idle time never shrinks a static pool is checked on the fake clock (spawned-pool.test.ts).
  const r = await p.get('pid.php');
  assert.equal(r.sink.status, 200);
});

test('dynamic: start_children, growth under load, back down to min_spare when idle', T, async (t) => {
  const p = phpPool(t, { pm: 'dynamic', maxChildren: 4, startChildren: 2, minSpare: 1, maxSpare: 2, idleTimeout: 600 });
  await p.pool.start();
  assert.equal(p.processes().length, 2);
  let maxSeen = 0;
  const sample = setInterval(() => (maxSeen = Math.max(maxSeen, p.processes().length)), 5);
  t.after(() => clearInterval(sample));
  const reqs = Array.from({ length: 8 }, () => p.request('sleep.php', 'ms=700'));
  await withTimeout(Promise.all(reqs.map((r) => r.sink.answered)), 30_000, 'load');
  clearInterval(sample);
  for (const r of reqs) assert.equal(r.sink.status, 200, r.sink.error?.message);
  assert.ok(maxSeen > 2, `grew (saw ${maxSeen})`);
  assert.ok(maxSeen <= 4, `never past max_children (saw ${maxSeen})`);
  // Not below it: checked on the fake clock (spawned-pool.test.ts), where waiting costs nothing.
  await waitFor(() => p.processes().length === 1, { timeout: 10_000, what: 'shrink to min_spare' });
});

test('stop: running requests finish, then every worker process exits before stop resolves', T, async (t) => {
  const p = phpPool(t, { pm: 'static', maxChildren: 2 });
  await p.pool.start();
  const pids = p.processes();
  assert.equal(pids.length, 2);
  // Says it started, then runs on for 300 ms: stop comes while PHP runs it.
  writeFileSync(join(p.dir, 'mark-sleep.php'), `<?php file_put_contents(__DIR__ . '/started', getmypid()); usleep(300000); header('Content-Type: text/plain'); echo getmypid();`);
  const running = p.request('mark-sleep.php');
  await waitFor(() => existsSync(join(p.dir, 'started')), { timeout: 10_000, what: 'the script to start' });
  assert.equal(running.sink.status, 0, 'not answered before stop');
  await p.pool.stop(5000);
  assert.equal(running.sink.status, 200);
  for (const pid of pids) assert.equal(isAlive(pid), false);
  const late = await p.get('pid.php');
  assert.equal(late.sink.error?.code, ErrorCodes.SHUTTING_DOWN);
});

test('a client abort while the script runs: its worker is not handed the next request until the script ended', T, async (t) => {
  const p = phpPool(t, { pm: 'ondemand', maxChildren: 2 });
  // Runs until the test creates "release" (at most 8 s), like a slow page.
  writeFileSync(
    join(p.dir, 'hold.php'),
    `<?php file_put_contents(__DIR__ . '/started', getmypid());
    $t = microtime(true);
    while (!file_exists(__DIR__ . '/release') && microtime(true) - $t < 8) usleep(20000);
    header('Content-Type: text/plain'); echo str_repeat('x', 10000);`,
  );
  const first = Number((await p.get('pid.php')).sink.text());
  const held = p.request('hold.php');
  // file_put_contents creates the file before it writes the pid: wait for the pid itself.
  const startedBy = await waitFor(() => {
    const text = existsSync(join(p.dir, 'started')) ? readFileSync(join(p.dir, 'started'), 'utf8') : '';
    return text === '' ? undefined : Number(text);
  }, { timeout: 10_000, what: 'hold.php to start' });
  assert.equal(startedBy, first, 'the warm worker runs it');
  held.ex.abort(); // the client goes away; php-cgi runs the script on

  // The next request must not queue behind the running script on the same worker.
  const next = await withTimeout(p.get('pid.php'), 6000, 'next request');
  assert.equal(next.sink.status, 200, next.sink.error?.message);
  assert.notEqual(Number(next.sink.text()), first, 'served by another worker while the script still runs');
  assert.equal(p.pool.snapshot().workers.find((w) => w.pid === first)?.state, 'busy');

  // Once the script ends, its worker is free again (not stopped).
  writeFileSync(join(p.dir, 'release'), '');
  await waitFor(() => p.pool.snapshot().aborted === 1, { timeout: 10_000, what: 'the orphaned request to end' });
  assert.equal(p.pool.snapshot().workers.find((w) => w.pid === first)?.state, 'idle');
  assert.ok(isAlive(first));
  const again = await p.get('pid.php');
  assert.equal(again.sink.status, 200, again.sink.error?.message);
});

test('queue_limit 0, ondemand: a request spawns its worker and is served', T, async (t) => {
  const p = phpPool(t, { pm: 'ondemand', maxChildren: 1, queueLimit: 0 });
  const r = await p.get('pid.php');
  assert.equal(r.sink.status, 200, r.sink.error?.message);
  assert.equal(p.pool.snapshot().rejected.queueFull, 0);
});
