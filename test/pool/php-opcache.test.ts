// A php-cgi pool's opcache file cache (src/worker/php-cache.ts) with real php-cgi: what
// one worker compiled, the next loads; a changed file is still served new; each pool's
// directory belongs to its user alone.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { lookupUser } from '../../src/config/system-users.js';
import { makeTempDir } from '../helpers/tmp.js';
import { phpPool, type PhpPool } from './php-harness.js';

const CLASSES = 30;

/** What status.php reports of the worker that ran it. */
interface OpcacheSeen {
  pid: number;
  hits: number;
  misses: number;
  fileCache: string | false;
  version: string;
}

/** A small app: CLASSES class files, a version file, and a page that loads them and reports opcache's counters. */
function writeApp(dir: string): void {
  mkdirSync(join(dir, 'lib'), { mode: 0o755 });
  for (let i = 1; i <= CLASSES; i++) writeFileSync(join(dir, 'lib', `C${i}.php`), `<?php\nclass C${i} { public function n(): int { return ${i}; } }\n`);
  writeVersion(dir, 'v1', 120);
  writeFileSync(
    join(dir, 'status.php'),
    `<?php
for ($i = 1; $i <= ${CLASSES}; $i++) require __DIR__ . "/lib/C$i.php";
$version = require __DIR__ . '/version.php';
$s = opcache_get_status(false);
header('Content-Type: application/json');
echo json_encode(['pid' => getmypid(), 'hits' => $s['opcache_statistics']['hits'], 'misses' => $s['opcache_statistics']['misses'],
  'fileCache' => $s['file_cache'] ?? false, 'version' => $version]);
`,
  );
  // opcache leaves alone files changed in the last 2 s (opcache.file_update_protection).
  for (const f of ['status.php', ...readdirSync(join(dir, 'lib')).map((f) => `lib/${f}`)]) age(join(dir, f), 120);
}

function writeVersion(dir: string, v: string, secondsAgo: number): void {
  writeFileSync(join(dir, 'version.php'), `<?php return '${v}';\n`);
  age(join(dir, 'version.php'), secondsAgo);
}

function age(file: string, secondsAgo: number): void {
  const t = Date.now() / 1000 - secondsAgo;
  utimesSync(file, t, t);
}

async function seen(pp: PhpPool): Promise<OpcacheSeen> {
  const r = await pp.get('status.php');
  assert.equal(r.sink.status, 200, r.sink.text());
  return JSON.parse(r.sink.text()) as OpcacheSeen;
}

test('a new worker gets opcache hits on its first request; a changed file is served new', async (t: TestContext) => {
  // One request per worker: every request is some worker's first.
  const pp = phpPool(t, { maxChildren: 1, maxRequests: 1 });
  writeApp(pp.dir);
  const cacheDir = join(pp.runtimeDir, 'opcache', 'php');

  const first = await seen(pp);
  assert.equal(first.fileCache, cacheDir);
  assert.equal(first.hits, 0, 'the first worker compiles everything');
  assert.equal(statSync(cacheDir).mode & 0o777, 0o700);

  const second = await seen(pp);
  assert.notEqual(second.pid, first.pid, 'a new worker');
  assert.ok(second.hits >= CLASSES + 2, `every script loaded from the file cache: ${JSON.stringify(second)}`);
  assert.equal(second.misses, 0);
  assert.equal(second.version, 'v1');

  writeVersion(pp.dir, 'v2', 60);
  const third = await seen(pp);
  assert.notEqual(third.pid, second.pid);
  assert.equal(third.version, 'v2', 'timestamps are still validated');
  assert.equal(third.misses, 1, 'only the changed file is compiled again');
});

test('a pool that sets opcache.file_cache itself keeps it; opcache_file_cache: false adds none', async (t: TestContext) => {
  const own = makeTempDir(t, 'fpm-own-');
  const mine = phpPool(t, { command: ['/usr/bin/php-cgi', '-d', `opcache.file_cache=${own}`] });
  writeApp(mine.dir);
  assert.equal((await seen(mine)).fileCache, own);
  assert.equal(existsSync(join(mine.runtimeDir, 'opcache')), false);

  const off = phpPool(t, { opcacheFileCache: false });
  writeApp(off.dir);
  assert.equal((await seen(off)).fileCache, false);
});

const isRoot = process.geteuid?.() === 0;
const WWW = lookupUser('www-data');
const NOBODY = lookupUser('nobody');

test("each pool's cache is its user's alone: another user's pool cannot read it, and one left by another user is not reused", { skip: !isRoot && 'needs root to run workers as www-data and nobody' }, async (t: TestContext) => {
  const pages = makeTempDir(t, 'fpm-oc-');
  chmodSync(pages, 0o755);
  writeApp(pages);
  const root = join(makeTempDir(t, 'fpm-ocr-'), 'cache');
  chmodSync(join(root, '..'), 0o755);
  // A directory someone else made where pool "a" will keep its cache, with a file in it.
  mkdirSync(join(root, 'a'), { recursive: true, mode: 0o777 });
  writeFileSync(join(root, 'a', 'planted'), 'x');
  chownSync(join(root, 'a'), NOBODY!.uid, NOBODY!.gid);

  const a = phpPool(t, { name: 'a', user: 'www-data' }, { opcacheRoot: root, dir: pages });
  const fromA = await seen(a);
  assert.equal(fromA.fileCache, join(root, 'a'));
  const st = statSync(join(root, 'a'));
  assert.deepEqual([st.uid, st.mode & 0o7777], [WWW!.uid, 0o700]);
  assert.equal(existsSync(join(root, 'a', 'planted')), false, 'what another user left is gone');
  assert.ok(readdirSync(join(root, 'a')).length > 0, 'pool a wrote its cache');

  writeFileSync(
    join(pages, 'peek.php'),
    `<?php header('Content-Type: text/plain'); echo json_encode(['list' => @scandir($_GET['d']), 'readable' => is_readable($_GET['d'])]);`,
  );
  age(join(pages, 'peek.php'), 120);
  const b = phpPool(t, { name: 'b', user: 'nobody' }, { opcacheRoot: root, dir: pages });
  const peek = await b.get('peek.php', `d=${encodeURIComponent(join(root, 'a'))}`);
  assert.equal(peek.sink.status, 200, peek.sink.text());
  assert.deepEqual(JSON.parse(peek.sink.text()), { list: false, readable: false });
  // Its own cache it can use.
  const fromB = await seen(b);
  assert.equal(fromB.fileCache, join(root, 'b'));
  assert.equal(statSync(join(root, 'b')).uid, NOBODY!.uid);
});
