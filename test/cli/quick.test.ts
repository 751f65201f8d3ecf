import { test } from 'node:test';
import assert from 'node:assert/strict';
import { configFromObject } from '../../src/config/schema.js';
import { parseBackendUrl, quickConfigObject, splitCommandLine, UsageError, type QuickOptions } from '../../src/cli/quick.js';

const none: QuickOptions = { fastcgi: [], scgi: [], http: [], backend: [] };

test('splitCommandLine splits like a shell splits words, without running one', () => {
  const table: Array<[string, string[]]> = [
    ['php-cgi', ['php-cgi']],
    ['  php-cgi   -d  x=1 ', ['php-cgi', '-d', 'x=1']],
    [`php-cgi -d "error_log=/var/log/php errors.log"`, ['php-cgi', '-d', 'error_log=/var/log/php errors.log']],
    [`python3 -c 'print("hi")'`, ['python3', '-c', 'print("hi")']],
    [`a\\ b c`, ['a b', 'c']],
    [`x "" y`, ['x', '', 'y']],
    [`say "a \\"quoted\\" word"`, ['say', 'a "quoted" word']],
    [`echo $HOME *`, ['echo', '$HOME', '*']],
  ];
  for (const [line, argv] of table) assert.deepEqual(splitCommandLine(line), argv, line);
  assert.throws(() => splitCommandLine(`php-cgi 'open`), UsageError);
});

test('parseBackendUrl: scheme picks the protocol; a bare address is FastCGI', () => {
  assert.deepEqual(parseBackendUrl('fastcgi://127.0.0.1:9001'), { protocol: 'fastcgi', address: '127.0.0.1:9001' });
  assert.deepEqual(parseBackendUrl('scgi://unix:/run/app.sock'), { protocol: 'scgi', address: 'unix:/run/app.sock' });
  assert.deepEqual(parseBackendUrl('FastCGI:///run/php.sock'), { protocol: 'fastcgi', address: 'unix:/run/php.sock' });
  assert.deepEqual(parseBackendUrl('[::1]:9000'), { protocol: 'fastcgi', address: '[::1]:9000' });
  assert.throws(() => parseBackendUrl('http://127.0.0.1:80'), /scheme must be fastcgi/);
  assert.throws(() => parseBackendUrl('scgi://nowhere'), /needs a port/);
});

test('the quick form becomes one pool named "default" behind every listener', () => {
  const obj = quickConfigObject(
    { ...none, fastcgi: ['127.0.0.1:9000'], http: ['127.0.0.1:8080'], documentRoot: '/srv/www', command: 'php-cgi -d display_errors=1', pm: 'static', maxChildren: '3', accessLog: false },
    'debug',
  );
  const cfg = configFromObject(obj, '<command line>', { baseDir: '/' });
  assert.deepEqual(cfg.listen.map((l) => [l.protocol, l.address.text, l.pool, l.documentRoot]), [
    ['fastcgi', '127.0.0.1:9000', 'default', undefined],
    ['http', '127.0.0.1:8080', 'default', '/srv/www'],
  ]);
  const pool = cfg.pools.get('default')!;
  assert.deepEqual(pool.command, ['php-cgi', '-d', 'display_errors=1']);
  assert.equal(pool.pm, 'static');
  assert.equal(pool.maxChildren, 3);
  assert.equal(pool.startChildren, 3);
  assert.equal(pool.env.PHP_FCGI_CHILDREN, '0');
  assert.deepEqual(cfg.log, { level: 'debug', format: 'auto', access: false, file: undefined, accessFile: undefined, accessFormat: 'json' });

  const ext = configFromObject(quickConfigObject({ ...none, scgi: ['unix:/tmp/s.sock'], backend: ['scgi://127.0.0.1:4000', 'scgi://127.0.0.1:4001'] }, undefined), '<command line>');
  assert.equal(ext.pools.get('default')!.backend, 'scgi');
  assert.deepEqual(ext.pools.get('default')!.backends.map((b) => b.text), ['127.0.0.1:4000', '127.0.0.1:4001']);
  assert.deepEqual(ext.log, { level: 'info', format: 'auto', access: true, file: undefined, accessFile: undefined, accessFormat: 'json' });
});

test('quick-form mistakes are UsageErrors naming the option', () => {
  const cases: Array<[QuickOptions, RegExp]> = [
    [{ ...none, backend: ['127.0.0.1:1'] }, /at least one of --fastcgi/],
    [{ ...none, fastcgi: [':9000'] }, /--backend .* or --command/],
    [{ ...none, fastcgi: [':9000'], backend: ['fastcgi://127.0.0.1:1', 'scgi://127.0.0.1:2'] }, /same protocol/],
    [{ ...none, fastcgi: [':9000'], backend: ['127.0.0.1:1'], maxChildren: '3' }, /only apply with --command/],
    [{ ...none, fastcgi: [':9000'], documentRoot: '/srv', command: 'php-cgi' }, /only apply with --http/],
    [{ ...none, scgi: ['nowhere'], command: 'php-cgi' }, /^--scgi nowhere:/],
  ];
  for (const [o, re] of cases) assert.throws(() => quickConfigObject(o, undefined), (err: unknown) => err instanceof UsageError && re.test(err.message));
});
