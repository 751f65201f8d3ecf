/**
 * php-cgi groups (group_size k) with real php-cgi: one parent with PHP_FCGI_CHILDREN=k
 * is one worker with k slots. Children and their parent come from /proc, not from the
 * pool's bookkeeping.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ErrorCodes } from '../../src/errors.js';
import { isAlive, listProcesses } from '../helpers/proc.js';
import { waitFor, withTimeout } from '../helpers/wait.js';
import { phpPool, type PhpPool } from './php-harness.js';

const T = { timeout: 60_000 };

/** The group parents (children of this process) and each one's php-cgi children, from /proc. */
function groupsInProc(p: PhpPool): Map<number, number[]> {
  const all = listProcesses().filter((x) => x.state !== 'Z');
  const mine = new Set(p.processes());
  const out = new Map<number, number[]>();
  for (const x of all) if (mine.has(x.pid) && x.ppid === process.pid) out.set(x.pid, []);
  for (const x of all) if (mine.has(x.pid) && out.has(x.ppid)) out.get(x.ppid)!.push(x.pid);
  for (const kids of out.values()) kids.sort((a, b) => a - b);
  return out;
}

async function fourChildren(p: PhpPool): Promise<{ parent: number; kids: number[] }> {
  let got: { parent: number; kids: number[] } | undefined;
  await waitFor(() => {
    const g = [...groupsInProc(p)];
    if (g.length !== 1 || g[0]![1].length !== 4) return false;
    got = { parent: g[0]![0], kids: g[0]![1] };
    return true;
  }, { timeout: 10_000, what: 'one php-cgi parent with 4 children' });
  return got!;
}

test('a group of 4: one parent, 4 children in /proc; status shows 4 slots and the children; 8 requests run 4 at a time on the children', T, async (t) => {
  const p = phpPool(t, { pm: 'static', maxChildren: 4, groupSize: 4 });
  await p.pool.start();
  const { parent, kids } = await fourChildren(p);

  const s = p.pool.snapshot();
  assert.equal(s.slotsPerWorker, 4);
  assert.equal(s.workers.length, 1, 'one worker: the group');
  assert.equal(s.workers[0]!.pid, parent);
  assert.equal(s.workers[0]!.slots, 4);
  assert.deepEqual(s.workers[0]!.children!.map((c) => c.pid), kids);

  const reqs = Array.from({ length: 8 }, () => p.request('sleep.php', 'ms=300'));
  // While they run, the group's four slots are busy at once.
  await waitFor(() => p.pool.snapshot().workers[0]?.busySlots === 4, { timeout: 10_000, what: 'four busy slots' });
  await withTimeout(Promise.all(reqs.map((r) => r.sink.answered)), 30_000, '8 requests');
  for (const r of reqs) assert.equal(r.sink.status, 200, r.sink.error?.message);
  const served = new Set(reqs.map((r) => Number(r.sink.text())));
  for (const pid of served) assert.ok(kids.includes(pid), `served by child ${pid} of ${parent}`);
  assert.ok(served.size >= 2, 'more than one child served');
  assert.equal(p.pool.snapshot().maxActive, 4);
});

test('a killed child is replaced by its parent; the group keeps serving and is not counted as a crash', T, async (t) => {
  const p = phpPool(t, { pm: 'static', maxChildren: 4, groupSize: 4 });
  await p.pool.start();
  const { parent, kids } = await fourChildren(p);
  process.kill(kids[0]!, 'SIGKILL');
  await waitFor(() => !isAlive(kids[0]!), { timeout: 5000, what: 'the child to go' });
  const after = await fourChildren(p);
  assert.equal(after.parent, parent, 'same parent');
  assert.ok(!after.kids.includes(kids[0]!), 'the killed child is not back');
  for (const k of kids.slice(1)) assert.ok(after.kids.includes(k), `child ${k} still there`);
  const reqs = Array.from({ length: 8 }, () => p.request('pid.php'));
  await withTimeout(Promise.all(reqs.map((r) => r.sink.answered)), 20_000, '8 requests');
  for (const r of reqs) assert.equal(r.sink.status, 200, r.sink.error?.message);
  const s = p.pool.snapshot();
  assert.equal(s.crashes, 0);
  assert.equal(s.workers[0]!.pid, parent);
});

