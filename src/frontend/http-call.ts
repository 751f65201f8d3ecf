/**
 * One HTTP request through node:http: it becomes an Exchange once its CGI variables are
 * built, and this object is the exchange's ResponseSink, turning the CGI response back
 * into HTTP (status line and headers from the CGI head; node picks Content-Length,
 * chunked or close-delimited framing, and drops bodies of HEAD responses).
 *
 * Listeners on req/res are shared module functions (`this` is the emitter), so a request
 * costs no closures.
 */
import { DenseSet } from '../util/dense-set.js';
import { DeadlineNode } from '../util/deadline-list.js';
import { backendStderrLog } from './backend-stderr.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { ErrorCodes, type ProxyError } from '../errors.js';
import type { CgiResponseHead, Exchange, ResponseSink } from '../protocol/exchange.js';
import type { FrontendEnv } from './env.js';
import { afterFreshGrace, type Session } from './listener-base.js';
import { remoteText } from './listen.js';
import type { BufferedBody } from './request-body.js';
import { HttpRejectCodes, errorText } from './request-errors.js';

const kCall = Symbol('fcgi-pm.httpCall');
const kConn = Symbol('fcgi-pm.httpConn');

type WithCall = { [kCall]?: HttpCall };
type WithConn = { [kConn]?: HttpConnection };

/** Response headers that describe one hop; node sets its own. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'te', 'trailer']);

/** After our FIN, how long a draining connection waits for the client's. */
const FIN_WAIT_MS = 2000;

function finishIfSilent(c: HttpConnection): void {
  c.finishIfSilent();
}

/** One client connection, for graceful close and the idle/stall and head timeouts. */
export class HttpConnection implements Session {
  listenerSlot = -1;
  readonly env: FrontendEnv;
  readonly socket: Socket;
  readonly remote: string;
  /** Requests begun on this connection, and those not finished yet. */
  requests = 0;
  /** Kept alive for many requests: a dense set, not a Set churned per request (src/protocol/dense-set.ts). */
  readonly calls = new DenseSet<HttpCall, 'connSlot'>('connSlot');
  draining = false;
  /** On the listener's first-head deadline list from the accept until the first head came whole. */
  readonly firstHead = new DeadlineNode<HttpConnection>(this);

  constructor(env: FrontendEnv, socket: Socket) {
    this.env = env;
    this.socket = socket;
    this.remote = remoteText(socket.remoteAddress, socket.remotePort);
    (socket as Socket & WithConn)[kConn] = this;
    env.listener.add(this);
  }

  static of(socket: Socket): HttpConnection | undefined {
    return (socket as Socket & WithConn)[kConn];
  }

  drain(): void {
    this.draining = true;
    if (this.calls.size > 0) return;
    // Accepted but silent: its first request may be on the wire (listener-base.ts).
    if (this.requests === 0 && this.socket.bytesRead === 0) afterFreshGrace(finishIfSilent, this);
    else this.finish();
  }

  /** @internal timer target. */
  finishIfSilent(): void {
    if (this.calls.size === 0 && this.requests === 0 && this.socket.bytesRead === 0) this.finish();
  }

  /**
   * Draining and nothing in flight: our side closes and the listener stops counting us at
   * once; only the client's FIN is left, and a client that never sends it is cut after
   * FIN_WAIT_MS (a stop must not wait on it).
   */
  finish(): void {
    this.socket.end();
    this.socket.setTimeout(FIN_WAIT_MS);
    this.env.listener.remove(this);
  }

  destroy(): void {
    this.socket.destroy();
  }

  /**
   * A request body is due (true) or no longer (false): the socket timer runs at
   * body_timeout while the client owes body bytes, at idle_timeout otherwise.
   */
  bodyDue(due: boolean): void {
    if (due === this.awaitingBody) return;
    this.awaitingBody = due;
    const cfg = this.env.cfg;
    this.socket.setTimeout(due ? cfg.bodyTimeout : cfg.idleTimeout);
  }

  private awaitingBody = false;

  /** The socket saw no traffic for idle_timeout (body_timeout while a body is due). */
  onTimeout(): void {
    const log = this.env.listener.log;
    if (this.calls.size === 0) {
      if (this.requests === 0 && this.socket.bytesRead > 0) log.warn({ remote: this.remote, code: HttpRejectCodes.HEAD_TIMEOUT }, 'HTTP client stalled in its request head; closing');
      else log.debug({ remote: this.remote }, 'idle HTTP connection closed');
      this.socket.destroy();
      return;
    }
    for (const c of this.calls.snapshot()) {
      if (c.receivingBody) {
        log.warn({ remote: this.remote, code: HttpRejectCodes.BODY_TIMEOUT }, 'HTTP client stalled sending its request body; closing');
        this.socket.destroy();
        return;
      }
      const ex = c.exchange;
      if (ex === undefined || ex.finished) continue;
      if (c.awaitingDrain) {
        log.warn({ remote: this.remote, code: HttpRejectCodes.SEND_TIMEOUT }, 'HTTP client stopped reading its response; closing');
        this.socket.destroy();
        return;
      }
    }
    // Otherwise we are waiting for a backend; its read timeout covers that.
  }

