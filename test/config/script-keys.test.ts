// limit_extensions and script_roots as written in a file: PHP-FPM's spelling, lists, off,
// and the default that depends on the pool's command.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { poolConfigFromObject } from '../../src/config/schema.js';
import { problemsOf } from './helpers.js';

const php = { command: ['php-cgi'] };

test('limit_extensions defaults to .php .phar for php-cgi* commands only', () => {
  assert.deepEqual(poolConfigFromObject('p', php).limitExtensions, ['.php', '.phar']);
  assert.deepEqual(poolConfigFromObject('p', { command: ['/usr/bin/php-cgi8.2', '-d', 'x=1'] }).limitExtensions, ['.php', '.phar']);
  assert.equal(poolConfigFromObject('p', { command: ['python3', 'app.py'] }).limitExtensions, undefined);
  assert.equal(poolConfigFromObject('p', { backends: ['127.0.0.1:9001'] }).limitExtensions, undefined);
});

test('limit_extensions: a list, a space-separated string, off, false or []', () => {
  const cases: Array<[unknown, string[]]> = [
    [['.php', '.php8'], ['.php', '.php8']],
    ['.php .phtml', ['.php', '.phtml']],
    ['off', []],
    ['OFF', []],
    [false, []],
    [[], []],
  ];
  for (const [v, want] of cases) assert.deepEqual(poolConfigFromObject('p', { ...php, limit_extensions: v }).limitExtensions, want, JSON.stringify(v));
  assert.deepEqual(poolConfigFromObject('p', { backends: ['127.0.0.1:9001'], limit_extensions: '.php' }).limitExtensions, ['.php']);
});

test('limit_extensions: each entry starts with "." and has no "/" or spaces', () => {
  for (const v of [['php'], ['.'], ['./x'], 'php', [1], { a: 1 }]) {
    const problems = problemsOf(() => poolConfigFromObject('p', { ...php, limit_extensions: v }));
    assert.equal(problems.length, 1, JSON.stringify(v));
    assert.match(problems[0]!, /limit_extensions: /);
  }
});

test('script_roots: one path or a list, resolved to absolute paths', () => {
  assert.deepEqual(poolConfigFromObject('p', { ...php, script_roots: '/srv/www' }).scriptRoots, ['/srv/www']);
  const roots = poolConfigFromObject('p', { ...php, script_roots: ['/srv/www', 'rel'] }).scriptRoots!;
  assert.equal(roots[0], '/srv/www');
  assert.ok(roots[1]!.startsWith('/') && roots[1]!.endsWith('/rel'));
  assert.match(problemsOf(() => poolConfigFromObject('p', { ...php, script_roots: [''] }))[0]!, /script_roots\[0\]: /);
});
