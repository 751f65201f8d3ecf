/**
 * One request on its way through fcgi-pm, independent of the protocols on either side.
 *
 * The front end creates an Exchange once it has the request variables, pushes the
 * request body into it, and implements the ResponseSink that the response goes to.
 * The pool queues it and hands it to an upstream connection, which consumes the body
 * and calls the respond* methods. Both directions carry back-pressure:
 *   body:     pushBody() returns false → front end pauses its socket until onBodyDrain.
 *   response: respondBody() returns false → upstream pauses its socket until onResponseDrain.
 *
 * Pure: no sockets, no timers.
 */
import type { ProxyError } from '../errors.js';
import type { CgiParams } from './params.js';
import { Role } from './fastcgi.js';
import { clearArray } from '../util/clear-array.js';

/** A parsed CGI response head ("Status: 404 Not Found\r\nContent-Type: ...\r\n\r\n"). */
export interface CgiResponseHead {
  status: number;
  /** Reason phrase from the Status header, or the standard one. */
  reason: string;
  /** Header lines except Status, in order, names as sent. */
  headers: Array<[string, string]>;
  /** The head exactly as the backend sent it, including the blank line. */
  raw: Buffer;
  /**
   * The first Content-Length header's value, -1 when there is none or it is not a plain
   * number; undefined when the maker of the head did not read it (then `headers` is read).
   */
  readonly contentLength?: number | undefined;
}

/** Implemented by each front end: where one request's response goes. */
export interface ResponseSink {
  head(head: CgiResponseHead): void;
  /** Returns false when the client is slow; the exchange then waits for responseDrained(). */
  body(chunk: Buffer): boolean;
  /**
   * Optional (a FastCGI front end): takes one whole STDOUT record of a FastCGI backend
   * (a view, header and padding included) to forward as it is; it may rewrite the
   * request id in place. Back-pressure as for body().
   */
  records?(raw: Buffer): boolean;
  /** Backend's FastCGI STDERR output. */
  stderr(chunk: Buffer): void;
  /**
   * The response is complete. `endRecords`, with records passed: the backend's own closing
   * records, its END_REQUEST after its empty STDOUT when it sent one (php-cgi sends none),
   * a view of its chunk, right after the last STDOUT record it passed when they came in
   * one chunk, which the sink may send on.
   */
  end(endRecords?: Buffer): void;
  /**
   * The request failed. Before head(): answer err.status with a short body.
   * After head(): the response is cut; end it as the protocol allows (close or abort).
   * Returns the body bytes it wrote (the access log's `bytes`), 0 when none.
   */
  fail(err: ProxyError): number;
}

export interface BodyConsumer {
  /** Returns false to ask for a pause; call exchange.bodyConsumerDrained() to resume. */
  data(chunk: Buffer): boolean;
  end(): void;
}

/** Body bytes kept so a request that never reached a backend can be sent to another. */
export const BODY_REPLAY_LIMIT = 64 * 1024;
/** Body bytes buffered while waiting in the queue before the front end is asked to pause. */
export const BODY_PENDING_HIGH_WATER = 64 * 1024;

/** allowed: a grant; cached: a kept grant; denied: the authorizer's answer went to the client; failed: 503. */
export type AuthorizationOutcome = 'allowed' | 'cached' | 'denied' | 'failed';

let nextExchangeId = 1;

const EMPTY = Buffer.alloc(0);

export type ExchangeState = 'pending' | 'responding' | 'done' | 'failed' | 'aborted';

export class Exchange {
  readonly id = nextExchangeId++;
  readonly params: CgiParams;
  readonly sink: ResponseSink;
  /** performance.now() at creation. */
  readonly startedAt: number;
  /** Front-end protocol, for logs: 'fastcgi' | 'scgi' | 'http'. */
  readonly frontend: string;
  /**
   * FastCGI role the backend is asked to play (Role.Responder or Role.Authorizer); set
   * by whoever creates the exchange. An authorizer's answer is judged by the upstream
   * (src/protocol/authorizer.ts): a granting answer reaches the sink without its body.
   */
  role: number = Role.Responder;
  /**
   * An authorizer's grant, as the upstream judged it before respondHead(): its variables
   * as a flat [name, value, ...] override. Undefined for a deny and for any other role.
   */
  granted: readonly string[] | undefined;

  state: ExchangeState = 'pending';
  /** Its place in the status board's set of requests in flight (src/protocol/dense-set.ts). */
  boardSlot = -1;
  /** The listener's address that took it (set by the front end), for status counters. */
  listener: string | undefined;
  /** Set by the pool, for logs and status. */
  pool: string | undefined;
  backend: string | undefined;
  workerPid: number | undefined;
  /** ms it waited in a pool's queue in all (set as it leaves the queue), for the queue-wait histogram. */
  queuedMs = 0;
  /**
   * What the authorizer of the pool asked for this request said (src/frontend/authorize.ts),
   * for the access log and status; undefined when none was asked.
   */
  authorization: AuthorizationOutcome | undefined;
  /** Response facts, for the access log. */
  status = 0;
  bytesOut = 0;
  /**
   * Body bytes the response head announced (Content-Length) and the client has not been
   * given yet; -1 when the head announced none. At 0 the response is complete for the
   * client, whatever the backend still has to say about its end.
   */
  bodyDue = -1;
  error: ProxyError | undefined;
  /**
   * Set by a FastCGI upstream before respondHead() when the response comes as the
   * backend's own STDOUT records (respondRecords): the sink then writes nothing for the
   * head, whose bytes are in those records.
   */
  recordsPassed = false;

