/**
 * Whether a php-cgi pool keeps a resident parent (resident_parent; docs/memory.md "Warm
 * zero and cold zero"), and what that makes of its config. A resident pool's workers are
 * the children of one php-cgi parent (PHP_FCGI_CHILDREN: group_size, max_children unless
 * set), all forked from it with PHP started and its opcache shared memory holding the
 * compiled scripts, so a worker that starts while others are busy is as warm as one after
 * scale to zero. Its children recycle themselves after max_requests (php-cgi's
 * PHP_FCGI_MAX_REQUESTS) and the parent forks their replacements: recycling keeps the
 * parent, and the opcache it holds.
 *
 * auto: on where warm zero pays and the budget can judge it: a php-cgi pool that scales
 * to zero (pm ondemand, accept: proxy) while a memory_budget is set; the budget then
 * counts the parent and gives it back first when another pool needs the room.
 */
import { runsPhpCgi } from '../config/schema.js';
import type { PoolConfig } from '../config/types.js';

/** auto's answer: php-cgi, ondemand, through the proxy, under a memory budget. */
export function autoResident(cfg: PoolConfig, budget: number | undefined): boolean {
  return budget !== undefined && cfg.command !== undefined && runsPhpCgi(cfg.command) && cfg.accept !== 'direct' && cfg.preload !== true && cfg.pm === 'ondemand';
}

/** The pool's config with resident_parent decided (true or false) and, when on, its group and recycling set as above. */
export function residentConfig(cfg: PoolConfig, budget: number | undefined): PoolConfig {
  const on = cfg.residentParent === true || (cfg.residentParent === 'auto' && autoResident(cfg, budget));
  if (!on) return cfg.residentParent === 'auto' ? { ...cfg, residentParent: false } : cfg;
  const out: PoolConfig = { ...cfg, residentParent: true, groupSize: cfg.groupSize ?? cfg.maxChildren };
  if (cfg.maxRequests > 0) {
    out.env = { ...cfg.env, PHP_FCGI_MAX_REQUESTS: String(cfg.maxRequests) };
    out.maxRequests = 0;
    out.maxRequestsJitter = 0;
  }
  return out;
}
