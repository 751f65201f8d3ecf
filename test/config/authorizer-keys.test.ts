// authorizer, authorizer_cache, authorizer_cache_key and script as written in a file: the
// cross-references are checked with the line they are on, like a listener's pool.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfigText } from '../../src/config/load.js';
import { poolConfigFromObject } from '../../src/config/schema.js';
import { keyValue, parseCacheKeyPart } from '../../src/config/authorizer-key.js';
import { problemsOf } from './helpers.js';

const config = (pools: string): string => `listen:\n  - { protocol: fastcgi, address: "127.0.0.1:9000", pool: app }\npools:\n${pools}`;
const load = (pools: string): ReturnType<typeof parseConfigText> => parseConfigText(config(pools), 'fcgi-pm.yaml', '/etc/fcgi-pm.yaml');

test('authorizer names another pool; its cache is off by default, keyed by the credentials and the URI', () => {
  const c = load('  app: { command: [php-cgi], authorizer: auth }\n  auth: { command: [php-cgi], script: /srv/auth.php }\n');
  const app = c.pools.get('app')!;
  assert.equal(app.authorizer, 'auth');
  assert.equal(app.authorizerCache, 0);
  assert.deepEqual(app.authorizerCacheKey, ['HTTP_AUTHORIZATION', 'HTTP_COOKIE', 'REQUEST_URI']);
  assert.equal(c.pools.get('auth')!.script, '/srv/auth.php');
});

test('authorizer: a missing pool, the pool itself and a chain are refused at their line', () => {
  const missing = problemsOf(() => load('  app: { command: [php-cgi], authorizer: auht }\n  auth: { command: [php-cgi], script: /srv/auth.php }\n'));
  assert.deepEqual(missing, ['fcgi-pm.yaml:4: pools.app.authorizer: no pool named "auht" (did you mean "auth"?)']);
  const self = problemsOf(() => load('  app: { command: [php-cgi], authorizer: app }\n'));
  assert.equal(self.length, 1);
  assert.match(self[0]!, /^fcgi-pm\.yaml:4: pools\.app\.authorizer: names this pool itself/);
  const chain = problemsOf(() => load('  app: { command: [php-cgi], authorizer: auth }\n  auth:\n    command: [php-cgi]\n    authorizer: other\n  other: { command: [php-cgi], script: /srv/other.php }\n'));
  assert.deepEqual(chain, ['fcgi-pm.yaml:4: pools.app.authorizer: pool "auth" has an authorizer of its own ("other"); an authorizer pool may not have one (no chains)']);
  // A php-cgi authorizer pool must name its file: the requests it gets carry no SCRIPT_FILENAME.
  const noScript = problemsOf(() => load('  app: { command: [php-cgi], authorizer: auth }\n  auth: { command: [/usr/bin/php-cgi8.2] }\n'));
  assert.equal(noScript.length, 1);
  assert.match(noScript[0]!, /^fcgi-pm\.yaml:4: pools\.app\.authorizer: pool "auth" runs php-cgi, .*give "auth" a script/);
  assert.equal(load('  app: { command: [php-cgi], authorizer: auth }\n  auth: { command: [python3, auth.py] }\n').pools.get('app')!.authorizer, 'auth');
});

test('authorizer_cache needs an authorizer and a key; key entries are NAME or NAME/N', () => {
  const php = { command: ['php-cgi'] };
  assert.match(problemsOf(() => poolConfigFromObject('p', { ...php, authorizer_cache: '10s' }))[0]!, /authorizer_cache: only applies with "authorizer"/);
  assert.match(problemsOf(() => poolConfigFromObject('p', { ...php, authorizer: 'a', authorizer_cache: '10s', authorizer_cache_key: [] }))[0]!, /authorizer_cache_key: a cache needs a key/);
  const bad = problemsOf(() => poolConfigFromObject('p', { ...php, authorizer: 'a', authorizer_cache_key: ['HTTP_COOKIE', 'REQUEST_URI/0', 'X-Y'] }));
  assert.equal(bad.length, 2);
  assert.match(bad[0]!, /authorizer_cache_key\[1\]: must be a variable name/);
  assert.match(bad[1]!, /authorizer_cache_key\[2\]: must be a variable name/);
  const ok = poolConfigFromObject('p', { ...php, authorizer: 'a', authorizer_cache: '30s', authorizer_cache_key: ['HTTP_AUTHORIZATION', 'REQUEST_URI/2'] });
  assert.equal(ok.authorizerCache, 30_000);
  // Off with an empty key is fine: nothing is kept.
  assert.equal(poolConfigFromObject('p', { ...php, authorizer: 'a', authorizer_cache_key: [] }).authorizerCache, 0);
});

test('NAME/N keeps the first N path segments, without the query', () => {
  assert.deepEqual(parseCacheKeyPart('REQUEST_URI/2'), { name: 'REQUEST_URI', segments: 2 });
  assert.deepEqual(parseCacheKeyPart('HTTP_COOKIE'), { name: 'HTTP_COOKIE', segments: undefined });
  const cases: Array<[string, number | undefined, string]> = [
    ['/shop/admin/orders?page=3', 2, '/shop/admin'],
    ['/shop/admin/orders?page=3', 1, '/shop'],
    ['/shop/admin/orders?page=3', undefined, '/shop/admin/orders?page=3'],
    ['/shop?a/b/c', 2, '/shop'],
    ['/shop/', 1, '/shop'],
    ['/shop', 3, '/shop'],
    ['/a/b#x/y', 5, '/a/b'],
    ['', 1, ''],
  ];
  for (const [value, n, want] of cases) assert.equal(keyValue(value, n), want, `${value} /${n}`);
});
