/**
 * What watches every request of a running daemon: the in-flight board (status's request
 * list), the outcome counters, and the access log, all fed by one onFinish per exchange.
 */
import type { Config } from '../config/types.js';
import { OutcomeCounter } from '../control/outcomes.js';
import { RequestBoard } from '../control/request-board.js';
import { createAccessLog, type AccessLogger } from '../log/access.js';
import type { LogFiles } from '../log/files.js';
import type { Logger } from '../log/log.js';
import type { Pool } from '../pool/types.js';
import type { Exchange } from '../protocol/exchange.js';
import { turnNow } from '../util/turn.js';

export class RequestObservers {
  readonly board = new RequestBoard();
  readonly outcomes = new OutcomeCounter();
  private readonly logger: Logger;
  private readonly logFiles: LogFiles | undefined;
  private readonly pools: () => ReadonlyMap<string, Pool>;
  private access: AccessLogger | undefined;
  private figures = new Map<number, { memory: number | undefined; cpu: number | undefined }>();
  private figuresAt = -Infinity;
  /** The one onFinish of every exchange: board and access log, no closure per request. */
  readonly finish = (ex: Exchange): void => {
    // One clock read for all three (the turn's: src/util/turn.ts).
    const now = turnNow();
    this.board.finished(ex, now);
    this.outcomes.finished(ex, now);
    const a = this.access;
    if (a !== undefined) a(ex, now);
  };

  constructor(logger: Logger, logFiles: LogFiles | undefined, pools: () => ReadonlyMap<string, Pool>) {
    this.logger = logger;
    this.logFiles = logFiles;
    this.pools = pools;
  }

  onExchange(ex: Exchange): void {
    this.board.add(ex);
    ex.onFinish = this.finish;
  }

  /** The access log as `cfg` says (at start and after each reload). */
  configure(cfg: Config): void {
    const pools = cfg.pools;
    this.access = createAccessLog({
      logger: this.logger,
      enabled: cfg.log.access,
      format: cfg.log.accessFormat,
      file: this.logFiles?.access,
      slowMs: (name) => (name === undefined ? 0 : (pools.get(name)?.slowRequest ?? 0)),
      workerFigures: (pid) => this.workerFigures(pid),
    });
  }

  /** Latest memory/CPU sample of a worker, for %M and %C; pool snapshots read at most once a second. */
  private workerFigures(pid: number): { memory: number | undefined; cpu: number | undefined } | undefined {
    const now = performance.now();
    if (now - this.figuresAt > 1000) {
      this.figuresAt = now;
      this.figures = new Map();
      for (const p of this.pools().values()) {
        for (const w of p.snapshot().workers) {
          const m = (w as { memory?: { pss?: number; rss?: number; cpu?: number } }).memory;
          if (m !== undefined) this.figures.set(w.pid, { memory: m.pss ?? m.rss, cpu: m.cpu });
        }
      }
    }
    return this.figures.get(pid);
  }
}
