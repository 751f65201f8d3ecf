/**
 * Who may change each PHP setting, as the pool's own php-cgi says (ini_get_all's
 * "access": 1 PHP_INI_USER, 2 PHP_INI_PERDIR, 4 PHP_INI_SYSTEM, 7 PHP_INI_ALL), so that
 * php_admin holds only what php-cgi can keep from scripts (src/pool/php-settings.ts).
 * Asked once per program and process: one php-cgi run of a few lines.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const PHP_INI_USER = 1;
export const PHP_INI_PERDIR = 2;

const asked = new Map<string, ReadonlyMap<string, number> | string>();

/** Setting name → access bits, or why php-cgi could not say. */
export function phpIniAccess(phpCgi: string): ReadonlyMap<string, number> | string {
  let known = asked.get(phpCgi);
  if (known === undefined) {
    known = ask(phpCgi);
    asked.set(phpCgi, known);
  }
  return known;
}

function ask(phpCgi: string): ReadonlyMap<string, number> | string {
  const dir = mkdtempSync(join(tmpdir(), 'fcgi-pm-ini-'));
  try {
    const script = join(dir, 'access.php');
    writeFileSync(script, '<?php foreach (ini_get_all(null, true) as $k => $v) echo $k, "\\t", $v["access"], "\\n";');
    const r = spawnSync(phpCgi, ['-q', script], { encoding: 'utf8', timeout: 10_000, env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin' } });
    if (r.error !== undefined) return `${phpCgi}: ${r.error.message}`;
    if (r.status !== 0) return `${phpCgi} exited ${r.status}: ${(r.stderr || r.stdout).trim().split('\n')[0]}`;
    const out = new Map<string, number>();
    for (const line of r.stdout.split('\n')) {
      const [k, v] = line.split('\t');
      if (k !== undefined && v !== undefined && k !== '') out.set(k, Number(v));
    }
    return out.size > 0 ? out : `${phpCgi} listed no settings`;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
