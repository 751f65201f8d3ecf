/**
 * Every answer counted as its exchange finishes (the daemon's one onFinish): per pool,
 * responses by status class, refusals by error code, latency and queue-wait histograms
 * and the authorizer's decisions; per listener, the same classes and codes, so answers
 * given before any pool (unknown vhost, no pool) are counted too. Cumulative counters,
 * so a reader (the dashboard) takes percentiles over any interval by subtracting two
 * snapshots' buckets.
 */
import type { Exchange } from '../protocol/exchange.js';
import { Role } from '../protocol/fastcgi.js';
import type { AnswerCounts, Histogram, PoolAuthorizerAnswers, PoolAuthorizerCounts, PoolOutcomes } from './types.js';

/** Upper bounds of the latency and queue-wait buckets, ms; the last bucket is everything above. */
export const LATENCY_BOUNDS_MS: readonly number[] = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 30_000];

/** Classes and codes: what a listener and a pool both count. */
class Answers {
  readonly classes = [0, 0, 0, 0, 0];
  readonly refusals: Record<string, number> = {};

  count(ex: Exchange): void {
    const cls = Math.floor(ex.status / 100);
    if (cls >= 1 && cls <= 5) this.classes[cls - 1]!++;
    const code = ex.error?.code;
    if (code !== undefined) this.refusals[code] = (this.refusals[code] ?? 0) + 1;
  }

  counts(): AnswerCounts {
    const [a, b, d, e, f] = this.classes as [number, number, number, number, number];
    return { status: { '1xx': a, '2xx': b, '3xx': d, '4xx': e, '5xx': f }, refusals: { ...this.refusals } };
  }
}

class Buckets {
  readonly counts = new Array<number>(LATENCY_BOUNDS_MS.length + 1).fill(0);
  sumMs = 0;

  add(ms: number): void {
    let i = 0;
    while (i < LATENCY_BOUNDS_MS.length && ms > LATENCY_BOUNDS_MS[i]!) i++;
    this.counts[i]!++;
    this.sumMs += ms;
  }

  view(): Histogram {
    return { boundsMs: [...LATENCY_BOUNDS_MS], counts: [...this.counts], sumMs: Math.round(this.sumMs * 1000) / 1000 };
  }
}

/** Seconds the recent request rate is taken over (status' req/s). */
export const RATE_WINDOW_S = 10;

/** Requests finished in each of the last RATE_WINDOW_S whole seconds (and the current one). */
class RecentRate {
  private readonly counts = new Array<number>(RATE_WINDOW_S + 1).fill(0);
  /** The second the newest slot counts. */
  private second = 0;

  add(nowMs: number): void {
    const s = Math.floor(nowMs / 1000);
    this.roll(s);
    this.counts[s % this.counts.length]!++;
  }

  /** Per second over the whole seconds before the current one. */
  perSecond(nowMs: number): number {
    const s = Math.floor(nowMs / 1000);
    this.roll(s);
    let n = 0;
    for (let i = 0; i < this.counts.length; i++) if (i !== s % this.counts.length) n += this.counts[i]!;
    return Math.round((n / RATE_WINDOW_S) * 10) / 10;
  }

  private roll(s: number): void {
    if (s <= this.second) return;
    const n = this.counts.length;
    if (s - this.second >= n) this.counts.fill(0);
    else for (let t = this.second + 1; t <= s; t++) this.counts[t % n] = 0;
    this.second = s;
  }
}

class PoolCounts extends Answers {
  /** Answers counted, and the view made at that count: an idle pool's view is the same object at every snapshot. */
  finished = 0;
  view: PoolOutcomes | undefined;
  viewAt = -1;
  readonly rate = new RecentRate();
  readonly latency = new Buckets();
  readonly queueWait = new Buckets();
  /** Once the pool's authorizer decided about a request. */
  authorizer: PoolAuthorizerCounts | undefined;
  /** Once a front end's authorizer request to this pool finished. */
  answers: PoolAuthorizerAnswers | undefined;
}

/** Counts by pool or listener name, the one counted last at hand: the next answer is usually theirs too (no Map look-up). */
class CountsByName<V> {
  private readonly map = new Map<string, V>();
  private lastName: string | undefined;
  private last: V | undefined;

  constructor(private readonly make: () => V) {}

  /** The counts of `name`, made on first use. */
  of(name: string): V {
    if (name === this.lastName) return this.last!;
    let v = this.map.get(name);
    if (v === undefined) this.map.set(name, (v = this.make()));
    this.lastName = name;
    this.last = v;
    return v;
  }

  get(name: string): V | undefined {
    return this.map.get(name);
  }

  /** Drops every name not in `keep` (and the one at hand). */
  keepOnly(keep: ReadonlySet<string>): void {
    this.lastName = this.last = undefined;
    for (const k of this.map.keys()) if (!keep.has(k)) this.map.delete(k);
  }
}

export class OutcomeCounter {
  private readonly byPool = new CountsByName(() => new PoolCounts());
  private readonly byListener = new CountsByName(() => new Answers());

  finished(ex: Exchange, nowPerf = performance.now()): void {
    const l = ex.listener;
    if (l !== undefined) this.byListener.of(l).count(ex);
    const name = ex.pool;
    if (name === undefined) return;
    const c = this.byPool.of(name);
    c.count(ex);
    c.finished++;
    c.rate.add(nowPerf);
    c.latency.add(nowPerf - ex.startedAt);
    // Only requests a worker or backend took waited for one; a refusal waited for nothing.
    if (ex.backend !== undefined) c.queueWait.add(ex.queuedMs);
    const decision = ex.authorization;
    if (decision !== undefined) (c.authorizer ??= { allowed: 0, cached: 0, denied: 0, failed: 0 })[decision]++;
    // A client that left made no decision to count.
    if (ex.role === Role.Authorizer && ex.state !== 'aborted') {
      const answer = ex.state === 'failed' ? 'failed' : ex.status === 200 ? 'allowed' : 'denied';
      (c.answers ??= { allowed: 0, denied: 0, failed: 0 })[answer]++;
    }
  }

  /**
   * A pool's counts as they are now; made again only after an answer was counted, so
   * snapshots of idle pools share it (readers never change it). A status at 200 pools
   * copied their histograms every time, and the dashboard keeps each sample for the
   * next one: a copy per pool per sample, every one kept long enough to be promoted.
   */
  of(pool: string): PoolOutcomes | undefined {
    const c = this.byPool.get(pool);
    if (c === undefined) return undefined;
    if (c.view !== undefined && c.viewAt === c.finished) return c.view;
    const out: PoolOutcomes = { ...c.counts(), latency: c.latency.view(), queueWait: c.queueWait.view() };
    if (c.authorizer !== undefined) out.authorizer = { ...c.authorizer };
    if (c.answers !== undefined) out.authorizerAnswers = { ...c.answers };
    c.view = out;
    c.viewAt = c.finished;
    return out;
  }

  /** Requests of the pool finished per second over the last RATE_WINDOW_S seconds. */
  rate(pool: string, nowPerf = performance.now()): number {
    return this.byPool.get(pool)?.rate.perSecond(nowPerf) ?? 0;
  }

  ofListener(address: string): AnswerCounts | undefined {
    return this.byListener.get(address)?.counts();
  }

  /** Pools that no longer exist (after a reload removed them), listeners no longer open. */
  forget(keep: ReadonlySet<string>, listeners?: ReadonlySet<string>): void {
    this.byPool.keepOnly(keep);
    if (listeners !== undefined) this.byListener.keepOnly(listeners);
  }
}
