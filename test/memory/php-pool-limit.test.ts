// memory_limit with real php-cgi: a page holding 40 MiB per request (about 50 MiB PSS a
// worker), a limit of about three such workers, and waves of concurrent requests. The
// pool never runs a fourth process (counted from /proc, and in the pool's snapshot), the
// requests queue and are all served, and the refusal is logged with its numbers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { withTimeout } from '../helpers/wait.js';
import { phpPool } from '../pool/php-harness.js';

const MiB = 1024 * 1024;
const ALLOC = '<?php $s = str_repeat("x", (int)$_GET["mb"] * 1048576); usleep((int)$_GET["ms"] * 1000); header("Content-Type: text/plain"); echo getmypid();';

/** PSS of a process, read by the test itself (not through the code under test). */
function pss(pid: number): number {
  try {
    const m = /^Pss:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'latin1'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0; // exited meanwhile
  }
}

test('memory_limit of about three workers: concurrent load never runs a fourth', { timeout: 60_000 }, async (t) => {
  const limit = 170 * MiB;
  const p = phpPool(t, { pm: 'ondemand', maxChildren: 8, memoryLimit: limit, expectedWorkerMemory: 52 * MiB, memorySampleInterval: 100, idleTimeout: 30_000 });
  writeFileSync(join(p.dir, 'alloc.php'), ALLOC);
  await p.pool.start();

  let maxProcs = 0;
  let maxSnapshot = 0;
  let maxPss = 0;
  const sample = setInterval(() => {
    const procs = p.processes();
    maxProcs = Math.max(maxProcs, procs.length);
    maxSnapshot = Math.max(maxSnapshot, p.pool.snapshot().workers.length);
    maxPss = Math.max(maxPss, procs.reduce((sum, pid) => sum + pss(pid), 0));
  }, 10);
  t.after(() => clearInterval(sample));

  const served = new Set<string>();
  for (let wave = 0; wave < 2; wave++) {
    const reqs = Array.from({ length: 8 }, () => p.request('alloc.php', 'mb=40&ms=400'));
    await withTimeout(Promise.all(reqs.map((r) => r.sink.answered)), 40_000, `wave ${wave + 1}`);
    for (const r of reqs) {
      assert.equal(r.sink.status, 200, r.sink.error?.message);
      served.add(r.sink.text());
    }
  }
  clearInterval(sample);

  const m0 = p.pool.snapshot().memory!;
  t.diagnostic(`max processes ${maxProcs}, max PSS sum ${(maxPss / MiB).toFixed(1)} MiB, estimate ${(m0.estimate / MiB).toFixed(1)} MiB, refused ${m0.refusedSpawns}`);
  assert.ok(maxProcs <= 3, `saw ${maxProcs} php-cgi processes`);
  assert.ok(maxProcs >= 2, `the limit leaves room for more than one worker (saw ${maxProcs})`);
  assert.ok(maxSnapshot <= 3, `the pool listed ${maxSnapshot} workers`);
  const s = p.pool.snapshot();
  assert.equal(s.completed, 16);
  const m = s.memory!;
  assert.equal(m.limit, limit);
  assert.equal(m.measure, 'pss');
  assert.equal(m.estimateSource, 'measured');
  assert.ok(m.estimate > 40 * MiB && m.estimate < 90 * MiB, `estimate ${m.estimate}: a worker holding 40 MiB`);
  assert.ok(m.refusedSpawns > 0);
  assert.ok(maxPss <= limit + Math.max(m.estimate, 52 * MiB), `measured ${maxPss} bytes of php-cgi PSS at most, limit ${limit}`);
  const refusal = p.lines.find((l) => /not spawning \d+ worker\(s\): .* would pass memory_limit 170\.0MiB/.test(l.msg));
  assert.ok(refusal, 'the refusal is logged');
  assert.equal(refusal.limitedBy, 'memory_limit');
  assert.equal(refusal.memoryLimit, limit);
  assert.ok(served.size >= 2);
});
