/**
 * Where php-cgi pools keep their opcache file caches (src/worker/php-cache.ts makes the
 * directories). In order:
 *   1. opcache_dir as configured ("off" turns the caches off);
 *   2. as root, /var/cache/fcgi-pm/<config name>-<hash> (the name the default control
 *      socket gets), so two daemons never share one and a pool of one cannot meet a
 *      same-named pool of the other;
 *   3. else undefined: the daemon's private runtime directory, which lasts as long as
 *      the daemon (the caller knows it).
 */
import * as nodePath from 'node:path';
import { controlSocketName } from './control-path.js';

export const ROOT_CACHE_DIR = '/var/cache/fcgi-pm';

export interface OpcacheDirSetting {
  opcacheDir?: string | false | undefined;
  source?: string | undefined;
}

/** The cache root, false when off, undefined for "under the private runtime directory". */
export function opcacheRoot(cfg: OpcacheDirSetting, uid = process.geteuid?.() ?? -1): string | false | undefined {
  if (cfg.opcacheDir !== undefined) return cfg.opcacheDir;
  if (uid !== 0) return undefined;
  return nodePath.join(ROOT_CACHE_DIR, controlSocketName(cfg.source).replace(/\.sock$/, ''));
}
