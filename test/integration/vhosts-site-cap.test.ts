// vhosts.site_max_children with the real daemon and php-cgi: a site whose own settings ask
// for a static pool of 6 runs 2 workers under a cap of 2, and still answers every request
// (the rest wait in its queue); a site within the cap runs what it asks.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify as stringifyYaml } from 'yaml';
import type { StatusSnapshot } from '../../src/control/types.js';
import { httpRequest } from '../helpers/http-client.js';
import { PHP_FLAGS } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { makeTempDir } from '../helpers/tmp.js';
import { opsDaemon } from '../ops/helpers.js';

test('vhosts.site_max_children: a site asking for 6 static workers runs 2, and all its requests are answered', { timeout: 90_000 }, async (t) => {
  const base = makeTempDir(t, 'fpm-cap-');
  const root = join(base, 'www');
  mkdirSync(root);
  writeFileSync(join(root, 'slow.php'), '<?php usleep(300000); echo getmypid();');
  const sites = join(base, 'sites');
  mkdirSync(sites);
  writeFileSync(join(sites, 'greedy.yaml'), stringifyYaml({ names: ['greedy.test'], document_root: root, pool: { pm: 'static', max_children: 6 } }));
  writeFileSync(join(sites, 'modest.yaml'), stringifyYaml({ names: ['modest.test'], document_root: root, pool: { pm: 'static', max_children: 1 } }));
  const http = await freePort();
  const d = await opsDaemon(t, {
    listen: [{ protocol: 'http', address: `127.0.0.1:${http}`, vhosts: true }],
    vhosts: { dir: sites, site_max_children: 2, defaults: { command: ['php-cgi', ...PHP_FLAGS] } },
    log: { level: 'info', access: false },
  });
  const get = (host: string) => httpRequest(`http://127.0.0.1:${http}/slow.php`, { headers: { host }, timeout: 30_000 });
  const answers = await Promise.all([...Array.from({ length: 6 }, () => get('greedy.test')), get('modest.test')]);
  assert.deepEqual(answers.map((a) => a.status), [200, 200, 200, 200, 200, 200, 200], answers.map((a) => a.text).join(' | '));
  const pids = new Set(answers.slice(0, 6).map((a) => a.text));
  assert.ok(pids.size <= 2, `greedy's 6 requests ran in ${pids.size} workers`);
  const s = JSON.parse((await d.ctl(['status', '--json'])).stdout) as StatusSnapshot;
  const pool = (name: string) => s.pools.find((p) => p.name === name)!;
  assert.equal(pool('greedy').workers.length, 2, 'greedy: the cap, not its 6');
  assert.equal(pool('modest').workers.length, 1, 'modest: its own 1');
});
