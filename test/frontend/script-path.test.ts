/**
 * Path handling for the HTTP front end, as tables: percent-decoding to bytes,
 * normalization (and refusing to climb out of the root), and the lighttpd-style
 * SCRIPT_NAME/PATH_INFO split against a real temp directory.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { StatCache, normalizePath, percentDecode, splitScript } from '../../src/frontend/script-path.js';
import { Cleanup } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';

describe('percentDecode', () => {
  it('decodes escapes to latin1 bytes and refuses bad ones', () => {
    assert.equal(percentDecode('/a%20b'), '/a b');
    assert.equal(percentDecode('/%C3%A9'), '/\u00c3\u00a9', 'UTF-8 bytes stay bytes');
    assert.equal(percentDecode('/plain'), '/plain');
    assert.equal(percentDecode('/%2F%2f'), '///');
    assert.equal(percentDecode('/bad%2'), undefined);
    assert.equal(percentDecode('/bad%zz'), undefined);
  });

  it('inverts percent-encoding of any bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        const encoded = [...bytes].map((b) => '%' + b.toString(16).padStart(2, '0')).join('');
        assert.equal(percentDecode(encoded), Buffer.from(bytes).toString('latin1'));
      }),
    );
  });
});

describe('normalizePath', () => {
  it('collapses dots and slashes, refuses escapes', () => {
    assert.deepEqual(normalizePath('/a//b/./c'), { segs: ['a', 'b', 'c'], trailingSlash: false });
    assert.deepEqual(normalizePath('/a/b/../c/'), { segs: ['a', 'c'], trailingSlash: true });
    assert.deepEqual(normalizePath('/'), { segs: [], trailingSlash: false });
    assert.deepEqual(normalizePath('/a/..'), { segs: [], trailingSlash: false });
    assert.equal(normalizePath('/..'), undefined);
    assert.equal(normalizePath('/a/../../b'), undefined);
  });
});

describe('splitScript', () => {
  const scope = new Cleanup();
  after(() => scope.run());
  const root = makeTempDir(scope, 'fpm-split-');
  writeFileSync(join(root, 'index.php'), '');
  mkdirSync(join(root, 'app'));
  writeFileSync(join(root, 'app', 'run.py'), '');

  it('splits like lighttpd, synchronously once cached', async () => {
    const cache = new StatCache(60_000);
    const cases: Array<[string, string, string, boolean]> = [
      ['/index.php/extra', '/index.php', '/extra', true],
      ['/app/run.py/a/b', '/app/run.py', '/a/b', true],
      ['/', '/index.php', '', true],
      ['/app/', '/app/', '', false],
      ['/missing/x', '/missing/x', '', false],
    ];
    for (const [path, scriptName, pathInfo, found] of cases) {
      const first = splitScript(root, path, 'index.php', cache);
      assert.ok(first instanceof Promise, `${path}: the first lookup stats`);
      assert.deepEqual(await first, { path, scriptName, pathInfo, found });
      const again = splitScript(root, path, 'index.php', cache);
      assert.ok(!(again instanceof Promise), `${path}: the second is served from the cache`);
      assert.deepEqual(again, { path, scriptName, pathInfo, found });
    }
    assert.equal(splitScript(root, '/../x', 'index.php', cache), undefined);
  });

  it('sees changes on disk once the cache entry expired', async () => {
    let now = 1000;
    const cache = new StatCache(50, 10_000, () => now);
    assert.equal((await splitScript(root, '/new.php', 'index.php', cache))!.found, false);
    writeFileSync(join(root, 'new.php'), '');
    now += 50;
    assert.equal((await splitScript(root, '/new.php', 'index.php', cache))!.found, false, 'cached until its ttl has passed');
    now += 1;
    assert.equal((await splitScript(root, '/new.php', 'index.php', cache))!.found, true);
    rmSync(join(root, 'new.php'));
  });
});