  closed(): void {
    this.firstHead.list?.remove(this.firstHead);
    this.env.listener.remove(this);
  }

  /** A request head came whole (node parsed it). */
  headCame(): void {
    this.firstHead.list?.remove(this.firstHead);
  }

  /** header_timeout passed since the accept with no whole head: 408 when some of one came, as node answers later heads. */
  firstHeadTimedOut(): void {
    if (this.socket.destroyed) return;
    if (this.socket.bytesRead === 0) {
      this.env.listener.log.debug({ remote: this.remote }, 'HTTP connection sent nothing within header_timeout; closed');
      this.socket.destroy();
      return;
    }
    this.env.listener.log.warn({ remote: this.remote, code: HttpRejectCodes.HEAD_TIMEOUT, timeoutMs: this.env.cfg.headerTimeout }, 'HTTP request head not complete within header_timeout; answered 408');
    const text = '408 Request Timeout\n';
    this.socket.write(`HTTP/1.1 408 Request Timeout\r\nContent-Type: text/plain\r\nContent-Length: ${text.length}\r\nConnection: close\r\n\r\n${text}`);
    this.socket.destroySoon();
  }
}

export class HttpCall implements ResponseSink {
  /** Its place in its connection's calls. */
  connSlot = -1;
  readonly conn: HttpConnection;
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  exchange: Exchange | undefined;
  /** The response closed (client gone) before an exchange existed. */
  gone = false;
  bodyDone = false;
  bodyPaused = false;
  awaitingDrain = false;
  /** A chunked body read whole before dispatch; its temp file goes when the request ends. */
  buffered: BufferedBody | undefined;
  private drainHooked = false;
  /** The backend's head could not be sent as HTTP; we answered 502 and drop the rest. */
  private broken = false;

  constructor(conn: HttpConnection, req: IncomingMessage, res: ServerResponse) {
    this.conn = conn;
    this.req = req;
    this.res = res;
    (req as IncomingMessage & WithCall)[kCall] = this;
    (res as ServerResponse & WithCall)[kCall] = this;
    conn.requests++;
    conn.calls.add(this);
    res.on('close', onResClose);
  }

  /** Starts the exchange: body flows into it from now on. */
  attach(ex: Exchange): void {
    this.exchange = ex;
    ex.onBodyDrain = httpBodyDrained;
    const h = this.req.headers;
    this.bodyLeft = h['transfer-encoding'] !== undefined ? -1 : Number(h['content-length'] ?? 0);
    // End the body as soon as its last byte is here (or at once when there is none), not
    // on the stream's later 'end': the upstream then sends the end-of-stdin record in the
    // same write as the last bytes, before a backend can answer and close (php-cgi
    // exiting at PHP_FCGI_MAX_REQUESTS), which would make that write fail and lose the answer.
    if (this.bodyLeft === 0) ex.endBody();
    else this.conn.bodyDue(true);
    this.req.on('data', onReqData);
    this.req.on('end', onReqEnd);
  }

  /** Body bytes still expected by Content-Length; -1 when chunked (ends with the stream). */
  bodyLeft = -1;

  /** We are reading body bytes the client still owes, so its silence is a stall. */
  get receivingBody(): boolean {
    const ex = this.exchange;
    if (ex === undefined) return this.buffered !== undefined && !this.buffered.paused && !this.res.headersSent;
    return !ex.finished && !this.bodyDone && !this.bodyPaused;
  }

  /** Starts the exchange with the body `buffered` holds, complete. */
  attachBuffered(ex: Exchange): void {
    this.exchange = ex;
    this.bodyDone = true;
    ex.onBodyDrain = httpBodyDrained;
    this.buffered!.replay(
      (c) => ex.pushBody(c),
      () => ex.endBody(),
    );
  }

  /** Answers without an exchange (bad request before dispatch); `close` when the rest of the request is not read. */
  answerPlain(status: number, code: string, close = false): void {
    sendPlain(this.res, status, errorText(status, code), undefined, close || this.conn.draining);
  }

  // ---- ResponseSink -------------------------------------------------------------------

