/**
 * The load loop. Two modes:
 *
 *  closed loop (default): `concurrency` connections, each sending its next request as
 *    soon as the previous reply ended, until -n requests were started or -d elapsed.
 *  open loop (--rate R): request i is started at t0 + i/R whatever happened to the
 *    earlier ones (httperf style), on an idle connection or a new one; at most
 *    `concurrency` are in flight, and a request due when all are busy is not sent and
 *    counted as "dropped". Overload thus shows as errors and latency, not as a quietly
 *    lower request rate.
 *
 * Timeouts are checked by one coarse timer (every 100 ms), not a timer per request.
 */
import { performance } from 'node:perf_hooks';
import { BenchConnection, type ConnectionOwner } from './connection.js';
import type { ErrorKind } from './error-kinds.js';
import { FcgiReplyReader, HttpReplyReader, ScgiReplyReader, type ReplyReader } from './readers.js';
import { BenchStats } from './stats.js';
import type { BenchTarget, RequestShape } from './target.js';
import { buildWireRequest, type WireRequest } from './wire.js';

export interface BenchOptions {
  target: BenchTarget;
  request: RequestShape;
  /** Closed loop: connections. Open loop: most requests in flight. */
  concurrency: number;
  /** Requests to start (-n); or */
  requests?: number;
  /** how long to start requests for (-d), in ms. */
  durationMs?: number;
  /** Open loop: requests started per second. */
  rate?: number;
  /** A request with no complete reply after this long fails as "timeout". */
  timeoutMs: number;
  /** Called about every progressIntervalMs while running. */
  onProgress?: (p: BenchProgress) => void;
  progressIntervalMs?: number;
  /** Ends the run early (Ctrl-C): requests still running count as unfinished. */
  signal?: AbortSignal;
}

export interface BenchProgress {
  elapsedMs: number;
  issued: number;
  replies: number;
  errors: number;
  inFlight: number;
}

export interface BenchRun {
  stats: BenchStats;
  /** From the first request to the last reply or error. */
  elapsedMs: number;
  startedAt: Date;
  /** Open loop: how late the latest request was started compared with its schedule. */
  scheduleLagMaxMs: number;
  /** Requests that were still running when the run gave up on them (none unless the run was stopped). */
  unfinished: number;
}

const TIMEOUT_SCAN_MS = 100;

export function makeReader(t: BenchTarget, wire: WireRequest): ReplyReader {
  switch (t.protocol) {
    case 'fastcgi':
      return new FcgiReplyReader(wire.keepAlive);
    case 'scgi':
      return new ScgiReplyReader();
    case 'http':
      return new HttpReplyReader(wire.noBody, wire.keepAlive);
  }
}

export function runBench(opts: BenchOptions): Promise<BenchRun> {
  return new Runner(opts).start();
}

class Runner implements ConnectionOwner {
  private readonly opts: BenchOptions;
  private readonly wire: WireRequest;
  private readonly stats = new BenchStats();
  private readonly conns: BenchConnection[] = [];
  /** Open loop: connections free for the next request. */
  private readonly idle: BenchConnection[] = [];
  /** Requests to start in all, or Infinity for a closed loop with -d. */
  private readonly total: number;
  private t0 = 0;
  private tStop = Infinity;
  private lastEvent = 0;
  private inFlight = 0;
  private lagMax = 0;
  private finished = false;
  private scheduleTimer: NodeJS.Timeout | undefined;
  private scanTimer: NodeJS.Timeout | undefined;
  private progressTimer: NodeJS.Timeout | undefined;
  private resolve!: (r: BenchRun) => void;
  private startedAt = new Date();

  constructor(opts: BenchOptions) {
    this.opts = opts;
    this.wire = buildWireRequest(opts.target, opts.request);
    if (opts.requests !== undefined) this.total = opts.requests;
    else if (opts.rate !== undefined) this.total = Math.floor(((opts.durationMs ?? 0) * opts.rate) / 1000 + 1e-6);
    else this.total = Infinity;
  }

