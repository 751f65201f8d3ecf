/**
 * accept: direct without the native addon (docs/direct.md "The native addon"): the pool
 * runs as a proxied pool, and the daemon listens on its direct_listen itself, so a front
 * end configured for the direct socket (docs/direct.md's nginx block) still reaches the
 * pool, at proxy speed, with no error per request. A host fact, decided where check,
 * start and reload look at the host; status and check say the pool is in fallback.
 */
import { directFallbackListener } from '../config/schema.js';
import type { Config } from '../config/types.js';
import { directSocketSupport } from '../worker/shared-socket.js';

/** Adds a FastCGI listener on direct_listen for each direct pool that cannot have its shared socket here; the notices to log. */
export function addDirectFallbacks(cfg: Config, unsupported: string | undefined = directSocketSupport()): string[] {
  if (unsupported === undefined) return [];
  const notices: string[] = [];
  for (const pool of cfg.pools.values()) {
    const address = pool.accept === 'direct' ? pool.directListen : undefined;
    if (address === undefined || cfg.listen.some((l) => l.address?.text === address.text)) continue;
    cfg.listen.push(directFallbackListener(pool));
    notices.push(`pool ${pool.name}: accept: direct in fallback (${unsupported}): fcgi-pm listens on ${address.text} itself and proxies to the workers (docs/direct.md)`);
  }
  return notices;
}
