// A site whose definition changes while a request runs: that request finishes on the
// old pool (no failed request), the next one is served by a pool built from the new
// definition, and the old pool's worker then exits.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify as stringifyYaml } from 'yaml';
import { startDaemon } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { PHP_FLAGS } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { isAlive } from '../helpers/proc.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';

const PAGE = `<?php
if (isset($_GET['slow'])) { touch(__DIR__ . '/started'); usleep(1500000); }
echo getenv('GENERATION'), ' ', getmypid();
`;

test('a changed site drains its old pool while a new one serves', { timeout: 60_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-vhc-');
  const root = join(dir, 'www');
  mkdirSync(root);
  writeFileSync(join(root, 'index.php'), PAGE);
  const sites = join(dir, 'sites');
  mkdirSync(sites);
  const define = (generation: string): void =>
    writeFileSync(join(sites, 'app.yaml'), stringifyYaml({ names: ['app.test'], document_root: root, pool: { env: { GENERATION: generation } } }));
  define('one');
  const port = await freePort();
  const d = await startDaemon(t, {
    control_socket: 'off',
    listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, vhosts: true }],
    vhosts: { dir: sites, poll_interval: '200ms', defaults: { command: ['php-cgi', ...PHP_FLAGS], max_children: 2 } },
    log: { level: 'info', access: false },
  });
  const get = (q = '') => httpRequest(`http://127.0.0.1:${port}/index.php${q}`, { headers: { host: 'app.test' }, timeout: 20_000 });

  const slow = get('?slow=1');
  await waitFor(() => existsSync(join(root, 'started')), { timeout: 15_000, what: 'the slow request to run' });
  const mark = d.mark();
  define('two');
  await d.waitForLog((l) => l.kind === 'vhosts' && l.site === 'app' && l.why === 'changed', { since: mark, timeout: 5000 });
  const fresh = await get();
  assert.equal(fresh.status, 200, fresh.text);
  const [gen, pid] = fresh.text.split(' ');
  assert.equal(gen, 'two');
  const old = await slow;
  assert.equal(old.status, 200, old.text);
  const [oldGen, oldPid] = old.text.split(' ');
  assert.equal(oldGen, 'one', 'the request that was running finished on the old pool');
  assert.notEqual(oldPid, pid);
  await waitFor(() => !isAlive(Number(oldPid)), { timeout: 10_000, what: 'the old pool worker to exit' });
});