  start(): Promise<BenchRun> {
    return new Promise((resolve) => {
      this.resolve = resolve;
      this.startedAt = new Date();
      this.t0 = performance.now();
      this.lastEvent = this.t0;
      if (this.opts.durationMs !== undefined && this.opts.rate === undefined) this.tStop = this.t0 + this.opts.durationMs;
      this.scanTimer = setInterval(() => this.scanTimeouts(), TIMEOUT_SCAN_MS);
      if (this.opts.onProgress !== undefined) {
        this.progressTimer = setInterval(() => this.progress(), this.opts.progressIntervalMs ?? 1000);
      }
      if (this.opts.signal !== undefined) {
        if (this.opts.signal.aborted) {
          this.finish();
          return;
        }
        this.opts.signal.addEventListener('abort', () => {
          this.lastEvent = performance.now();
          this.finish();
        }, { once: true });
      }
      if (this.total === 0) {
        this.finish();
        return;
      }
      if (this.opts.rate !== undefined) this.tick();
      else {
        const n = Math.min(this.opts.concurrency, this.total);
        for (let i = 0; i < n; i++) this.conns.push(this.newConnection());
        for (const c of this.conns) this.next(c);
      }
    });
  }

  private newConnection(): BenchConnection {
    return new BenchConnection(this, this.stats, this.opts.target.address, this.wire, makeReader(this.opts.target, this.wire));
  }

  // ---- closed loop ----

  private next(conn: BenchConnection): void {
    if (this.finished) return;
    const now = performance.now();
    if (this.stats.issued < this.total && now < this.tStop) {
      this.stats.issued++;
      this.inFlight++;
      conn.send(now);
    } else if (this.inFlight === 0) {
      this.finish();
    }
  }

  // ---- open loop ----

  private tick(): void {
    this.scheduleTimer = undefined;
    if (this.finished) return;
    const rate = this.opts.rate!;
    const now = performance.now();
    const due = Math.min(this.total, Math.floor(((now - this.t0) * rate) / 1000) + 1);
    if (this.stats.issued < due) {
      const lag = now - (this.t0 + (this.stats.issued * 1000) / rate);
      if (lag > this.lagMax) this.lagMax = lag;
    }
    while (this.stats.issued < due) this.dispatch(now);
    if (this.stats.issued < this.total) {
      const at = this.t0 + (this.stats.issued * 1000) / rate;
      this.scheduleTimer = setTimeout(() => this.tick(), Math.max(0, at - performance.now()));
    } else if (this.inFlight === 0) {
      this.finish();
    }
  }

  private dispatch(now: number): void {
    this.stats.issued++;
    let conn = this.idle.pop();
    if (conn === undefined) {
      if (this.conns.length >= this.opts.concurrency) {
        this.stats.errors.dropped++;
        this.lastEvent = now;
        return;
      }
      conn = this.newConnection();
      this.conns.push(conn);
    }
    this.inFlight++;
    conn.send(now);
  }

  // ---- outcomes ----

  replied(conn: BenchConnection): void {
    const now = performance.now();
    const s = this.stats;
    const r = conn.reader;
    s.replies++;
    s.countSecond(Math.floor((now - this.t0) / 1000));
    s.countStatus(r.status);
    s.bodyBytes += r.bodyBytes;
    s.reply.record((now - conn.reqStart) * 1000);
    s.firstByte.record((conn.firstByte - conn.reqStart) * 1000);
    this.done(conn, now);
  }

  failed(conn: BenchConnection, kind: ErrorKind): void {
    this.stats.errors[kind]++;
    this.done(conn, performance.now());
  }

  private done(conn: BenchConnection, now: number): void {
    this.inFlight--;
    this.lastEvent = now;
    if (this.opts.rate === undefined) {
      this.next(conn);
      return;
    }
    this.idle.push(conn);
    if (this.stats.issued >= this.total && this.inFlight === 0) this.finish();
  }

  private scanTimeouts(): void {
    const limit = performance.now() - this.opts.timeoutMs;
    for (const c of this.conns) if (c.busy && c.reqStart < limit) c.abort('timeout');
  }

  private progress(): void {
    const s = this.stats;
    this.opts.onProgress?.({
      elapsedMs: performance.now() - this.t0,
      issued: s.issued,
      replies: s.replies,
      errors: s.errorCount,
      inFlight: this.inFlight,
    });
  }

  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    clearTimeout(this.scheduleTimer);
    clearInterval(this.scanTimer);
    clearInterval(this.progressTimer);
    let unfinished = 0;
    for (const c of this.conns) {
      if (c.busy) unfinished++;
      c.close();
    }
    this.resolve({
      stats: this.stats,
      elapsedMs: Math.max(0, this.lastEvent - this.t0),
      startedAt: this.startedAt,
      scheduleLagMaxMs: this.lagMax,
      unfinished,
    });
  }
}
