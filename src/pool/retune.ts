/**
 * Which changes of a pool's settings a running pool of spawned workers takes with the
 * workers it has (Pool.retune) instead of starting a new generation: the scaling policy,
 * which the supervisor reads at each decision. Anything else (the command, env, user,
 * memory caps, pm, group_size, max_requests...) is what the workers were started with.
 * Pure.
 */
import type { PoolConfig } from '../config/types.js';
import { stable } from '../util/stable-json.js';

export const POOL_KEYS_IN_PLACE = ['maxChildren', 'startChildren', 'minSpare', 'maxSpare', 'maxSpawnRate', 'idleTimeout'] as const;

function withoutInPlace(p: PoolConfig): string {
  const o: Record<string, unknown> = { ...p };
  for (const k of POOL_KEYS_IN_PLACE) delete o[k];
  return stable(o);
}

/** True when `a` and `b` differ, and only in POOL_KEYS_IN_PLACE. */
export function retunesInPlace(a: PoolConfig, b: PoolConfig): boolean {
  return stable(a) !== stable(b) && withoutInPlace(a) === withoutInPlace(b);
}

/** The keys of POOL_KEYS_IN_PLACE that differ, as written in the config (snake_case). */
export function keysRetuned(a: PoolConfig, b: PoolConfig): string[] {
  return POOL_KEYS_IN_PLACE.filter((k) => a[k] !== b[k]).map((k) => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`));
}
