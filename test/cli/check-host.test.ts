// `fcgi-pm check` as a real process runs the host checks `run` would hit: each broken
// config below is valid YAML and schema, fails only on this host, and is named by line.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeTempDir } from '../helpers/tmp.js';
import { runBin } from './helpers.js';
import { freePort } from '../helpers/ports.js';

const asRoot = process.geteuid?.() === 0;

// A port nothing holds: check tries the addresses run would bind.
const port = await freePort();

function config(pool: string[], listen = `  - { protocol: fastcgi, address: 127.0.0.1:${port}, pool: app }`): string {
  return ['control_socket: off', 'listen:', listen, 'pools:', '  app:', '    command: [php-cgi]', ...pool, ''].join('\n');
}

const BROKEN: Array<{ what: string; text: string; line: number; problem: RegExp }> = [
  { what: 'no such user', text: config(['    user: nosuchuser']), line: 7, problem: /pools\.app\.user: no such user "nosuchuser"/ },
  { what: 'no such group', text: config(['    user: www-data', '    group: nosuchgroup']), line: 8, problem: /pools\.app\.group: no such group "nosuchgroup"/ },
  { what: 'cwd missing', text: config(['    user: www-data', '    cwd: /nonexistent']), line: 8, problem: /pools\.app\.cwd: \/nonexistent: no such directory \(ENOENT\)/ },
  { what: 'command not on PATH', text: config(['    user: www-data', '    env: { PATH: /usr/local/nowhere }']), line: 6, problem: /pools\.app\.command: cannot execute "php-cgi": ENOENT \(not found in PATH=\/usr\/local\/nowhere\)/ },
  {
    what: 'socket directory missing',
    text: config(['    user: www-data'], '  - { protocol: fastcgi, address: "unix:/nonexistent-dir/app.sock", pool: app }'),
    line: 3,
    problem: /listen\[0\]\.address: cannot create unix:\/nonexistent-dir\/app\.sock: \/nonexistent-dir: no such directory \(ENOENT\)/,
  },
  {
    what: 'document_root missing',
    text: config(['    user: www-data'], `  - { protocol: http, address: 127.0.0.1:${port}, pool: app, document_root: /nonexistent-root }`),
    line: 3,
    problem: /listen\[0\]\.document_root: \/nonexistent-root: no such directory \(ENOENT\)/,
  },
];

for (const b of BROKEN) {
  test(`check: ${b.what} → exit 1, one line with file:line`, async (t) => {
    const file = join(makeTempDir(t, 'fpm-chk-'), 'fcgi-pm.yaml');
    writeFileSync(file, b.text);
    const r = await runBin(['check', '-c', file]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.equal(r.stdout, '');
    const lines = r.stderr.trimEnd().split('\n');
    assert.equal(lines.length, 1, r.stderr);
    assert.ok(lines[0]!.startsWith(`${file}:${b.line}: `), r.stderr);
    assert.match(lines[0]!, b.problem);
  });
}

test('run refuses each of those configs with the same one line as check, before starting anything', { timeout: 120_000 }, async (t) => {
  for (const b of BROKEN) {
    const file = join(makeTempDir(t, 'fpm-chk-'), 'fcgi-pm.yaml');
    writeFileSync(file, b.text);
    const checked = await runBin(['check', '-c', file]);
    const r = await runBin(['run', '-c', file]);
    assert.equal(r.code, 1, `${b.what}: ${r.stderr}`);
    assert.equal(r.stderr, checked.stderr, b.what);
    const logs = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { level: number; code?: string; kind?: string });
    assert.deepEqual(logs.filter((l) => l.level >= 50).map((l) => [l.kind, l.code]), [['start', 'ERR_HOST_CHECK']], `${b.what}: one fatal line\n${r.stdout}`);
    assert.ok(!r.stdout.includes('"stack"'), `${b.what}: no stack`);
    assert.ok(!logs.some((l) => l.kind === 'pool'), `${b.what}: no pool was started`);
  }
});

test('check: as root, a spawned pool without user → exit 1 with the fix; -R and user: root pass', { skip: !asRoot && 'needs root' }, async (t) => {
  const dir = makeTempDir(t, 'fpm-chk-');
  const file = join(dir, 'fcgi-pm.yaml');
  writeFileSync(file, config([]));
  const r = await runBin(['check', '-c', file]);
  assert.equal(r.code, 1);
  assert.equal(r.stderr, `${file}:5: pools.app: workers would run as root; add user: www-data (or user: root to allow it, or run with --allow-root)\n`);
  const allowed = await runBin(['check', '-R', '-c', file]);
  assert.deepEqual([allowed.code, allowed.stdout, allowed.stderr], [0, 'config OK: 1 listener, 1 pool\n', '']);
  writeFileSync(file, config(['    user: root']));
  assert.equal((await runBin(['check', '-c', file])).code, 0);
});

test('check: a good config with a user, its cwd, socket directory and document_root → exit 0', async (t) => {
  const dir = makeTempDir(t, 'fpm-chk-');
  chmodSync(dir, 0o755);
  const file = join(dir, 'fcgi-pm.yaml');
  writeFileSync(file, config([`    user: www-data`, `    cwd: ${dir}`], [
    `  - { protocol: fastcgi, address: "unix:${dir}/app.sock", pool: app, group: www-data, mode: "0660" }`,
    `  - { protocol: http, address: 127.0.0.1:${port}, pool: app, document_root: ${dir} }`,
  ].join('\n')));
  const r = await runBin(['check', '-c', file]);
  assert.deepEqual([r.code, r.stdout, r.stderr], [0, 'config OK: 2 listeners, 1 pool\n', '']);
});
