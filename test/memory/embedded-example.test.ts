// examples/embedded/fcgi-pm.yaml stays a valid config and keeps its promises: a budget,
// ondemand pools with short idle timeouts, a low sampling rate and small queues.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/load.js';
import { parseMeminfo, resolveBudget } from '../../src/memory/budget.js';
import { REPO_ROOT } from '../helpers/paths.js';

test('the embedded profile loads, with a budget, ondemand pools, short idle timeouts, slow sampling, small queues', () => {
  const cfg = loadConfig(join(REPO_ROOT, 'examples/embedded/fcgi-pm.yaml'));
  assert.deepEqual(cfg.memoryBudget, { kind: 'percent', percent: 80 });
  // A 64 MB board reports about 58 MiB MemTotal.
  const board = parseMeminfo('MemTotal:          59392 kB\nMemAvailable:      41000 kB\n')!;
  const budget = resolveBudget(cfg.memoryBudget!, board).bytes;
  assert.ok(budget > 40 * 1024 * 1024 && budget < 50 * 1024 * 1024, `${budget}`);
  assert.ok(cfg.memorySampleInterval! >= 5000);
  for (const p of cfg.pools.values()) {
    assert.equal(p.pm, 'ondemand', p.name);
    assert.ok(p.idleTimeout <= 30_000, p.name);
    assert.ok(p.queueLimit <= 16, p.name);
    assert.ok((p.maxMemoryHard ?? 0) > 0, `${p.name}: a hard cap`);
    assert.ok((p.expectedWorkerMemory ?? 0) < budget, p.name);
  }
});
