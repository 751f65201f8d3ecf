/**
 * A backend's FastCGI STDERR output, for front ends whose protocol has no stream for it
 * (SCGI, HTTP): warn lines in our log, split at '\n' and cut at MAX_LINE_BYTES, through
 * the same TokenBucket as worker output (one bucket per listener), so a script that
 * writes a warning per loop iteration cannot flood the log or slow the event loop.
 * While lines are dropped, one line a second says how many.
 */
import type { Logger } from '../log/log.js';
import { DROP_REPORT_INTERVAL_MS, MAX_LINE_BYTES } from '../worker/output.js';
import { TokenBucket } from '../worker/rate-limit.js';

const NL = 0x0a;
const CR = 0x0d;

export class BackendStderrLog {
  private readonly bucket: TokenBucket;
  private logger: Logger;
  private timer: NodeJS.Timeout | undefined;

  constructor(logger: Logger, bucket: TokenBucket = new TokenBucket()) {
    this.logger = logger;
    this.bucket = bucket;
  }

  /** Logs the lines of one STDERR chunk; `uri` names the request. */
  write(logger: Logger, remote: string, uri: string | undefined, chunk: Buffer): void {
    this.logger = logger;
    let start = 0;
    while (start < chunk.length) {
      let nl = chunk.indexOf(NL, start);
      if (nl < 0) nl = chunk.length;
      let end = nl > start && chunk[nl - 1] === CR ? nl - 1 : nl;
      if (end > start) {
        if (this.bucket.take()) {
          const cut = end - start > MAX_LINE_BYTES;
          if (cut) end = start + MAX_LINE_BYTES;
          const line = chunk.toString('utf8', start, end) + (cut ? ' …(truncated)' : '');
          logger.warn({ remote, uri, stderr: line }, 'backend wrote to stderr');
        } else {
          this.armReport();
        }
      }
      start = nl + 1;
    }
  }

  private armReport(): void {
    if (this.timer !== undefined) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const n = this.bucket.takeDropped();
      if (n > 0) this.logger.warn({ dropped: n }, `backend stderr rate-limited: ${n} line${n === 1 ? '' : 's'} dropped`);
    }, DROP_REPORT_INTERVAL_MS);
    this.timer.unref();
  }
}

const perListener = new WeakMap<object, BackendStderrLog>();

/** The rate-limited STDERR log of one listener (any object that lives as long as it). */
export function backendStderrLog(listener: object, logger: Logger): BackendStderrLog {
  let l = perListener.get(listener);
  if (l === undefined) {
    l = new BackendStderrLog(logger);
    perListener.set(listener, l);
  }
  return l;
}
