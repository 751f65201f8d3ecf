/** resident_parent decided (src/pool/resident.ts): when auto turns it on, and what a resident pool's config becomes. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { poolConfigFromObject } from '../../src/config/schema.js';
import { autoResident, residentConfig } from '../../src/pool/resident.js';

const MiB = 1024 * 1024;
const php = (extra: Record<string, unknown> = {}) => poolConfigFromObject('p', { command: ['php-cgi'], max_children: 6, ...extra });

test('resident_parent: the pool is one group of max_children unless group_size is set, and php-cgi recycles its children after max_requests', () => {
  const on = residentConfig(php({ resident_parent: true, max_requests: 500, max_requests_jitter: 50 }), undefined);
  assert.equal(on.residentParent, true);
  assert.equal(on.groupSize, 6);
  // The supervisor would recycle the whole group, parent and opcache with it; php-cgi recycles one child and forks it again.
  assert.equal(on.maxRequests, 0);
  assert.equal(on.maxRequestsJitter, 0);
  assert.equal(on.env['PHP_FCGI_MAX_REQUESTS'], '500');
  assert.equal(residentConfig(php({ resident_parent: true, group_size: 2 }), undefined).groupSize, 2);
  // Without max_requests nothing recycles: php-cgi's own default (500) stays off.
  assert.equal(residentConfig(php({ resident_parent: true }), undefined).env['PHP_FCGI_MAX_REQUESTS'], '0');
  const off = php({ resident_parent: false });
  assert.equal(residentConfig(off, 64 * MiB), off, 'off, with or without a budget');
  assert.equal(php().residentParent, false, 'the default: cold zero');
});

test('resident_parent: auto is on for a php-cgi ondemand pool through the proxy while a memory budget is set, and off otherwise', () => {
  const auto = (extra: Record<string, unknown>, budget: number | undefined) => residentConfig(php({ resident_parent: 'auto', ...extra }), budget).residentParent;
  assert.equal(php({ resident_parent: 'auto' }).residentParent, 'auto');
  assert.equal(auto({}, 512 * MiB), true);
  assert.equal(auto({}, undefined), false, 'no budget to judge what the parent costs');
  assert.equal(auto({ pm: 'dynamic', min_spare: 1, max_spare: 2 }, 512 * MiB), false, 'dynamic pools keep spares, never zero');
  assert.equal(auto({ pm: 'static' }, 512 * MiB), false);
  assert.equal(auto({ command: ['/usr/bin/python3', 'app.py'] }, 512 * MiB), false, 'not php-cgi');
  assert.equal(autoResident({ ...php(), accept: 'direct' }, 512 * MiB), false, 'direct pools exec every worker on the shared socket');
  assert.throws(() => php({ resident_parent: 'sometimes' }), /resident_parent: must be true or false or auto/);
});