test('load: 400 requests 8 at a time over two groups of 4, no error; every answer from a child of a group parent', T, async (t) => {
  const p = phpPool(t, { pm: 'static', maxChildren: 8, groupSize: 4 });
  await p.pool.start();
  await waitFor(() => [...groupsInProc(p).values()].filter((k) => k.length === 4).length === 2, { timeout: 10_000, what: 'two groups of 4' });
  const groups = groupsInProc(p);
  const children = new Set([...groups.values()].flat());
  let next = 0;
  const statuses: number[] = [];
  const pids = new Set<number>();
  const lane = async (): Promise<void> => {
    while (next < 400) {
      next++;
      const r = await p.get('pid.php');
      statuses.push(r.sink.status ?? 0);
      pids.add(Number(r.sink.text()));
    }
  };
  await withTimeout(Promise.all(Array.from({ length: 8 }, lane)), 50_000, '400 requests');
  assert.equal(statuses.length, 400);
  assert.deepEqual(statuses.filter((s) => s !== 200), []);
  for (const pid of pids) assert.ok(children.has(pid), `pid ${pid} is a group child`);
  assert.equal(p.pool.snapshot().completed, 400);
});

test('max_memory_hard kills the one child over it; its parent forks a new one and the other children live on', T, async (t) => {
  const p = phpPool(t, { pm: 'static', maxChildren: 4, groupSize: 4, maxMemoryHard: 60 * 1024 * 1024, memorySampleInterval: 100 });
  writeFileSync(join(p.dir, 'big.php'), '<?php $s = str_repeat("x", 96 * 1024 * 1024); usleep(5000000); echo strlen($s);');
  await p.pool.start();
  const { parent, kids } = await fourChildren(p);
  const big = p.request('big.php');
  await withTimeout(big.sink.answered, 20_000, 'the big request');
  assert.equal(big.sink.status, 502, 'its child was killed under it');
  const line = p.lines.find((l) => l.code === ErrorCodes.MEMORY_HARD_LIMIT && l.wpid === parent);
  assert.ok(line, 'a MEMORY_HARD_LIMIT line naming the group');
  const victim = Number(line.child);
  assert.ok(kids.includes(victim));
  const after = await fourChildren(p);
  assert.equal(after.parent, parent);
  assert.ok(!after.kids.includes(victim));
  assert.equal(after.kids.filter((k) => kids.includes(k)).length, 3, 'the other three children live on');
  const r = await p.get('pid.php');
  assert.equal(r.sink.status, 200);
  assert.equal(p.pool.snapshot().recycles['memory_hard'], 1);
});

test('stopped idle, a group goes by SIGKILL at once: its parent and children skip the PHP shutdown SIGTERM would run', T, async (t) => {
  const p = phpPool(t, { pm: 'static', maxChildren: 4, groupSize: 4 });
  await p.pool.start();
  const { parent, kids } = await fourChildren(p);
  assert.equal((await p.get('pid.php')).sink.status, 200);
  await p.pool.stop(5000);
  const exit = p.lines.find((l) => l.wpid === parent && 'exitCode' in l);
  assert.ok(exit !== undefined, 'the group\'s exit line');
  assert.equal(exit.signal, 'SIGKILL', exit.msg);
  assert.doesNotMatch(exit.msg, /needed SIGKILL/);
  assert.equal(exit.level, 20, 'a planned stop, logged as one');
  for (const k of kids) await waitFor(() => !isAlive(k), { timeout: 5000, what: `child ${k} to go` });
});