  /** Front end: called when the body consumer wants more after pushBody() returned false. */
  onBodyDrain: (() => void) | undefined;
  /** Upstream: called when the client drained after respondBody() returned false. */
  onResponseDrain: (() => void) | undefined;
  /** Whoever holds the exchange (queue, upstream) sets this to learn of a client abort. */
  onAbort: (() => void) | undefined;
  /** Called once when the exchange reaches done, failed or aborted (access log). */
  onFinish: ((ex: Exchange) => void) | undefined;

  // Request body. `chunks[delivered..]` are waiting for the consumer; `chunks[head..delivered)`
  // were delivered and are kept only while `replayable` so a retry can send them again;
  // `chunks[0..head)` are released slots. Dropping advances `head` instead of shifting the
  // array (a shift per chunk made delivery quadratic); the array is compacted in place
  // once `head` reaches half its length, so each chunk moves at most a few times.
  private chunks: Buffer[] = [];
  private head = 0;
  private delivered = 0;
  private pendingBytes = 0;
  private keptBytes = 0;
  private bodyEnded = false;
  private sawBody = false;
  private replayable = true;
  private consumer: BodyConsumer | undefined;
  private consumerPaused = false;
  private frontendPaused = false;

  constructor(params: CgiParams, sink: ResponseSink, frontend: string, now: number) {
    this.params = params;
    this.sink = sink;
    this.frontend = frontend;
    this.startedAt = now;
  }

  get finished(): boolean {
    return this.state === 'done' || this.state === 'failed' || this.state === 'aborted';
  }

  /** True until a response byte went to the client; a failure before then can be answered with an error page. */
  get responseStarted(): boolean {
    return this.state !== 'pending';
  }

  // ---- front-end side -------------------------------------------------------------

  /** Returns false when the front end should stop reading this request's body. */
  pushBody(chunk: Buffer): boolean {
    if (this.finished || this.bodyEnded || chunk.length === 0) return true;
    this.chunks.push(chunk);
    this.sawBody = true;
    this.pendingBytes += chunk.length;
    this.flushBody();
    const ok = this.consumer ? !this.consumerPaused : this.pendingBytes < BODY_PENDING_HIGH_WATER;
    if (!ok) this.frontendPaused = true;
    return ok;
  }

  endBody(): void {
    if (this.bodyEnded) return;
    this.bodyEnded = true;
    this.flushBody();
  }

  get bodyComplete(): boolean {
    return this.bodyEnded;
  }

  /** The body is over and had no bytes: an upstream may send its end with the request head. */
  get noBody(): boolean {
    return this.bodyEnded && !this.sawBody;
  }

  /**
   * The client went away or sent FCGI_ABORT_REQUEST. After the whole announced body was
   * handed to its connection, that is no abort: nginx closes (SCGI) or reuses (FastCGI) its connection as
   * soon as it has Content-Length bytes, which may be before the backend's end reaches
   * us. The request is then done, and its holder lets the backend end it as usual.
   */
  abort(): void {
    if (this.finished) return;
    if (this.state === 'responding' && this.sentInFull()) {
      this.state = 'done';
      this.finish();
      return;
    }
    this.state = 'aborted';
    this.clearBody();
    const h = this.onAbort;
    this.onAbort = undefined;
    h?.();
    this.finish();
  }

  /**
   * The front end gives up on the client (its body stalled for body_timeout): whoever
   * holds the exchange is told as on abort (the backend request is cancelled), and the
   * client is answered with `err` (a 408) if it is still listening.
   */
  failByClient(err: ProxyError): void {
    this.failWith(err, true);
  }

  /** The front end's socket drained after sink.body() returned false. */
  responseDrained(): void {
    this.onResponseDrain?.();
  }

  // ---- upstream side --------------------------------------------------------------

  /** Starts delivering the body (from its first byte) to an upstream connection. */
  consumeBody(consumer: BodyConsumer): void {
    this.consumer = consumer;
    this.consumerPaused = false;
    this.flushBody();
  }

  bodyConsumerDrained(): void {
    this.consumerPaused = false;
    this.flushBody();
  }

  /**
   * After a failure that never reached the backend: detach the consumer and rewind
   * the body so another backend can get it. False if the body was not kept.
   */
  rewind(): boolean {
    this.consumer = undefined;
    if (!this.replayable || this.responseStarted || this.finished) return false;
    for (let i = this.head; i < this.delivered; i++) this.pendingBytes += this.chunks[i]!.length;
    this.delivered = this.head;
    this.keptBytes = 0;
    return true;
  }

