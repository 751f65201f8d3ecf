/**
 * A worker's stdout/stderr → log entries: split at '\n' (bytes, so UTF-8 is never cut
 * mid-character), long lines truncated, lines that arrive together grouped into one
 * entry (src/log/entries.ts), rate-limited by a shared TokenBucket. While entries are
 * being dropped, one line later says how many ("N entries dropped").
 */
import type { Readable } from 'node:stream';
import { ErrorCodes } from '../errors.js';
import { EntryGrouper } from '../log/entries.js';
import type { Logger } from '../log/log.js';
import { TokenBucket } from '../util/token-bucket.js';

export const MAX_LINE_BYTES = 4096;
const NL = 0x0a;

export type OutputLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';

/** Splits one byte stream into lines and hands each to `emit`; pure apart from the callback. */
export class LineSplitter {
  private partial: Buffer | undefined;
  private skipping = false; // inside an over-long line whose head was already emitted
  constructor(
    private readonly emit: (line: string) => void,
    private readonly maxLine = MAX_LINE_BYTES,
  ) {}

  push(chunk: Buffer): void {
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(NL, start);
      if (nl < 0) break;
      this.add(chunk.subarray(start, nl), true);
      start = nl + 1;
    }
    if (start < chunk.length) this.add(chunk.subarray(start), false);
  }

  /** Flushes a last line without newline. */
  end(): void {
    if (this.partial !== undefined && !this.skipping) this.line(this.partial);
    this.partial = undefined;
    this.skipping = false;
  }

  private add(piece: Buffer, complete: boolean): void {
    if (this.skipping) {
      if (complete) this.skipping = false;
      return;
    }
    const buf = this.partial === undefined ? piece : Buffer.concat([this.partial, piece]);
    this.partial = undefined;
    if (buf.length > this.maxLine) {
      this.line(buf.subarray(0, this.maxLine), ' …(truncated)');
      this.skipping = !complete;
      return;
    }
    if (complete) this.line(buf);
    else this.partial = Buffer.from(buf); // own the bytes: the chunk may be reused
  }

  private line(buf: Buffer, suffix = ''): void {
    let end = buf.length;
    if (end > 0 && buf[end - 1] === 0x0d) end--;
    if (end === 0 && suffix === '') return; // blank lines say nothing
    this.emit(buf.toString('utf8', 0, end) + suffix);
  }
}

/** Drops are reported at most this often while a flood lasts. */
export const DROP_REPORT_INTERVAL_MS = 1000;

/**
 * Logs entries through a limiter. Drops are reported by a timer (unref'd) at most once per
 * DROP_REPORT_INTERVAL_MS, and on flush(). One per worker, shared by stdout and stderr;
 * one per listener for backend STDERR (frontend/backend-stderr.ts).
 */
export class RateLimitedLog {
  private timer: NodeJS.Timeout | undefined;
  constructor(
    /** Replaceable: a worker rebinds it once its pid is known. */
    public logger: Logger,
    readonly limiter: TokenBucket = new TokenBucket(),
    /** Names the output in the drop report. */
    private readonly what = 'worker output',
  ) {}

  /** True if one more entry may be logged now; otherwise it is counted for the drop report. */
  admit(): boolean {
    if (this.limiter.take()) return true;
    this.armReport();
    return false;
  }

  write(level: OutputLevel, stream: string, text: string): void {
    if (!this.admit()) return;
    if (level === 'warn' || level === 'error') this.logger[level]({ code: ErrorCodes.WORKER_STDERR, stream }, text);
    else this.logger[level]({ stream }, text);
  }

  /** Logs the pending drop count now, if any. */
  flush(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.reportDropped();
  }

  private reportDropped(): void {
    const n = this.limiter.takeDropped();
    if (n > 0) this.logger.warn({ code: ErrorCodes.LOG_RATE_LIMITED, dropped: n }, `${this.what} rate-limited: ${n} ${n === 1 ? 'entry' : 'entries'} dropped`);
  }

  private armReport(): void {
    if (this.timer !== undefined) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.reportDropped();
    }, DROP_REPORT_INTERVAL_MS);
    this.timer.unref();
  }
}

/** Wires a child's output stream to the log. */
export function captureOutput(stream: Readable, out: RateLimitedLog, name: string, level: OutputLevel): void {
  const entries = new EntryGrouper((text) => out.write(level, name, text));
  const split = new LineSplitter((line) => entries.add(line));
  stream.on('data', (chunk: Buffer) => {
    entries.beginRead();
    split.push(chunk);
    entries.endRead();
  });
  const end = (): void => {
    split.end();
    entries.flush();
  };
  stream.on('end', end);
  stream.on('error', end);
}
