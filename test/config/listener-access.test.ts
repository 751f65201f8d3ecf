// Who may connect: allowed_clients (TCP) and owner/group/mode (Unix sockets) as config
// keys, with their misplacements and unknown names reported as file:line problems.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/load.js';
import { lookupGroup, lookupUser } from '../../src/config/system-users.js';
import { fixture, problemsOf, tempDir } from './helpers.js';

const POOLS = 'pools:\n  p: { backends: ["127.0.0.1:9999"] }\nlisten:\n';

test('allowed_clients and owner/group are read and resolved', (t) => {
  const dir = tempDir(t);
  const file = fixture(dir, 'ok.yaml', POOLS + [
    '  - { protocol: fastcgi, address: "127.0.0.1:9000", allowed_clients: [127.0.0.1, "10.0.0.0/8", "::1", "FD00::/8"] }',
    '  - { protocol: scgi, address: "unix:/tmp/a.sock", owner: www-data, group: www-data, mode: "0660" }',
    '  - { protocol: scgi, address: "unix:/tmp/b.sock", owner: 0, group: 4242 }',
  ].join('\n') + '\n');
  const c = loadConfig(file);
  assert.deepEqual(c.listen[0]!.allowedClients, ['127.0.0.1', '10.0.0.0/8', '::1', 'fd00::/8']);
  assert.deepEqual(c.listen[1]!.owner, { id: 33, name: 'www-data' });
  assert.deepEqual(c.listen[1]!.group, { id: 33, name: 'www-data' });
  assert.equal(c.listen[1]!.mode, 0o660);
  // A numeric id is taken as it is; one with an entry gets its name.
  assert.deepEqual(c.listen[2]!.owner, { id: 0, name: 'root' });
  assert.deepEqual(c.listen[2]!.group, { id: 4242, name: '4242' });
});

test('misplaced or unknown access settings: one problem each, at their line', (t) => {
  const dir = tempDir(t);
  const lines = [
    '  - { protocol: fastcgi, address: "unix:/tmp/c.sock", allowed_clients: [127.0.0.1] }',
    '  - { protocol: fastcgi, address: "127.0.0.1:9001", owner: www-data }',
    '  - { protocol: fastcgi, address: "127.0.0.1:9002", group: www-data }',
    '  - { protocol: fastcgi, address: "127.0.0.1:9003", allowed_clients: [unix] }',
    '  - { protocol: fastcgi, address: "127.0.0.1:9004", allowed_clients: [] }',
    '  - { protocol: fastcgi, address: "unix:/tmp/d.sock", owner: no-such-user-here }',
    '  - { protocol: fastcgi, address: "unix:/tmp/e.sock", group: no-such-group-here }',
  ];
  const file = fixture(dir, 'bad.yaml', POOLS + lines.join('\n') + '\n');
  const problems = problemsOf(() => loadConfig(file));
  assert.equal(problems.length, lines.length, problems.join('\n'));
  const expect = [
    /listen\[0\]\.allowed_clients: only applies to TCP addresses/,
    /listen\[1\]\.owner: only applies to unix: socket addresses/,
    /listen\[2\]\.group: only applies to unix: socket addresses/,
    /listen\[3\]\.allowed_clients: "unix" is not an address or CIDR block/,
    /listen\[4\]\.allowed_clients: must be a list of CIDR blocks or addresses, got/,
    /listen\[5\]\.owner: no user named "no-such-user-here" on this host/,
    /listen\[6\]\.group: no group named "no-such-group-here" on this host/,
  ];
  expect.forEach((re, i) => {
    assert.match(problems[i]!, new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:${4 + i}: `));
    assert.match(problems[i]!, re);
  });
});

test('lookupUser / lookupGroup read passwd and group files by name or id', (t) => {
  const dir = tempDir(t);
  const files = { passwd: join(dir, 'passwd'), group: join(dir, 'group') };
  writeFileSync(files.passwd, '# comment\nroot:x:0:0:root:/root:/bin/sh\nweb:x:33:34::/var/www:/bin/false\nbroken\n');
  writeFileSync(files.group, 'root:x:0:\nwebgrp:x:34:web\n');
  assert.deepEqual(lookupUser('web', files), { uid: 33, gid: 34, name: 'web' });
  assert.deepEqual(lookupUser(33, files), { uid: 33, gid: 34, name: 'web' });
  assert.deepEqual(lookupUser('0', files), { uid: 0, gid: 0, name: 'root' });
  assert.equal(lookupUser('nobody', files), undefined);
  assert.equal(lookupUser(99, files), undefined);
  assert.deepEqual(lookupGroup('webgrp', files), { gid: 34, name: 'webgrp' });
  assert.deepEqual(lookupGroup(34, files), { gid: 34, name: 'webgrp' });
  assert.equal(lookupGroup('web', files), undefined);
  assert.equal(lookupUser('root', { passwd: join(dir, 'missing'), group: files.group }), undefined);
});
