// fcgi-pm check reads the vhosts sites as run would: every broken site file is named
// with its line (bad keys, a rewrite pattern that does not compile, the root policy),
// and a valid set is counted.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, unlinkSync, writeFileSync } from 'node:fs';
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
