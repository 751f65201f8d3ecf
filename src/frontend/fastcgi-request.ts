/**
 * One FastCGI request on a front-end connection, and the ResponseSink its exchange
 * answers through. The session owns the socket; this object only knows its request id
 * and where it is in its life.
 */
import type { ProxyError } from '../errors.js';
import { RecordType, type ParamsCollector } from '../protocol/fastcgi.js';
import type { CgiResponseHead, Exchange, ResponseSink } from '../protocol/exchange.js';
import { DeadlineNode, type ClientDeadlines, type ClientTimed } from './client-deadlines.js';

/** What a request asks of its connection; FcgiSession implements it. */
export interface FcgiConnection {
  readonly writer: FcgiOutput;
  endRequest(r: FcgiRequest, endRecords?: Buffer): void;
  headerTimedOut(r?: FcgiRequest): void;
  bodyTimedOut(r?: FcgiRequest): void;
  answerError(r: FcgiRequest, status: number, code: string, retryAfter: number | undefined): number;
  cutResponse(r: FcgiRequest, err: ProxyError): void;
  bodyDrained(r: FcgiRequest): void;
}

/** The writes a request makes on its connection's output; FcgiWriter (fastcgi-writer.ts) implements it. */
export interface FcgiOutput {
  head(r: FcgiRequest, raw: Buffer): void;
  body(r: FcgiRequest, chunk: Buffer): boolean;
  record(r: FcgiRequest, raw: Buffer): boolean;
  stream(type: number, id: number, data: Buffer): boolean;
}

/**
 * params:  collecting PARAMS records, no exchange yet
 * running: exchange dispatched; STDIN flows into it until the empty STDIN record
 * ended:   END_REQUEST written or the request dropped; the session forgot it
 */
export type FcgiRequestState = 'params' | 'running' | 'ended';

export class FcgiRequest implements ResponseSink, ClientTimed {
  readonly id: number;
  readonly role: number;
  readonly keepConn: boolean;
  readonly session: FcgiConnection;
  state: FcgiRequestState = 'params';
  collector: ParamsCollector | undefined;
  exchange: Exchange | undefined;
  headSent = false;
  /** The response head, held until the first body bytes or the end join it in one record (same tick). */
  pendingHead: Buffer | undefined;
  /** The first body bytes, held with pendingHead (small ones only). */
  pendingBody: Buffer | undefined;
  /** A small backend record, held like pendingHead so that it leaves with the end as one buffer. */
  pendingRecord: Buffer | undefined;
  stdinDone = false;
  /** pushBody() returned false; the session's socket is paused on our behalf. */
  bodyPaused = false;
  /** body() returned false; waiting for the socket's 'drain'. */
  awaitingDrain = false;
  /**
   * On the header list from BEGIN_REQUEST to the end of PARAMS, then on the body list until
   * the end of STDIN; made when first armed (a request head and a GET's empty STDIN that
   * come in one chunk, as front ends send them, are never on a list).
   */
  private node: DeadlineNode<ClientTimed> | undefined;

  constructor(session: FcgiConnection, id: number, role: number, keepConn: boolean, collector: ParamsCollector) {
    this.session = session;
    this.id = id;
    this.role = role;
    this.keepConn = keepConn;
    this.collector = collector;
  }

  get deadline(): DeadlineNode<ClientTimed> {
    return (this.node ??= new DeadlineNode<ClientTimed>(this));
  }

  /** Off whichever deadline list it is on, if it was ever armed. */
  stopDeadline(deadlines: ClientDeadlines): void {
    const n = this.node;
    if (n !== undefined) deadlines.stop(n);
  }

  head(head: CgiResponseHead): void {
    this.headSent = true;
    // Passed records carry the head's bytes themselves.
    if (this.exchange?.recordsPassed !== true) this.session.writer.head(this, head.raw);
  }

  body(chunk: Buffer): boolean {
    return this.session.writer.body(this, chunk);
  }

  records(raw: Buffer): boolean {
    return this.session.writer.record(this, raw);
  }

  stderr(chunk: Buffer): void {
    this.session.writer.stream(RecordType.Stderr, this.id, chunk);
  }

  end(endRecords?: Buffer): void {
    this.session.endRequest(this, endRecords);
  }

  headerTimedOut(): void {
    this.session.headerTimedOut(this);
  }

  bodyTimedOut(): void {
    this.session.bodyTimedOut(this);
  }

  fail(err: ProxyError): number {
    if (!this.headSent) return this.session.answerError(this, err.status, err.code, err.retryAfter);
    this.session.cutResponse(this, err);
    return 0;
  }
}

/** Exchange.onBodyDrain for every FastCGI exchange: one shared function, `this` is the exchange. */
export function fcgiBodyDrained(this: Exchange): void {
  const r = this.sink as FcgiRequest;
  r.session.bodyDrained(r);
}

/**
 * A connection's requests in flight by id. Front ends send one at a time on a connection
 * (nginx, lighttpd, Apache): that one lives in a field, and only a multiplexing client's
 * further requests go into a Map. A long-lived Map with a set and a delete per request
 * would churn its hash tables in V8's old generation (src/protocol/dense-set.ts).
 */
export class RequestTable {
  private one: FcgiRequest | undefined;
  private more: Map<number, FcgiRequest> | undefined;

  get size(): number {
    return (this.one === undefined ? 0 : 1) + (this.more?.size ?? 0);
  }

  get(id: number): FcgiRequest | undefined {
    const one = this.one;
    if (one !== undefined && one.id === id) return one;
    return this.more?.get(id);
  }

  has(id: number): boolean {
    return this.get(id) !== undefined;
  }

  /** `r.id` is not in the table (the session checks). */
  add(r: FcgiRequest): void {
    if (this.one === undefined) this.one = r;
    else (this.more ??= new Map()).set(r.id, r);
  }

  delete(r: FcgiRequest): void {
    if (this.one === r) this.one = undefined;
    else if (this.more?.get(r.id) === r) this.more.delete(r.id);
  }

  /** The requests now, as a copy. */
  values(): FcgiRequest[] {
    const out: FcgiRequest[] = [];
    if (this.one !== undefined) out.push(this.one);
    if (this.more !== undefined) for (const r of this.more.values()) out.push(r);
    return out;
  }

  clear(): void {
    this.one = undefined;
    this.more = undefined;
  }
}
