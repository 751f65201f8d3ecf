/**
 * A backend's FastCGI STDERR output, for front ends whose protocol has no stream for it
 * (SCGI, HTTP): warn entries in our log, split at '\n' and cut at MAX_LINE_BYTES, lines
 * that arrive together grouped into one entry (a PHP warning over several lines, a
 * traceback: src/log/entries.ts), through the same RateLimitedLog as worker output (one
 * bucket per listener), so a script that writes a warning per loop iteration cannot
 * flood the log or slow the event loop. While entries are dropped, one line a second
 * says how many.
 */
import { ErrorCodes } from '../errors.js';
import { EntryGrouper } from '../log/entries.js';
import type { Logger } from '../log/log.js';
import { LineSplitter, RateLimitedLog } from '../worker/output.js';
import { TokenBucket } from '../util/token-bucket.js';

interface Source {
  logger: Logger;
  remote: string;
  uri: string | undefined;
}

export class BackendStderrLog {
  private readonly out: RateLimitedLog;
  /** The request whose entry is open: another request's output starts a new entry. */
  private source: Source | undefined;
  private readonly entries = new EntryGrouper((text) => this.log(text));
  private readonly split = new LineSplitter((line) => this.entries.add(line));

  constructor(logger: Logger, bucket: TokenBucket = new TokenBucket()) {
    this.out = new RateLimitedLog(logger, bucket, 'backend stderr');
  }

  /** Logs one STDERR chunk (a record: its last line needs no '\n'); `uri` names the request. */
  write(logger: Logger, remote: string, uri: string | undefined, chunk: Buffer): void {
    const s = this.source;
    if (s !== undefined && (s.remote !== remote || s.uri !== uri)) this.entries.flush();
    this.source = { logger, remote, uri };
    this.out.logger = logger;
    this.entries.beginRead();
    this.split.push(chunk);
    this.split.end();
    this.entries.endRead();
  }

  private log(text: string): void {
    const s = this.source;
    if (s !== undefined && this.out.admit()) s.logger.warn({ code: ErrorCodes.BACKEND_STDERR, remote: s.remote, uri: s.uri, stderr: text }, 'backend wrote to stderr');
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
