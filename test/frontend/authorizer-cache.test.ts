// The authorizer's grant cache: keys from chosen variables, time to live on a fake clock,
// least recently used out first.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AuthorizerCache } from '../../src/frontend/authorizer-cache.js';
import { CgiParams } from '../../src/protocol/params.js';
import { FcgiParams, encodeNameValues } from '../../src/protocol/fastcgi-params.js';

const req = (o: Record<string, string>): CgiParams => CgiParams.fromObject(o);

test('a grant is found under the same key values until its time is up', () => {
  const c = new AuthorizerCache(1000, ['HTTP_AUTHORIZATION', 'REQUEST_URI/1']);
  const k = c.keyOf(req({ HTTP_AUTHORIZATION: 'Bearer good', REQUEST_URI: '/admin/a?x=1', REMOTE_ADDR: '10.0.0.1' }));
  c.put(k, ['REMOTE_USER', 'ann'], 5000);
  // Variables outside the key and path segments past the first do not matter.
  assert.equal(c.keyOf(req({ HTTP_AUTHORIZATION: 'Bearer good', REQUEST_URI: '/admin/b', REMOTE_ADDR: '10.0.0.2' })), k);
  assert.deepEqual(c.get(k, 5999), ['REMOTE_USER', 'ann']);
  assert.equal(c.get(k, 6000), undefined);
  assert.equal(c.size, 0, 'an expired grant is dropped when found');
});

test('keys differ when a key value differs, is missing, or is empty', () => {
  const c = new AuthorizerCache(1000, ['HTTP_AUTHORIZATION', 'HTTP_COOKIE']);
  const keys = new Set([
    c.keyOf(req({ HTTP_AUTHORIZATION: 'Bearer good' })),
    c.keyOf(req({ HTTP_AUTHORIZATION: 'Bearer bad' })),
    c.keyOf(req({ HTTP_AUTHORIZATION: '' })),
    c.keyOf(req({})),
    c.keyOf(req({ HTTP_COOKIE: 'Bearer good' })),
    // Values that would run together without length prefixes.
    c.keyOf(req({ HTTP_AUTHORIZATION: 'ab', HTTP_COOKIE: 'c' })),
    c.keyOf(req({ HTTP_AUTHORIZATION: 'a', HTTP_COOKIE: 'bc' })),
    c.keyOf(req({ HTTP_AUTHORIZATION: '-;', HTTP_COOKIE: '' })),
  ]);
  assert.equal(keys.size, 8);
});

test('FastCGI params give the same key as decoded ones, and stay undecoded', () => {
  const c = new AuthorizerCache(1000, ['HTTP_AUTHORIZATION']);
  const plain = req({ HTTP_AUTHORIZATION: 'Basic YW5uOnB3', REQUEST_URI: '/' });
  const fcgi = new FcgiParams(encodeNameValues(plain), plain.size);
  assert.equal(c.keyOf(fcgi), c.keyOf(plain));
  assert.ok(fcgi.wire !== undefined, 'reading the key did not decode the PARAMS bytes');
});

test('at most maxEntries grants; the least recently used goes first', () => {
  const c = new AuthorizerCache(60_000, ['HTTP_COOKIE'], 3);
  const key = (n: string): string => c.keyOf(req({ HTTP_COOKIE: n }));
  c.put(key('a'), [], 0);
  c.put(key('b'), [], 0);
  c.put(key('c'), [], 0);
  assert.deepEqual(c.get(key('a'), 1), []); // a is now the most recent
  c.put(key('d'), [], 2);
  assert.equal(c.size, 3);
  assert.equal(c.get(key('b'), 3), undefined, 'b was the least recently used');
  for (const n of ['a', 'c', 'd']) assert.ok(c.get(key(n), 3) !== undefined, n);
  // Putting a key again replaces its grant and does not grow the cache.
  c.put(key('a'), ['REMOTE_USER', 'x'], 4);
  assert.equal(c.size, 3);
  assert.deepEqual(c.get(key('a'), 5), ['REMOTE_USER', 'x']);
});

test('a cache without a key is refused', () => {
  assert.throws(() => new AuthorizerCache(1000, []), /needs a key/);
});
