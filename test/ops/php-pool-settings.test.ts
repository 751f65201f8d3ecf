/**
 * What a PHP-FPM operator sets per pool, on real php-cgi workers: php_admin settings a
 * script cannot change (ini_set, .user.ini) beside php_value ones it may; the slow log
 * with the PHP call stack read from the worker; rlimit_files, rlimit_core and
 * process_priority on the worker process; and a worker that speaks another protocol than
 * the pool's backend is logged with ERR_BACKEND_PROTOCOL, the backend and what it said.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startDaemon } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { poolStatusOf } from '../helpers/control-status.js';
import { freePort } from '../helpers/ports.js';
import { makeTempDir } from '../helpers/tmp.js';
import { runBin } from '../cli/helpers.js';

const asRoot = process.geteuid?.() === 0;

const INI = `<?php
$r = [];
foreach (['allow_url_fopen' => '1', 'upload_max_filesize' => '9M', 'open_basedir' => '/', 'memory_limit' => '200M'] as $k => $v) {
    $before = ini_get($k);
    $r[$k] = [$before, ini_set($k, $v) === false ? 'refused' : 'changed', ini_get($k)];
}
echo json_encode($r);
`;

const SLOW = `<?php
function inner() {
    sleep(3);
}
function outer() {
    inner();
}
outer();
echo "done\\n";
`;

// Answers like an SCGI worker (a CGI head, no FastCGI records) whatever it is sent.
const SCGI_LIKE = `const net = require('node:net');
net.createServer((c) => c.once('data', () => c.end('Status: 200 OK\\r\\nContent-Type: text/plain\\r\\n\\r\\nhello from SCGI\\n'))).listen({ fd: 0 });
`;

test('php_admin, php_value, slow log backtrace, rlimits and priority on php-cgi workers; a protocol mismatch logged', { skip: !asRoot && 'needs root (workers as www-data)', timeout: 90_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-phpset-');
  chmodSync(dir, 0o755);
  const docroot = join(dir, 'www');
  mkdirSync(docroot, { mode: 0o755 });
  writeFileSync(join(docroot, 'ini.php'), INI);
  writeFileSync(join(docroot, 'slow.php'), SLOW);
  // A .user.ini that would raise the PERDIR setting php_admin holds.
  writeFileSync(join(docroot, '.user.ini'), 'upload_max_filesize = 9M\n');
  writeFileSync(join(dir, 'scgi-like.cjs'), SCGI_LIKE);
  const [php, bad] = [await freePort(), await freePort()];
  const control = join(dir, 'control.sock');
  const d = await startDaemon(t, {
    control_socket: control,
    listen: [
      { protocol: 'http', address: `127.0.0.1:${php}`, pool: 'php', document_root: docroot },
      { protocol: 'http', address: `127.0.0.1:${bad}`, pool: 'bad', document_root: docroot },
    ],
    pools: {
      php: {
        command: ['php-cgi'],
        user: 'www-data',
        pm: 'static',
        max_children: 1,
        slow_request: '500ms',
        php_admin: { allow_url_fopen: '0', upload_max_filesize: '3M', open_basedir: `${docroot}:/tmp` },
        php_value: { memory_limit: '100M' },
        rlimit_files: 1234,
        rlimit_core: 0,
        process_priority: 7,
      },
      bad: { command: [process.execPath, join(dir, 'scgi-like.cjs')], user: 'www-data', limit_extensions: [] },
    },
  }, { dir });

  const ini = await httpRequest(`http://127.0.0.1:${php}/ini.php`, { timeout: 15_000 });
  assert.equal(ini.status, 200, ini.text);
  assert.deepEqual(JSON.parse(ini.text), {
    allow_url_fopen: ['0', 'refused', '0'],
    upload_max_filesize: ['3M', 'refused', '3M'],
    open_basedir: [`${docroot}:/tmp`, 'refused', `${docroot}:/tmp`],
    memory_limit: ['100M', 'changed', '200M'],
  });

  // The worker process: limits and nice value as set.
  const worker = (await poolStatusOf(control, 'php')).workers[0]!;
  const limits = readFileSync(`/proc/${worker.pid}/limits`, 'utf8');
  assert.match(limits, /^Max open files\s+1234\s+1234\s+files/m);
  assert.match(limits, /^Max core file size\s+0\s+0\s+bytes/m);
  const stat = readFileSync(`/proc/${worker.pid}/stat`, 'utf8');
  assert.equal(Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]), 7, 'nice');

  // The slow log shows where the script sleeps, as PHP-FPM's slowlog does.
  const since = d.mark();
  const slow = httpRequest(`http://127.0.0.1:${php}/slow.php`, { timeout: 15_000 });
  const line = await d.waitForLog((l) => l.code === 'ERR_SLOW_REQUEST', { since, timeout: 10_000, what: 'the slow request line' });
  const script = join(docroot, 'slow.php');
  assert.deepEqual(line.backtrace, [`sleep() ${script}:3`, `inner() ${script}:6`, `outer() ${script}:8`], JSON.stringify(line));
  assert.match(String(line.msg), /: sleep\(\) .* ← inner\(\) .* ← outer\(\) /);
  assert.equal((await slow).status, 200);

  // A worker that does not speak FastCGI: 502, and the log says why with what it answered.
  const mark = d.mark();
  const r = await httpRequest(`http://127.0.0.1:${bad}/x`, { timeout: 15_000 });
  assert.equal(r.status, 502, r.text);
  const proto = await d.waitForLog((l) => l.code === 'ERR_BACKEND_PROTOCOL', { since: mark, what: 'the protocol line' });
  assert.equal(proto.backend, 'fastcgi');
  assert.match(String(proto.msg), /it answered "Status: 200 OK\\r\\nContent-Type/);
});

test('check: php_admin refuses what php-cgi cannot lock, and names a setting it does not have', async (t) => {
  const dir = makeTempDir(t, 'fpm-phpchk-');
  const file = join(dir, 'fcgi-pm.yaml');
  writeFileSync(file, [
    'control_socket: off',
    'listen:',
    `  - { protocol: fastcgi, address: "unix:${dir}/s.sock", pool: php }`,
    'pools:',
    '  php:',
    '    command: [php-cgi]',
    '    user: root',
    '    php_admin:',
    '      memory_limit: 64M',
    '      alow_url_fopen: "0"',
    '      disable_functions: exec',
    '',
  ].join('\n'));
  const r = await runBin(['check', '-c', file]);
  assert.equal(r.code, 1, r.stderr);
  const problems = r.stderr.trimEnd().split('\n').filter((l) => l.startsWith(file));
  assert.equal(problems.length, 2, r.stderr);
  assert.match(problems[0]!, /:9: pools\.php\.php_admin\.memory_limit: a script may change memory_limit with ini_set \(PHP_INI_ALL\).*max_memory_hard/);
  assert.match(problems[1]!, /:10: pools\.php\.php_admin\.alow_url_fopen: \S+ has no setting named alow_url_fopen/);
});

