// accept: direct without the native addon (no compiler at install): check says the pool is
// in fallback and why; with the addon, no notice.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { installWithoutAddon, runBin } from './helpers.js';

function config(dir: string): string {
  const file = join(dir, 'c.yaml');
  writeFileSync(
    file,
    `listen:
  - { protocol: fastcgi, address: "unix:${dir}/over.sock", pool: app }
pools:
  app:
    command: [/usr/bin/php-cgi]
    accept: direct
    direct_listen: "unix:${dir}/direct.sock"
control_socket: off
`,
  );
  return file;
}

test('check: a direct pool without the addon gets a notice naming ERR_DIRECT_SOCKET; with it, none', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'fpm-direct-check-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = config(dir);
  const bin = installWithoutAddon(dir);

  const without = await runBin(['check', '-c', file, '--allow-root'], { bin });
  assert.equal(without.code, 0, without.stderr + without.stdout);
  const out = without.stdout + without.stderr;
  assert.match(out, /pools\.app\.accept: accept: direct is not available here \(the native addon .*direct-socket\.node is not built/);
  assert.match(out, /in fallback: fcgi-pm will listen on unix:.*direct\.sock itself and proxy to the workers \(ERR_DIRECT_SOCKET/);

  const withAddon = await runBin(['check', '-c', file, '--allow-root']);
  assert.equal(withAddon.code, 0, withAddon.stderr + withAddon.stdout);
  assert.doesNotMatch(withAddon.stdout + withAddon.stderr, /accept: direct is not available/);
});

test('check: a direct socket in a directory that does not exist is a problem at its line', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'fpm-direct-check-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'c.yaml');
  writeFileSync(file, `listen:\n  - { protocol: fastcgi, address: "unix:${dir}/over.sock", pool: app }\npools:\n  app:\n    command: [/usr/bin/php-cgi]\n    accept: direct\n    direct_listen: "unix:${dir}/missing/direct.sock"\ncontrol_socket: off\n`);
  const r = await runBin(['check', '-c', file, '--allow-root']);
  assert.notEqual(r.code, 0);
  assert.match(r.stdout + r.stderr, /c\.yaml:7: pools\.app\.direct_listen: cannot create unix:.*missing\/direct\.sock: .*no such directory/);
});
