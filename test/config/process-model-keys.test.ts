/** preload and group_size: defaults, and the combinations refused with their key and line. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../../src/config/load.js';
import { fixture, problemsOf, tempDir } from './helpers.js';

const pool = (extra: string, command = '[/usr/bin/php-cgi]'): string => `
listen:
  - { protocol: fastcgi, address: 127.0.0.1:9000, pool: app }
pools:
  app:
    command: ${command}
${extra}`;

test('defaults: no preload, parent idle timeout 5 min, group_size unset (1, or max_children for a resident parent: src/pool/resident.ts)', (t) => {
  const cfg = loadConfig(fixture(tempDir(t), 'ok.yaml', pool('    max_children: 4\n')));
  const p = cfg.pools.get('app')!;
  assert.equal(p.preload, false);
  assert.equal(p.preloadIdleTimeout, 300_000);
  assert.equal(p.groupSize, undefined);
});

test('group_size above max_children, and preload with group_size or socket: argv, are refused', (t) => {
  const dir = tempDir(t);
  const a = fixture(dir, 'a.yaml', pool('    max_children: 2\n    group_size: 4\n'));
  assert.deepEqual(problemsOf(() => loadConfig(a)), [`${a}:7: pools.app.group_size: must be ≤ max_children (2): max_children counts php processes, group_size of them per worker; got 4`]);
  const b = fixture(dir, 'b.yaml', pool('    max_children: 4\n    preload: true\n    group_size: 2\n    socket: argv\n', '[/usr/bin/python3, ../bin/fcgi-pm-wsgi, app, "{socket}"]'));
  assert.deepEqual(problemsOf(() => loadConfig(b)), [
    `${b}:8: pools.app.group_size: a preload pool forks one worker per slot itself; group_size is for php-cgi groups`,
    `${b}:9: pools.app.socket: a preload pool hands each fork a listening socket; socket: argv does not apply`,
  ]);
});