  head(head: CgiResponseHead): void {
    const res = this.res;
    const flat: string[] = [];
    for (const [name, value] of head.headers) {
      if (!HOP_BY_HOP.has(name.toLowerCase())) flat.push(name, value);
    }
    if (this.conn.draining) flat.push('Connection', 'close');
    try {
      res.writeHead(head.status, head.reason, flat);
    } catch (err) {
      this.broken = true;
      this.conn.env.listener.log.warn({ remote: this.conn.remote, code: ErrorCodes.BACKEND_PROTOCOL, err: (err as Error).message }, 'backend response head is not valid HTTP; answered 502');
      if (this.exchange) this.exchange.status = 502;
      sendPlain(res, 502, errorText(502, ErrorCodes.BACKEND_PROTOCOL), undefined, true);
    }
  }

  body(chunk: Buffer): boolean {
    if (this.broken) return true;
    const ok = this.res.write(chunk);
    if (!ok) {
      this.awaitingDrain = true;
      if (!this.drainHooked) {
        this.drainHooked = true;
        this.res.on('drain', onResDrain);
      }
    }
    return ok;
  }

  stderr(chunk: Buffer): void {
    const l = this.conn.env.listener;
    backendStderrLog(l, l.log).write(l.log, this.conn.remote, this.exchange?.params.get('REQUEST_URI'), chunk);
  }

  // The body goes first: once the answer is out the client may look for its temp file.
  end(): void {
    this.releaseBody();
    if (!this.broken) this.res.end();
  }

  fail(err: ProxyError): number {
    if (this.broken) return 0;
    this.releaseBody();
    if (this.res.headersSent) {
      // A clean end would make a cut body look complete (and cacheable) to the client.
      this.conn.env.listener.log.warn({ remote: this.conn.remote, code: err.code }, 'response failed after its head; cutting the connection');
      this.res.destroy();
      return 0;
    }
    return sendPlain(this.res, err.status, errorText(err.status, err.code), err.retryAfter, this.conn.draining);
  }

  /** The response is complete before the request body was read: read and drop the rest. */
  private releaseBody(): void {
    this.buffered?.discard();
    if (this.bodyPaused) {
      this.bodyPaused = false;
      this.req.resume();
    }
  }
}

/** Returns the body bytes sent (none for HEAD: node:http drops them). */
function sendPlain(res: ServerResponse, status: number, text: string, retryAfter: number | undefined, close: boolean): number {
  if (res.headersSent || res.destroyed) {
    res.destroy();
    return 0;
  }
  const body = Buffer.from(text, 'utf8');
  const headers: string[] = ['Content-Type', 'text/plain; charset=utf-8', 'Content-Length', String(body.length)];
  if (retryAfter !== undefined) headers.push('Retry-After', String(retryAfter));
  if (close) headers.push('Connection', 'close');
  res.writeHead(status, headers);
  res.end(body);
  return res.req.method === 'HEAD' ? 0 : body.length;
}

function onReqData(this: IncomingMessage, chunk: Buffer): void {
  const c = (this as IncomingMessage & WithCall)[kCall]!;
  const ex = c.exchange!;
  const more = ex.pushBody(chunk);
  if (c.bodyLeft > 0) {
    c.bodyLeft -= chunk.length;
    if (c.bodyLeft <= 0) {
      c.conn.bodyDue(false);
      ex.endBody();
    }
  }
  if (!more && !c.bodyPaused && !ex.finished) {
    c.bodyPaused = true;
    this.pause();
  }
}

function onReqEnd(this: IncomingMessage): void {
  const c = (this as IncomingMessage & WithCall)[kCall]!;
  c.bodyDone = true;
  c.conn.bodyDue(false);
  c.exchange!.endBody();
}

function httpBodyDrained(this: Exchange): void {
  const c = this.sink as HttpCall;
  c.buffered?.resume();
  if (!c.bodyPaused) return;
  c.bodyPaused = false;
  c.req.resume();
}

function onResDrain(this: ServerResponse): void {
  const c = (this as ServerResponse & WithCall)[kCall]!;
  if (!c.awaitingDrain) return;
  c.awaitingDrain = false;
  c.exchange?.responseDrained();
}

function onResClose(this: ServerResponse): void {
  const c = (this as ServerResponse & WithCall)[kCall]!;
  const conn = c.conn;
  conn.calls.delete(c);
  conn.bodyDue(false); // answered before its whole body came: the rest is not waited for
  c.buffered?.discard();
  const ex = c.exchange;
  if (ex === undefined) c.gone = true;
  else if (!ex.finished) {
    conn.env.listener.log.debug({ remote: conn.remote }, 'HTTP client went away mid-request');
    ex.abort();
  }
  if (conn.draining && conn.calls.size === 0) conn.finish();
}
