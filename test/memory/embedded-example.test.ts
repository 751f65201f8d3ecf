// examples/embedded/fcgi-pm.yaml stays a valid config and keeps its promises: a budget
// (from the cgroup limit inside a 64 MiB box, from MemTotal on a bare board), ondemand
// pools with short idle timeouts, a low sampling rate, bounded queues, workers ranked
// above fcgi-pm for the OOM killer. bench/cgroup-box.ts runs it in such a box under load.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/load.js';
import { parseMeminfo, resolveBudget } from '../../src/memory/budget.js';
import { REPO_ROOT } from '../helpers/paths.js';

test('the embedded profile loads, with a budget, ondemand pools, short idle timeouts, slow sampling, bounded queues', () => {
  const cfg = loadConfig(join(REPO_ROOT, 'examples/embedded/fcgi-pm.yaml'));
  assert.deepEqual(cfg.memoryBudget, { kind: 'percent', percent: 80 });
  // A 64 MB board reports about 58 MiB MemTotal.
  const board = parseMeminfo('MemTotal:          59392 kB\nMemAvailable:      41000 kB\n')!;
  const budget = resolveBudget(cfg.memoryBudget!, board).bytes;
  assert.ok(budget > 40 * 1024 * 1024 && budget < 50 * 1024 * 1024, `${budget}`);
  // Inside a 64 MiB cgroup on a bigger host: 80 % of the cgroup limit.
  const host = parseMeminfo('MemTotal:       24683652 kB\nMemAvailable:   20000000 kB\n')!;
  assert.equal(resolveBudget(cfg.memoryBudget!, host, { limit: 64 * 1024 * 1024, dir: '/box' }).bytes, Math.floor(64 * 1024 * 1024 * 0.8));
  assert.ok(cfg.memorySampleInterval! >= 5000);
  assert.ok((cfg.oomScoreAdj ?? 0) < 0, 'fcgi-pm lowers its own oom_score_adj where it may');
  for (const p of cfg.pools.values()) {
    assert.equal(p.pm, 'ondemand', p.name);
    assert.ok(p.idleTimeout <= 30_000, p.name);
    assert.ok(p.queueLimit <= 32, p.name);
    assert.ok((p.oomScoreAdj ?? 0) > (cfg.oomScoreAdj ?? 0), `${p.name}: workers go before fcgi-pm`);
    assert.ok((p.memoryLimit ?? 0) < budget, `${p.name}: memory_limit inside the budget`);
    assert.ok((p.maxMemoryHard ?? 0) > 0, `${p.name}: a hard cap`);
    assert.ok((p.expectedWorkerMemory ?? 0) < budget, p.name);
  }
});
