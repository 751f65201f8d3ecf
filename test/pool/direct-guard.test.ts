// The script guard php-cgi runs before every script of a direct pool: valid PHP whatever
// the configured names hold, and it lets through or refuses what script-guard.ts would.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeGuard } from '../../src/pool/direct/php-guard.js';
import { PHP_CGI } from '../helpers/paths.js';

/** php-cgi run once, as CGI, on `script` with the guard prepended: [status line or '', body]. */
function runThroughGuard(guard: string, script: string): string {
  try {
    return execFileSync(PHP_CGI, ['-d', `auto_prepend_file=${guard}`, '-d', 'cgi.fix_pathinfo=1', '-d', 'log_errors=0'], {
      env: { REDIRECT_STATUS: '200', GATEWAY_INTERFACE: 'CGI/1.1', REQUEST_METHOD: 'GET', SCRIPT_FILENAME: script, PATH: '/usr/bin:/bin' },
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (e) {
    return String((e as { stdout?: string }).stdout ?? e);
  }
}

test('the guard: extensions and roots, quotes in names, a fix_pathinfo walk to an image, a symlink out of the roots', (t) => {
  const dir = mkdtempSync(join(tmpdir(), "fpm-guard-it's-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const root = join(dir, 'www');
  const outside = join(dir, 'outside');
  mkdirSync(join(root, 'uploads'), { recursive: true });
  mkdirSync(outside);
  writeFileSync(join(root, 'ok.php'), '<?php echo "RAN-OK";');
  writeFileSync(join(root, 'uploads', 'image.jpg'), '<?php echo "RAN-IMAGE";');
  writeFileSync(join(outside, 'x.php'), '<?php echo "RAN-OUTSIDE";');
  symlinkSync(join(outside, 'x.php'), join(root, 'link.php'));
  const g = writeGuard("pool'x", { extensions: ['.php'], roots: [root] });
  t.after(() => g.remove());
  execFileSync(PHP_CGI, ['-l', g.file], { stdio: 'ignore' });

  assert.match(runThroughGuard(g.file, join(root, 'ok.php')), /RAN-OK/);
  for (const [script, status] of [
    [join(root, 'uploads', 'image.jpg'), 403],
    [join(root, 'uploads', 'image.jpg', 'x.php'), 403],
    [join(root, 'link.php'), 403],
    [join(root, 'missing.php'), 404],
  ] as const) {
    const out = runThroughGuard(g.file, script);
    assert.doesNotMatch(out, /RAN-/, script);
    assert.match(out, new RegExp(`^Status: ${status}`, 'm'), `${script}: ${out}`);
  }
});
