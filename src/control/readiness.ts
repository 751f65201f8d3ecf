/**
 * Readiness, for load balancers and orchestrators (ready_path, `fcgi-pm ready`): ready
 * while the daemon serves, not once it is stopping (shutdown_delay keeps serving
 * meanwhile, so a health checker sees it first); about one pool, also not while the pool
 * is failing or has every seat busy with its queue full. Pure, from the daemon state and
 * the pool's own snapshot: nothing a probe every second would notice.
 */
import type { PoolSnapshot } from '../pool/types.js';

export interface Readiness {
  ready: boolean;
  /** 200 ready, 503 not ready, 404 no such pool. */
  status: 200 | 503 | 404;
  /** One line for the answer's body and `fcgi-pm ready`. */
  reason: string;
}

/** Daemon states that take requests (DaemonState, plus 'reloading' as status shows it). */
const SERVING = new Set(['running', 'reloading']);

export function readiness(state: string, pool?: { name: string; snap: PoolSnapshot | undefined }): Readiness {
  if (!SERVING.has(state)) return { ready: false, status: 503, reason: `not ready: fcgi-pm is ${state}` };
  if (pool === undefined) return { ready: true, status: 200, reason: 'ready' };
  const s = pool.snap;
  if (s === undefined) return { ready: false, status: 404, reason: `no pool named ${pool.name}` };
  if (s.state === 'failing') return { ready: false, status: 503, reason: `not ready: pool ${pool.name} is failing (its workers keep crashing)` };
  if (s.state !== undefined && s.state !== 'running') return { ready: false, status: 503, reason: `not ready: pool ${pool.name} is ${s.state}` };
  // Full: a new request would be refused. Without a known capacity (an external pool), a queue at its limit.
  const busy = s.capacity === undefined ? s.queued > 0 : s.active >= s.capacity;
  if (busy && s.queued >= s.queueLimit) return { ready: false, status: 503, reason: `not ready: pool ${pool.name} is full (${s.active} running, ${s.queued} waiting, queue_limit ${s.queueLimit})` };
  return { ready: true, status: 200, reason: `ready (pool ${pool.name}: ${s.active} running, ${s.queued} waiting)` };
}
