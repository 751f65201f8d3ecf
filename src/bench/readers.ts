/**
 * Reply readers: one per protocol, pure (bytes in, "complete?" out), reused across the
 * requests of a connection. Any throw from push() means bytes that are not the
 * protocol; the connection counts it as a protocol error and closes.
 */
import { CgiResponseHeadParser } from '../protocol/cgi-response.js';
import { FcgiDecoder, RecordType, type FcgiRecord } from '../protocol/fastcgi.js';
import { HttpResponseParser } from './http-response.js';
import { FCGI_REQUEST_ID } from './wire.js';

export interface ReplyReader {
  /** Status of the reply (0 until the head was read). */
  readonly status: number;
  /** Bytes of the reply body (after the head). */
  readonly bodyBytes: number;
  /** Whether this connection may carry another request after the reply. */
  readonly reusable: boolean;
  /** Readies for the next reply; `fresh`: on a new connection. */
  reset(fresh: boolean): void;
  /** True when the reply is complete. */
  push(chunk: Buffer): boolean;
  /** The peer closed; true when that completes the reply. */
  eof(): boolean;
}

export class ReplyProtocolError extends Error {
  override name = 'ReplyProtocolError';
}

/** FastCGI: STDOUT holds a CGI head then the body; END_REQUEST ends the reply. */
export class FcgiReplyReader implements ReplyReader {
  status = 0;
  bodyBytes = 0;
  readonly reusable: boolean;
  private decoder: FcgiDecoder;
  private head = new CgiResponseHeadParser();
  private ended = false;
  private readonly onRecord = (rec: FcgiRecord): void => this.record(rec);

  constructor(keepConn: boolean) {
    this.reusable = keepConn;
    this.decoder = new FcgiDecoder(this.onRecord);
  }

  reset(fresh: boolean): void {
    this.status = 0;
    this.bodyBytes = 0;
    this.ended = false;
    this.head = new CgiResponseHeadParser();
    if (fresh) this.decoder = new FcgiDecoder(this.onRecord);
  }

  push(chunk: Buffer): boolean {
    this.decoder.push(chunk);
    return this.ended;
  }

  eof(): boolean {
    return this.ended;
  }

  private record(rec: FcgiRecord): void {
    if (this.ended || rec.requestId !== FCGI_REQUEST_ID) return;
    if (rec.type === RecordType.Stdout) {
      if (rec.content.length === 0) return;
      if (this.status !== 0) {
        this.bodyBytes += rec.content.length;
        return;
      }
      const r = this.head.push(rec.content);
      if (r !== undefined) {
        this.status = r.head.status;
        this.bodyBytes += r.rest.length;
      }
    } else if (rec.type === RecordType.EndRequest) {
      // A responder that ended without a complete CGI head sent no usable reply.
      if (this.status === 0) throw new ReplyProtocolError('FastCGI END_REQUEST before a complete CGI response head');
      this.ended = true;
    }
  }
}

const HTTP_PREFIX = Buffer.from('HTTP/', 'latin1');

/**
 * SCGI: the reply is a CGI head (or an HTTP status line and headers, which nginx also
 * accepts from SCGI servers) and a body that runs to the end of the connection.
 */
export class ScgiReplyReader implements ReplyReader {
  status = 0;
  bodyBytes = 0;
  readonly reusable = false;
  private cgi = new CgiResponseHeadParser();
  private http: HttpResponseParser | undefined;
  private sniff: Buffer | undefined;

  reset(): void {
    this.status = 0;
    this.bodyBytes = 0;
    this.cgi = new CgiResponseHeadParser();
    this.http = undefined;
    this.sniff = undefined;
  }

  push(chunk: Buffer): boolean {
    if (this.status !== 0) {
      this.bodyBytes += chunk.length;
      return false;
    }
    if (this.http !== undefined) return this.pushHttp(chunk);
    if (!this.cgi.midHead) {
      // Decide between CGI and HTTP on the first 5 bytes, however they were split.
      const start = this.sniff === undefined ? chunk : Buffer.concat([this.sniff, chunk]);
      if (start.length < HTTP_PREFIX.length && HTTP_PREFIX.subarray(0, start.length).equals(start)) {
        this.sniff = start;
        return false;
      }
      this.sniff = undefined;
      if (start.subarray(0, HTTP_PREFIX.length).equals(HTTP_PREFIX)) {
        this.http = new HttpResponseParser();
        // Framing headers do not matter here: the body runs to EOF.
        this.http.reset(false);
        return this.pushHttp(start);
      }
      chunk = start;
    }
    const r = this.cgi.push(chunk);
    if (r !== undefined) {
      this.status = r.head.status;
      this.bodyBytes += r.rest.length;
    }
    return false;
  }

  private pushHttp(chunk: Buffer): boolean {
    const p = this.http!;
    p.push(chunk);
    if (p.status !== 0) {
      this.status = p.status;
      this.bodyBytes = p.bodyBytes;
    }
    return false;
  }

  eof(): boolean {
    return this.status !== 0;
  }
}

export class HttpReplyReader implements ReplyReader {
  private readonly p = new HttpResponseParser();
  private readonly noBody: boolean;
  private readonly keepAlive: boolean;

  constructor(noBody: boolean, keepAlive: boolean) {
    this.noBody = noBody;
    this.keepAlive = keepAlive;
    this.p.reset(noBody);
  }

  get status(): number {
    return this.p.status;
  }

  get bodyBytes(): number {
    return this.p.bodyBytes;
  }

  get reusable(): boolean {
    return this.keepAlive && this.p.keepAlive;
  }

  reset(): void {
    this.p.reset(this.noBody);
  }

  push(chunk: Buffer): boolean {
    return this.p.push(chunk);
  }

  eof(): boolean {
    return this.p.eof();
  }
}
