// One `fcgi-pm check` run names every mistake of a file, each with its line: schema
// problems beside the host checks of the same pool (a bad user and a missing cwd), a
// worker that speaks another protocol than the pool's backend, max_children past pid_max
// or past the memory a static pool can have, a socket the front end cannot reach, and a
// port in use. Each of these passed check before and failed later (at start, or as 502s).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { REPO_ROOT } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { makeTempDir } from '../helpers/tmp.js';
import { runBin } from './helpers.js';

const asRoot = process.geteuid?.() === 0;
const pidMax = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8').trim());

test('check: every problem of point 4 in one run, in file order, each with its line', { skip: !asRoot && 'needs root (the socket directory is judged as www-data)' }, async (t) => {
  const dir = makeTempDir(t, 'fpm-chk1-');
  const closed = makeTempDir(t, 'fpm-closed-'); // 0700 root: www-data cannot pass
  const port = await freePort();
  const holder: Server = createServer();
  await new Promise<void>((resolve) => holder.listen(port, '127.0.0.1', resolve));
  t.after(() => holder.close());
  const tooMany = pidMax < 100_000 ? pidMax + 1 : undefined;
  const lines = [
    'control_socket: off', // 1
    'listen:', // 2
    `  - { protocol: fastcgi, address: "127.0.0.1:${port}", pool: app }`, // 3
    `  - { protocol: fastcgi, address: "unix:${closed}/app.sock", pool: app, group: www-data, mode: "0660" }`, // 4
    'pools:', // 5
    '  app:', // 6
    '    command: [php-cgi]', // 7
    '    user: nosuchuser', // 8
    '    cwd: /nonexistent', // 9
    '    max_childs: 3', // 10
    '  wsgi:', // 11
    `    command: [/usr/bin/python3, ${join(REPO_ROOT, 'bin/fcgi-pm-wsgi')}, --scgi, "app:application"]`, // 12
    '    user: root', // 13
    '  big:', // 14
    '    command: [php-cgi]', // 15
    '    user: root', // 16
    '    pm: ondemand', // 17
    `    max_children: ${tooMany ?? 4}`, // 18
    '  fat:', // 19
    '    command: [php-cgi]', // 20
    '    user: root', // 21
    '    pm: static', // 22
    '    max_children: 4096', // 23
    '    expected_worker_memory: 1TiB', // 24
    '',
  ];
  const file = join(dir, 'fcgi-pm.yaml');
  writeFileSync(file, lines.join('\n'));
  const r = await runBin(['check', '-c', file]);
  assert.equal(r.code, 1, r.stdout + r.stderr);
  const expected: Array<[number, RegExp]> = [
    [3, new RegExp(`listen\\[0\\]\\.address: 127\\.0\\.0\\.1:${port} is in use \\(EADDRINUSE\\) by pid ${process.pid} `)],
    [4, /listen\[1\]\.address: group www-data cannot pass through .*fpm-closed-\S* \(mode 0700/],
    [8, /pools\.app\.user: no such user "nosuchuser"/],
    [9, /pools\.app\.cwd: \/nonexistent: no such directory \(ENOENT\)/],
    [10, /pools\.app\.max_childs: unknown key \(did you mean "max_children"\?\)/],
    [12, /pools\.wsgi\.command\[2\]: fcgi-pm-wsgi --scgi speaks SCGI but the pool's backend is fastcgi \(the default\): every request would fail 502 ERR_BACKEND_PROTOCOL; set backend: scgi, or drop --scgi/],
    ...(tooMany === undefined ? [] : [[18, new RegExp(`pools\\.big\\.max_children: ${tooMany} is above this host's pid_max \\(${pidMax}`)] as [number, RegExp]]),
    [23, /pools\.fat\.max_children: pm static starts all 4096 workers at once: at expected_worker_memory \(1TiB\) each that is 4096TiB, more than this host's memory \(MemTotal\)/],
  ];
  const problems = r.stderr.trimEnd().split('\n').filter((l) => !l.startsWith('notice: ') && !l.startsWith('fcgi-pm: '));
  for (const [line, re] of expected) {
    const at = problems.filter((p) => p.startsWith(`${file}:${line}: `));
    assert.ok(at.some((p) => re.test(p)), `line ${line}: ${re}\n${r.stderr}`);
  }
  assert.equal(problems.length, expected.length, r.stderr);
  // File order: the lines as listed.
  const order = problems.map((p) => Number(p.slice(file.length + 1).split(':')[0]));
  assert.deepEqual(order, [...order].sort((a, b) => a - b), r.stderr);
});

test('check: the addresses of a running daemon of the same config are its own, not in use', { skip: !asRoot && 'needs root' }, async (t) => {
  const dir = makeTempDir(t, 'fpm-chk2-');
  const port = await freePort();
  const file = join(dir, 'fcgi-pm.yaml');
  writeFileSync(file, [`control_socket: ${dir}/control.sock`, 'listen:', `  - { protocol: fastcgi, address: "127.0.0.1:${port}", pool: app }`, 'pools:', '  app: { backends: ["127.0.0.1:9"] }', ''].join('\n'));
  const { startDaemon } = await import('../helpers/daemon.js');
  const d = await startDaemon(t, readFileSync(file, 'utf8'), { dir });
  const r = await runBin(['check', '-c', d.configPath]);
  assert.deepEqual([r.code, r.stderr], [0, ''], r.stdout);
  await d.stop();
  // The same port held by another program is a problem.
  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen(port, '127.0.0.1', resolve));
  t.after(() => holder.close());
  const busy = await runBin(['check', '-c', d.configPath]);
  assert.equal(busy.code, 1);
  assert.match(busy.stderr, new RegExp(`:3: listen\\[0\\]\\.address: 127\\.0\\.0\\.1:${port} is in use`));
});

test('check: a Unix socket another program listens on is in use, found without connecting to it (a connection would wake an ondemand pool)', async (t) => {
  const dir = makeTempDir(t, 'fpm-chk3-');
  const sock = join(dir, 'taken.sock');
  let connections = 0;
  const holder = createServer(() => connections++);
  await new Promise<void>((resolve) => holder.listen(sock, resolve));
  t.after(() => holder.close());
  // A socket bound at a temporary name and renamed into place, as fcgi-pm binds its own.
  const renamed = join(dir, 'renamed.sock');
  const other = createServer(() => connections++);
  await new Promise<void>((resolve) => other.listen(join(dir, '.renamed.sock.4242.tmp'), resolve));
  t.after(() => other.close());
  renameSync(join(dir, '.renamed.sock.4242.tmp'), renamed);
  const file = join(dir, 'fcgi-pm.yaml');
  writeFileSync(file, ['control_socket: off', 'listen:', `  - { protocol: fastcgi, address: "unix:${sock}", pool: app }`, `  - { protocol: fastcgi, address: "unix:${renamed}", pool: app }`, `  - { protocol: fastcgi, address: "unix:${dir}/free.sock", pool: app }`, 'pools:', '  app: { backends: ["127.0.0.1:9"] }', ''].join('\n'));
  const r = await runBin(['check', '-c', file, '--allow-root']);
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(r.stderr, new RegExp(`:3: listen\\[0\\]\\.address: unix:${sock}: another program answers on this socket`));
  assert.match(r.stderr, new RegExp(`:4: listen\\[1\\]\\.address: unix:${renamed}: another program answers`));
  assert.doesNotMatch(r.stderr, /free\.sock/);
  assert.equal(connections, 0, 'check connected to the sockets it looked at');
});
