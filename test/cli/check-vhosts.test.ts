// fcgi-pm check reads the vhosts sites as run would: every broken site file is named
// with its line (bad keys, a rewrite pattern that does not compile, the root policy),
// and a valid set is counted.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify as stringifyYaml } from 'yaml';
import { makeTempDir } from '../helpers/tmp.js';
import { runBin } from './helpers.js';

test('check: vhosts sites are read and checked, each problem with its file:line', { timeout: 60_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-chk-');
  const sites = join(dir, 'sites');
  mkdirSync(sites);
  const file = join(dir, 'fcgi-pm.yaml');
  writeFileSync(file, stringifyYaml({ listen: [{ protocol: 'fastcgi', address: '127.0.0.1:9000', vhosts: true }], vhosts: { dir: sites, defaults: { command: ['php-cgi'], user: 'nobody' } } }));
  writeFileSync(join(sites, 'good.yaml'), `names: [good.test]\ndocument_root: ${dir}\n`);
  writeFileSync(join(sites, 'bad.yaml'), `names: [bad.test]\ndocument_root: ${dir}\nrewrite:\n  - { match: "[", to: /x.php }\n`);
  const bad = await runBin(['check', '-c', file]);
  assert.equal(bad.code, 1, bad.stderr);
  assert.match(bad.stderr, new RegExp(`${join(sites, 'bad.yaml').replace(/[/.]/g, '\\$&')}:4: rewrite\\[0\\]\\.match: is not a regular expression`));
  assert.doesNotMatch(bad.stderr, /good\.yaml/);
  unlinkSync(join(sites, 'bad.yaml'));
  const ok = await runBin(['check', '-c', file]);
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stdout, /config OK: 1 listener, 0 pools, 1 site\n/);
});

test('check: a site\'s php_admin and max_children get the checks a pool\'s get (php-cgi\'s own settings, pid_max)', { timeout: 60_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-chk-');
  const sites = join(dir, 'sites');
  mkdirSync(sites);
  const file = join(dir, 'fcgi-pm.yaml');
  const pidMax = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8').trim());
  writeFileSync(file, stringifyYaml({ listen: [{ protocol: 'fastcgi', address: '127.0.0.1:9000', vhosts: true }], vhosts: { dir: sites, defaults: { command: ['php-cgi'], user: 'nobody' } } }));
  const pool = { php_admin: { no_such_setting: '1', memory_limit: '64M', open_basedir: dir }, ...(pidMax < 100_000 ? { max_children: pidMax + 1 } : {}) };
  writeFileSync(join(sites, 'tenant.yaml'), stringifyYaml({ names: ['tenant.test'], document_root: dir, pool }));
  const r = await runBin(['check', '-c', file]);
  assert.equal(r.code, 1, r.stderr);
  const site = join(sites, 'tenant.yaml');
  assert.ok(r.stderr.includes(`${site}: pool.php_admin.no_such_setting: `), r.stderr);
  assert.ok(r.stderr.includes(`${site}: pool.php_admin.memory_limit: a script may change memory_limit with ini_set`), r.stderr);
  assert.ok(!r.stderr.includes('php_admin.open_basedir'), r.stderr);
  if (pidMax < 100_000) assert.ok(r.stderr.includes(`${site}: pool.max_children: ${pidMax + 1} is above this host's pid_max`), r.stderr);
});
