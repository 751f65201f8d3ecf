// `fcgi-pm check` reports every problem of a file in one run, each with file:line:
// schema problems beside host problems, a bad user beside a bad cwd, a missing script
// argument, and --preload / preload: true that disagree. A config it passes serves.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, cpSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildWorkerSpec } from '../../src/pool/worker-spec.js';
import { poolConfig } from '../pool/helpers.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { makeTempDir } from '../helpers/tmp.js';
import { worldReadableAdapter } from '../helpers/world-readable.js';
import { runBin } from './helpers.js';
import { freePort } from '../helpers/ports.js';

// Ports nothing holds: check tries the addresses run would bind.
const [P1, P2] = [await freePort(), await freePort()];

async function check(t: Parameters<typeof makeTempDir>[0], text: string): Promise<{ file: string; code: number | null; lines: string[]; stdout: string }> {
  const dir = makeTempDir(t, 'fpm-chk-');
  const file = join(dir, 'fcgi-pm.yaml');
  writeFileSync(file, text);
  const r = await runBin(['check', '-c', file]);
  // One line per problem, then a count.
  return { file, code: r.code, lines: r.stderr.trimEnd().split('\n').filter((l) => l.startsWith(file)), stdout: r.stdout };
}

test('check: schema problems, a bad user and a bad cwd, and a missing script argument come out together, each at its line', async (t) => {
  const text = [
    'control_socket: off', //                                                   1
    'listen:', //                                                               2
    `  - { protocol: fastcgi, address: 127.0.0.1:${P1}, pool: php }`, //        3
    `  - { protocol: http, address: 127.0.0.1:${P2}, pool: py, document_root: /nonexistent-root }`, // 4
    'pools:', //                                                                5
    '  php:', //                                                                6
    '    command: [php-cgi]', //                                                7
    '    user: nosuchuser', //                                                  8
    '    cwd: /nonexistent-cwd', //                                             9
    '  py:', //                                                                 10
    '    command: [/usr/bin/python3, ../../no-such-bin/fcgi-pm-wsgi, mysite.wsgi:application]', // 11
    // (../../bin would be /bin from a checkout two levels under /, where the package test installs fcgi-pm-wsgi while this runs)
    '    user: www-data', //                                                    12
    '  typo:', //                                                               13
    '    command: [php-cgi]', //                                                14
    '    max_childs: 4', //                                                     15
    '',
  ].join('\n');
  const r = await check(t, text);
  assert.equal(r.code, 1, r.lines.join('\n'));
  assert.equal(r.stdout, '');
  const at = (line: number, re: RegExp): void => assert.ok(r.lines.some((l) => l.startsWith(`${r.file}:${line}: `) && re.test(l)), `line ${line} ${re}:\n${r.lines.join('\n')}`);
  at(4, /listen\[1\]\.document_root: \/nonexistent-root: no such directory/);
  at(8, /pools\.php\.user: no such user "nosuchuser"/);
  at(9, /pools\.php\.cwd: \/nonexistent-cwd: no such directory/);
  at(11, /pools\.py\.command\[1\]: \.\.\/\.\.\/no-such-bin\/fcgi-pm-wsgi \(relative to fcgi-pm's working directory .*\): no such file \(ENOENT\)/);
  at(15, /pools\.typo\.max_childs: unknown key/);
  // The typo's pool is checked for the rest too: as root, it has no user.
  if (process.geteuid?.() === 0) at(13, /pools\.typo: workers would run as root/);
  assert.equal(r.lines.length, process.geteuid?.() === 0 ? 6 : 5, r.lines.join('\n'));
});

test('check: --preload without preload: true, and preload: true on a program that is no fork server, are errors at their lines', async (t) => {
  const text = [
    'control_socket: off',
    'listen:',
    `  - { protocol: fastcgi, address: 127.0.0.1:${P1}, pool: a }`,
    `  - { protocol: fastcgi, address: 127.0.0.1:${P2}, pool: b }`,
    'pools:',
    '  a:',
    `    command: [/usr/bin/python3, ${REPO_ROOT}/bin/fcgi-pm-wsgi, --preload, app:application]`, // 7
    '    user: www-data',
    '  b:',
    '    command: [php-cgi]',
    '    preload: true', // 11
    '    user: www-data',
    '',
  ].join('\n');
  const r = await check(t, text);
  assert.equal(r.code, 1);
  assert.deepEqual(r.lines, [
    `${r.file}:7: pools.a.command[2]: --preload makes the program a fork server for fcgi-pm, which only a pool with preload: true uses; add preload: true or drop --preload`,
    `${r.file}:11: pools.b.preload: needs a fork server as command: bin/fcgi-pm-wsgi (fcgi-pm gives it --preload), or a program that speaks fcgi-pm's fork-server protocol given --preload; got php-cgi`,
  ]);
});

test('preload: true with fcgi-pm-wsgi: check passes and the daemon gives the adapter --preload itself', async (t) => {
  const dir = makeTempDir(t, 'fpm-chk-');
  const adapter = worldReadableAdapter(t); // www-data must reach it (a checkout under /root does not)
  const text = [
    'control_socket: off',
    'listen:',
    `  - { protocol: fastcgi, address: 127.0.0.1:${P1}, pool: py }`,
    'pools:',
    '  py:',
    `    command: [/usr/bin/python3, ${adapter}, --fastcgi, app:application]`,
    '    preload: true',
    '    user: www-data',
    '',
  ].join('\n');
  const file = join(dir, 'fcgi-pm.yaml');
  writeFileSync(file, text);
  const r = await runBin(['check', '-c', file]);
  assert.equal(r.code, 0, r.stderr);
  const spec = buildWorkerSpec(poolConfig({ command: ['/usr/bin/python3', adapter, '--fastcgi', 'app:application'], preload: true }), '/tmp');
  assert.deepEqual(spec.command, ['/usr/bin/python3', adapter, '--preload', '--fastcgi', 'app:application']);
  const module = buildWorkerSpec(poolConfig({ command: ['/usr/bin/python3', '-m', 'fcgi_pm_wsgi', 'app:application'], preload: true }), '/tmp');
  assert.deepEqual(module.command, ['/usr/bin/python3', '-m', 'fcgi_pm_wsgi', '--preload', 'app:application']);
  const given = buildWorkerSpec(poolConfig({ command: ['/usr/bin/python3', adapter, '--preload', 'app:application'], preload: true }), '/tmp');
  assert.deepEqual(given.command, ['/usr/bin/python3', adapter, '--preload', 'app:application'], 'not twice');
});

test('check: the Django example copied elsewhere names its missing adapter; in place it passes', async (t) => {
  const dir = makeTempDir(t, 'fpm-chk-');
  chmodSync(dir, 0o755); // the workers' user (www-data) must reach the copy's cwd
  const copy = join(dir, 'a', 'b', 'django');
  mkdirSync(copy, { recursive: true });
  cpSync(join(REPO_ROOT, 'examples', 'django'), copy, { recursive: true });
  const r = await runBin(['check', '-c', join(copy, 'fcgi-pm.yaml')]);
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(r.stderr, /fcgi-pm\.yaml:\d+: pools\.django\.command\[1\]: \.\.\/\.\.\/bin\/fcgi-pm-wsgi \(relative to cwd .*\): no such file \(ENOENT\)/);
  const inPlace = await runBin(['check', '-c', join(REPO_ROOT, 'examples', 'django', 'fcgi-pm.yaml')]);
  assert.doesNotMatch(inPlace.stderr, /fcgi-pm-wsgi.*ENOENT/, inPlace.stderr);
});
