/**
 * scripts/build-deb.sh in a fresh clone, with nothing run before it: no node_modules, no
 * dist/. It installs the npm dependencies it needs itself (npm ci, from npm's cache when
 * it has them), builds the .deb beside the checkout (never inside it: the clone stays
 * clean for git), and lintian finds no error in it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../helpers/paths.js';
import { makeTempDir } from '../helpers/tmp.js';

const run = promisify(execFile);
const have = (cmd: string): boolean => ['/usr/bin', '/bin'].some((d) => existsSync(join(d, cmd)));

test('build-deb.sh from a fresh clone: the .deb beside the checkout, the clone left clean, lintian without error', { timeout: 420_000, skip: !have('git') || !have('dpkg-deb') }, async (t) => {
  const work = makeTempDir(t, 'fpm-clone-');
  const clone = join(work, 'fcgi-pm');
  await run('git', ['clone', '--quiet', '--no-hardlinks', REPO_ROOT, clone]);
  assert.equal(existsSync(join(clone, 'node_modules')), false);
  const env = { ...process.env, npm_config_prefer_offline: 'true', npm_config_cache: process.env['npm_config_cache'] ?? join(process.env['HOME'] ?? '/root', '.npm') };
  const built = await run('sh', [join(clone, 'scripts/build-deb.sh')], { cwd: clone, env, maxBuffer: 64 * 1024 * 1024 });
  const deb = built.stdout.trim();
  assert.match(deb, new RegExp(`^${work}/fcgi-pm_[0-9.]+_[a-z0-9]+\\.deb$`), built.stderr);
  assert.ok(existsSync(deb));
  assert.deepEqual(readdirSync(work).filter((f) => f.endsWith('.deb')), [deb.slice(work.length + 1)]);
  assert.equal((await run('git', ['status', '--porcelain', '--ignored=no'], { cwd: clone })).stdout, '', 'nothing new or changed in the clone');
  if (have('lintian')) {
    const out = await run('lintian', [deb]).then((r) => r.stdout, (err: { stdout: string }) => err.stdout);
    assert.deepEqual(out.split('\n').filter((l) => /^[EW]:/.test(l)), [], out);
  }
});
