// Where php-cgi pools' opcache file caches go and when the pool's own settings win.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { opcacheRoot } from '../../src/config/opcache-path.js';
import { setsOwnOpcache, sweepCacheRoots, withFileCache } from '../../src/worker/php-cache.js';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeTempDir } from '../helpers/tmp.js';

test('opcacheRoot: configured wins; as root one directory per config file; else under the private runtime dir', () => {
  assert.equal(opcacheRoot({ opcacheDir: '/srv/cache', source: '/etc/a.yaml' }, 0), '/srv/cache');
  assert.equal(opcacheRoot({ opcacheDir: false, source: '/etc/a.yaml' }, 0), false);
  const a = opcacheRoot({ source: '/etc/fcgi-pm/a.yaml' }, 0);
  const b = opcacheRoot({ source: '/etc/fcgi-pm/b.yaml' }, 0);
  assert.match(String(a), /^\/var\/cache\/fcgi-pm\/a-[0-9a-f]{10}$/);
  assert.notEqual(a, b);
  assert.equal(opcacheRoot({ source: '/etc/fcgi-pm/a.yaml' }, 1000), undefined);
});

test("setsOwnOpcache: -d opcache.file_cache, file_cache_only or enable, either spelling; other -d and arguments are not", () => {
  assert.equal(setsOwnOpcache(['php-cgi', '-d', 'opcache.file_cache=/x']), true);
  assert.equal(setsOwnOpcache(['php-cgi', '-dopcache.enable=0']), true);
  assert.equal(setsOwnOpcache(['php-cgi', '-d', 'opcache.file_cache_only=1']), true);
  assert.equal(setsOwnOpcache(['php-cgi', '-d', 'opcache.memory_consumption=64', '-d', 'display_errors=0']), false);
  assert.equal(setsOwnOpcache(['php-cgi', 'opcache.file_cache=/x']), false);
  assert.equal(setsOwnOpcache(['opcache.file_cache=/x']), false, 'argv[0] is the program');
  assert.deepEqual(withFileCache(['php-cgi', '-b', '{socket}'], '/c/p'), ['php-cgi', '-d', 'opcache.file_cache=/c/p', '-b', '{socket}']);
});

test("sweepCacheRoots: a root whose config file is gone is removed; a live config's, an unmarked one and our own stay", (t) => {
  const parent = makeTempDir(t, 'fpm-cache-roots-');
  const live = join(parent, 'live.yaml');
  writeFileSync(live, 'pools: {}\n');
  const mk = (name: string, source?: string): string => {
    const root = join(parent, name);
    mkdirSync(join(root, 'www'), { recursive: true });
    if (source !== undefined) writeFileSync(join(root, '.config'), `${source}\n`);
    return root;
  };
  const kept = mk('live-1', live);
  const gone = mk('gone-2', join(parent, 'deleted.yaml'));
  const unmarked = mk('old-3');
  const own = join(parent, 'own-4');
  assert.deepEqual(sweepCacheRoots(parent, { root: own, source: join(parent, 'own.yaml') }), [gone]);
  assert.ok(existsSync(kept) && existsSync(unmarked) && !existsSync(gone));
  assert.equal(readFileSync(join(own, '.config'), 'utf8'), `${join(parent, 'own.yaml')}\n`);
});
