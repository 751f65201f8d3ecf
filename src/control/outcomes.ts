/**
 * Per pool: responses by status class, a latency histogram, the decisions of the pool's
 * authorizer and its own answers to a front end's authorizer requests, counted as each exchange finishes (the daemon's one onFinish). Cumulative counters, so a reader (the dashboard)
 * takes percentiles over any interval by subtracting two snapshots' buckets.
 */
import type { Exchange } from '../protocol/exchange.js';
import { Role } from '../protocol/fastcgi.js';
import type { PoolAuthorizerAnswers, PoolAuthorizerCounts, PoolOutcomes } from './types.js';

/** Upper bounds of the latency buckets, ms; the last bucket is everything above. */
export const LATENCY_BOUNDS_MS: readonly number[] = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 30_000];

interface Counts {
  classes: number[];
  latency: number[];
  /** Once the pool's authorizer decided about a request. */
  authorizer?: PoolAuthorizerCounts;
  /** Once a front end's authorizer request to this pool finished. */
  answers?: PoolAuthorizerAnswers;
}

export class OutcomeCounter {
  private readonly byPool = new Map<string, Counts>();

  finished(ex: Exchange, nowPerf = performance.now()): void {
    const name = ex.pool;
    if (name === undefined) return;
    let c = this.byPool.get(name);
    if (c === undefined) {
      c = { classes: [0, 0, 0, 0, 0], latency: new Array<number>(LATENCY_BOUNDS_MS.length + 1).fill(0) };
      this.byPool.set(name, c);
    }
    const cls = Math.floor(ex.status / 100);
    if (cls >= 1 && cls <= 5) c.classes[cls - 1]!++;
    const ms = nowPerf - ex.startedAt;
    let i = 0;
    while (i < LATENCY_BOUNDS_MS.length && ms > LATENCY_BOUNDS_MS[i]!) i++;
    c.latency[i]!++;
    const decision = ex.authorization;
    if (decision !== undefined) (c.authorizer ??= { allowed: 0, cached: 0, denied: 0, failed: 0 })[decision]++;
    // A client that left made no decision to count.
    if (ex.role === Role.Authorizer && ex.state !== 'aborted') {
      const answer = ex.state === 'failed' ? 'failed' : ex.status === 200 ? 'allowed' : 'denied';
      (c.answers ??= { allowed: 0, denied: 0, failed: 0 })[answer]++;
    }
  }

  of(pool: string): PoolOutcomes | undefined {
    const c = this.byPool.get(pool);
    if (c === undefined) return undefined;
    const [a, b, d, e, f] = c.classes as [number, number, number, number, number];
    const out: PoolOutcomes = { status: { '1xx': a, '2xx': b, '3xx': d, '4xx': e, '5xx': f }, latency: { boundsMs: [...LATENCY_BOUNDS_MS], counts: [...c.latency] } };
    if (c.authorizer !== undefined) out.authorizer = { ...c.authorizer };
    if (c.answers !== undefined) out.authorizerAnswers = { ...c.answers };
    return out;
  }

  /** Pools that no longer exist (after a reload removed them). */
  forget(keep: ReadonlySet<string>): void {
    for (const k of this.byPool.keys()) if (!keep.has(k)) this.byPool.delete(k);
  }
}
