/**
 * php_value and php_admin (PHP-FPM's php_value / php_admin_value): PHP settings of a
 * php-cgi pool's workers, given as `-d NAME=VALUE` right after the program. php-cgi has
 * no way to mark a value as the administrator's (PHP-FPM changes the setting's
 * modifiability in its own process), so what php_admin holds is what PHP itself keeps from
 * scripts: settings only the system or a directory may set (PHP_INI_SYSTEM, PHP_INI_PERDIR)
 * and open_basedir, which ini_set may only narrow. A directory's .user.ini could set a
 * PERDIR one, so with php_admin the pool's .user.ini files are off (user_ini.filename
 * empty, itself a SYSTEM setting). Which settings qualify, php-cgi is asked
 * (src/worker/php-ini-access.ts) by the host checks.
 */
import type { PoolConfig } from '../config/types.js';

export function withPhpSettings(command: string[], cfg: Pick<PoolConfig, 'phpValue' | 'phpAdmin'>): string[] {
  const admin = Object.entries(cfg.phpAdmin ?? {});
  const values = Object.entries(cfg.phpValue ?? {});
  if (admin.length === 0 && values.length === 0) return command;
  const d: string[] = [];
  // php_admin last: the later -d of one name wins.
  for (const [k, v] of [...values, ...admin]) d.push('-d', `${k}=${v}`);
  if (admin.length > 0) d.push('-d', 'user_ini.filename=');
  return [command[0]!, ...d, ...command.slice(1)];
}
