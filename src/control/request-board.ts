/**
 * The requests in flight and each worker's last finished request, for the per-process
 * part of the status page (method, URI, script, content length, user, duration) and the
 * age of the oldest queued request. The daemon calls add() for every new exchange and
 * finished() from its shared onFinish: an insert and a delete of a dense set per request
 * (no hash table churn), no closure, and a finished request leaves only its variables and
 * times (as PHP-FPM's scoreboard).
 */
import type { Exchange } from '../protocol/exchange.js';
import type { CgiParams } from '../protocol/params.js';
import { DenseSet } from '../util/dense-set.js';
import { FcgiParams } from '../protocol/fastcgi-params.js';
import { paramText } from '../log/access-format.js';
import type { RequestStatus } from './types.js';

/** Workers whose last request is remembered; beyond it the one that finished longest ago is forgotten. */
const MAX_REMEMBERED = 4096;

/** What the board keeps of a finished request: its variables and times, not the exchange (nor its sockets). */
export interface FinishedRequest {
  params: CgiParams;
  startedAt: number;
  /** performance.now() at its end. */
  endedAt: number;
  /** What status shows of it, made at the first snapshot after it ended and shown by every one until the worker's next request ends. */
  status?: RequestStatus | undefined;
}

export class RequestBoard {
  private readonly live = new DenseSet<Exchange, 'boardSlot'>('boardSlot');
  /** By worker pid: its last finished request, one record per worker rewritten in place. */
  private readonly last = new Map<number, FinishedRequest>();

  add(ex: Exchange): void {
    this.live.add(ex);
  }

  finished(ex: Exchange, now = performance.now()): void {
    this.live.delete(ex);
    const pid = ex.workerPid;
    if (pid === undefined) return;
    if (ex.params instanceof FcgiParams) ex.params.detach();
    const rec = this.last.get(pid);
    if (rec !== undefined) {
      // Rewritten in place: a delete and set per request would churn the Map's tables.
      rec.params = ex.params;
      rec.startedAt = ex.startedAt;
      rec.endedAt = now;
      rec.status = undefined;
      return;
    }
    this.last.set(pid, { params: ex.params, startedAt: ex.startedAt, endedAt: now, status: undefined });
    // Workers recycled over months leave entries behind even when nobody takes a snapshot
    // to prune them: past the bound a new worker's entry pushes out the longest finished.
    if (this.last.size > MAX_REMEMBERED) this.forgetOldest();
  }

  private forgetOldest(): void {
    let oldest: number | undefined;
    let at = Infinity;
    for (const [pid, r] of this.last) {
      if (r.endedAt < at) {
        at = r.endedAt;
        oldest = pid;
      }
    }
    if (oldest !== undefined) this.last.delete(oldest);
  }

  get inFlight(): number {
    return this.live.size;
  }

  /** Running requests by worker pid. */
  runningByPid(): Map<number, Exchange> {
    const out = new Map<number, Exchange>();
    this.live.forEach((ex) => {
      if (ex.workerPid !== undefined && ex.state !== 'aborted') out.set(ex.workerPid, ex);
    });
    return out;
  }

  /** By pool: when its oldest request still waiting for a worker or backend started (performance.now()); one walk for every pool. */
  oldestQueued(): Map<string, number> {
    const out = new Map<string, number>();
    this.live.forEach((ex) => {
      const pool = ex.pool;
      if (pool === undefined || ex.workerPid !== undefined || ex.backend !== undefined) return;
      const at = out.get(pool);
      if (at === undefined || ex.startedAt < at) out.set(pool, ex.startedAt);
    });
    return out;
  }

  /** The last finished request of a worker, if known. */
  lastOf(pid: number): FinishedRequest | undefined {
    return this.last.get(pid);
  }

  /**
   * The status of a worker's last finished request, made once: an idle worker's last
   * request was decoded from its PARAMS again at every snapshot (about 600 bytes a worker
   * each time, at 200 idle sites most of what a dashboard sample made).
   */
  lastStatus(pid: number, nowPerf: number, nowEpoch: number): RequestStatus | undefined {
    const rec = this.last.get(pid);
    if (rec === undefined) return undefined;
    return (rec.status ??= requestStatus(rec, nowPerf, nowEpoch, rec.endedAt));
  }

  /** Forgets workers that are gone (called with the live pids at each snapshot). */
  prune(alive: ReadonlySet<number>): void {
    for (const pid of this.last.keys()) if (!alive.has(pid)) this.last.delete(pid);
  }
}

/** What the status page shows of one request (running, or finished at `endedAt`, performance.now()). */
export function requestStatus(ex: Pick<Exchange, 'params' | 'startedAt'>, nowPerf: number, nowEpoch: number, endedAt?: number): RequestStatus {
  const p = ex.params;
  const uri = p.get('REQUEST_URI') || (p.get('SCRIPT_NAME') ?? '') + (p.get('QUERY_STRING') ? `?${p.get('QUERY_STRING')}` : '');
  const len = Number(p.get('CONTENT_LENGTH') ?? 0);
  return {
    method: paramText(p.get('REQUEST_METHOD')),
    uri: paramText(uri),
    script: paramText(p.get('SCRIPT_FILENAME') ?? p.get('SCRIPT_NAME')),
    contentLength: Number.isFinite(len) && len > 0 ? len : 0,
    user: paramText(p.get('REMOTE_USER')),
    remote: p.get('REMOTE_ADDR') ?? '',
    startedAt: Math.round(nowEpoch - (nowPerf - ex.startedAt)),
    durationMs: Math.round(((endedAt ?? nowPerf) - ex.startedAt) * 1000) / 1000,
  };
}