  respondHead(head: CgiResponseHead): void {
    if (this.finished) return;
    this.state = 'responding';
    this.status = head.status;
    // Only the replay copies go: a backend may answer before it has read the whole
    // body, and the chunks not yet delivered must still reach it.
    this.replayable = false;
    this.dropDelivered();
    this.keptBytes = 0;
    this.bodyDue = announcedLength(head);
    this.sink.head(head);
  }

  respondBody(chunk: Buffer): boolean {
    if (this.finished) return true;
    this.bytesOut += chunk.length;
    if (this.bodyDue > 0) this.bodyDue = Math.max(0, this.bodyDue - chunk.length);
    return this.sink.body(chunk);
  }

  /** One backend STDOUT record for sink.records(); `bodyBytes` of its content are body (not head). */
  respondRecords(raw: Buffer, bodyBytes: number): boolean {
    if (this.finished) return true;
    this.bytesOut += bodyBytes;
    if (this.bodyDue > 0) this.bodyDue = Math.max(0, this.bodyDue - bodyBytes);
    return this.sink.records!(raw);
  }

  respondStderr(chunk: Buffer): void {
    if (!this.finished) this.sink.stderr(chunk);
  }

  /** `endRecords`: see ResponseSink.end. */
  respondEnd(endRecords?: Buffer): void {
    if (this.finished) return;
    this.state = 'done';
    this.sink.end(endRecords);
    this.finish();
  }

  respondError(err: ProxyError): void {
    this.failWith(err, false);
  }

  /** The response's whole body went to the sink: all it announced, or none when it has none (HEAD, 204, 304). */
  private sentInFull(): boolean {
    if (this.bodyDue === 0) return true;
    const s = this.status;
    return s === 204 || s === 304 || this.params.get('REQUEST_METHOD') === 'HEAD';
  }

  /** `tellHolder`: the failure comes from the front end, so the holder hears of it as of an abort. */
  private failWith(err: ProxyError, tellHolder: boolean): void {
    if (this.finished) return;
    this.error = err;
    if (!this.responseStarted) this.status = err.status;
    this.state = 'failed';
    this.clearBody();
    if (tellHolder) {
      const h = this.onAbort;
      this.onAbort = undefined;
      h?.();
    }
    this.bytesOut += this.sink.fail(err);
    this.finish();
  }

  private flushBody(): void {
    const c = this.consumer;
    if (!c || this.finished) return;
    // c.data() may rewind, abort or fail the exchange; stop as soon as c is no longer the consumer.
    while (this.consumer === c && !this.consumerPaused && this.delivered < this.chunks.length) {
      const chunk = this.chunks[this.delivered]!;
      this.pendingBytes -= chunk.length;
      this.delivered++;
      if (this.replayable && this.keptBytes + chunk.length <= BODY_REPLAY_LIMIT) {
        this.keptBytes += chunk.length;
      } else {
        // Too much to keep: drop what was delivered so memory stays bounded.
        this.replayable = false;
        this.dropDelivered();
      }
      if (!c.data(chunk)) this.consumerPaused = true;
    }
    if (this.consumer !== c) return;
    if (!this.replayable) this.dropDelivered();
    if (this.delivered === this.chunks.length && this.bodyEnded && !this.consumerPaused) {
      this.consumer = undefined;
      c.end();
    }
    if (this.frontendPaused && !this.consumerPaused && this.pendingBytes < BODY_PENDING_HIGH_WATER) {
      this.frontendPaused = false;
      this.onBodyDrain?.();
    }
  }

  /** Releases the delivered chunks (no replay any more); O(1) amortized per chunk. */
  private dropDelivered(): void {
    const chunks = this.chunks;
    const d = this.delivered;
    if (d === this.head) return;
    if (d === chunks.length) {
      clearArray(chunks);
      this.head = this.delivered = 0;
      return;
    }
    for (let i = this.head; i < d; i++) chunks[i] = EMPTY;
    this.head = d;
    if (d * 2 >= chunks.length) {
      // Compact in place: the remaining chunks are at most as many as the released ones.
      chunks.copyWithin(0, d);
      chunks.length -= d;
      this.head = this.delivered = 0;
    }
  }

  private clearBody(): void {
    this.chunks = [];
    this.head = this.delivered = 0;
  }

  private finish(): void {
    // Nothing is delivered to an upstream after the exchange ended.
    this.consumer = undefined;
    const f = this.onFinish;
    this.onFinish = undefined;
    f?.(this);
  }
}

/** A Content-Length value as a count of bytes, or -1 when it is not a plain number. */
export function contentLengthOf(value: string): number {
  return /^\d{1,15}$/.test(value) ? Number(value) : -1;
}

/**
 * The head's Content-Length, or -1 when it has none (or one that is not a plain number).
 * A parsed head read it with its status, so its header strings need not be made.
 */
export function announcedLength(head: CgiResponseHead): number {
  const known = head.contentLength;
  if (known !== undefined) return known;
  const headers = head.headers;
  for (let i = 0; i < headers.length; i++) {
    const [name, value] = headers[i]!;
    if (name.length === 14 && name.toLowerCase() === 'content-length') return contentLengthOf(value);
  }
  return -1;
}
