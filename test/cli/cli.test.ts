import { test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { TestContext } from 'node:test';
import { BIN, runBin } from './helpers.js';
import { freePort } from '../helpers/ports.js';

// Ports nothing holds: check tries the addresses run would bind.
const [P1, P2] = [await freePort(), await freePort()];

const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };

function tempDir(t: TestContext): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'fcgi-pm-cli-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('--version prints the package version', async () => {
  const r = await runBin(['--version']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout.trim(), pkg.version);
});

test('--help lists run and check and shows the quick form and a config example', async () => {
  const r = await runBin(['--help']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^Usage: fcgi-pm/m);
  assert.match(r.stdout, /^\s+run\b/m);
  assert.match(r.stdout, /^\s+check\b/m);
  assert.match(r.stdout, /--log-level/);
  assert.match(r.stdout, /fcgi-pm run --fastcgi 127\.0\.0\.1:9000 --command php-cgi/);
  assert.match(r.stdout, /fcgi-pm check -c \S+\.yaml/);
  assert.match(r.stdout, /pools:\n\s+php:\n\s+command: \[php-cgi\]/);

  const run = await runBin(['run', '--help']);
  assert.equal(run.code, 0);
  for (const opt of ['--config', '--fastcgi', '--scgi', '--http', '--document-root', '--backend', '--command']) assert.ok(run.stdout.includes(opt), `run --help mentions ${opt}`);
});

test('check: a good file → exit 0 and a one-line summary', async (t) => {
  const file = path.join(tempDir(t), 'fcgi-pm.yaml');
  writeFileSync(file, [
    'listen:',
    `  - { protocol: fastcgi, address: 127.0.0.1:${P1}, pool: php }`,
    `  - { protocol: http, address: 127.0.0.1:${P2}, pool: php }`,
    'pools:',
    '  php: { command: [php-cgi], max_children: 4, user: www-data }',
    '',
  ].join('\n'));
  const r = await runBin(['check', '-c', file]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, 'config OK: 2 listeners, 1 pool\n');
  assert.equal(r.stderr, '');
});

test('check: a bad file → exit 1 and every problem on stderr, one per line with file:line', async (t) => {
  const file = path.join(tempDir(t), 'bad.yaml');
  writeFileSync(file, [
    'listen:',
    `  - { protocol: fastcgi, address: 127.0.0.1:${P1}, pool: php }`,
    'pools:',
    '  php:',
    '    command: [php-cgi]',
    '    max_children: ten',
    '    idle_timout: 10s',
    '',
  ].join('\n'));
  const r = await runBin(['check', '-c', file]);
  assert.equal(r.code, 1);
  assert.equal(r.stdout, '');
  const lines = r.stderr.trimEnd().split('\n');
  // As root the pool's other keys are checked too: it has no user.
  const root = process.geteuid?.() === 0 ? [`${file}:4: pools.php: workers would run as root; add user: www-data (or user: root to allow it, or run with --allow-root)`] : [];
  assert.deepEqual(lines, [
    ...root,
    `${file}:6: pools.php.max_children: must be a whole number ≥ 1, got "ten"`,
    `${file}:7: pools.php.idle_timout: unknown key (did you mean "idle_timeout"?)`,
    `fcgi-pm: ${2 + root.length} problems in the configuration`,
  ]);
});

test('check: a missing file or missing -c fails with a message', async (t) => {
  const missing = path.join(tempDir(t), 'nope.yaml');
  const r = await runBin(['check', '-c', missing]);
  assert.equal(r.code, 1);
  assert.equal(r.stderr, `${missing}: cannot read config: no such file\n`);

  const noArg = await runBin(['check']);
  assert.equal(noArg.code, 2);
  assert.match(noArg.stderr, /--config/);
});

test('run: usage mistakes exit 2 and say which option is wrong', async () => {
  const cases: Array<[string[], RegExp]> = [
    [['run'], /give -c FILE, or a listener/],
    [['run', '--fastcgi', '127.0.0.1:0'], /give --backend fastcgi:\/\/ADDR .* or --command PROGRAM/],
    [['run', '--fastcgi', '127.0.0.1', '--command', 'php-cgi'], /--fastcgi 127\.0\.0\.1: address needs a port/],
    [['run', '--fastcgi', '127.0.0.1:0', '--backend', 'http://127.0.0.1:80'], /--backend http:\/\/127\.0\.0\.1:80: the scheme must be fastcgi:\/\/ or scgi:\/\//],
    [['run', '--fastcgi', '127.0.0.1:0', '--backend', '127.0.0.1:9001', '--command', 'php-cgi'], /either --backend .* or --command/],
    [['run', '-c', 'x.yaml', '--fastcgi', '127.0.0.1:0'], /either -c FILE or the quick-form options/],
    [['run', '--fastcgi', '127.0.0.1:0', '--command', 'php-cgi "unterminated'], /unterminated " quote/],
  ];
  for (const [args, re] of cases) {
    const r = await runBin(args);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, re, args.join(' '));
  }
});

test('run: quick-form values are validated like a config file', async () => {
  const r = await runBin(['run', '--fastcgi', '127.0.0.1:0', '--command', 'php-cgi', '--max-children', 'lots']);
  assert.equal(r.code, 1);
  assert.equal(r.stderr, '<command line>: pools.default.max_children: must be a whole number ≥ 1, got "lots"\n');
});

test('run -c with a bad file reports it like check and starts nothing', async (t) => {
  const file = path.join(tempDir(t), 'bad.yaml');
  writeFileSync(file, 'listen: []\npools: {}\n');
  const r = await runBin(['run', '-c', file]);
  assert.equal(r.code, 1);
  assert.equal(r.stdout, '', 'no log lines: nothing was started');
  assert.deepEqual(r.stderr.trimEnd().split('\n'), [
    `${file}:1: listen: must list at least one listener`,
    `${file}:2: pools: must define at least one pool`,
    'fcgi-pm: 2 problems in the configuration',
  ]);
});

test('option-parser mistakes (bad --log-level, unknown command) exit 2', async () => {
  const r = await runBin(['--log-level', 'loud', 'check', '-c', 'x']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /loud/);
  const unknown = await runBin(['frobnicate']);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /unknown command 'frobnicate'/);
});

test('bin/fcgi-pm says what to do when dist/ is missing', async (t) => {
  const dir = tempDir(t);
  mkdirSync(path.join(dir, 'bin'));
  const bin = path.join(dir, 'bin', 'fcgi-pm');
  copyFileSync(BIN, bin);
  // The copy needs package.json's "type": "module" to be read as ESM, like the real one.
  writeFileSync(path.join(dir, 'package.json'), '{"type":"module"}');
  const r = await runBin(['--version'], { bin });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /not built yet/);
  assert.match(r.stderr, /npm install.*npm run build/);
});

test('run, quick form as root: --command without --user is refused with the option to add; --user needs --command', { skip: process.geteuid?.() !== 0 && 'needs root' }, async () => {
  const r = await runBin(['run', '--fastcgi', '127.0.0.1:0', '--command', 'php-cgi']);
  assert.equal(r.code, 1);
  assert.equal(r.stderr, '<command line>: pools.default: workers would run as root; add --user www-data (or --user root to allow it, or run with --allow-root)\n');
  const usage = await runBin(['run', '--fastcgi', '127.0.0.1:0', '--backend', 'fastcgi://127.0.0.1:9', '--user', 'www-data']);
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /--user and --group only apply with --command/);
});
