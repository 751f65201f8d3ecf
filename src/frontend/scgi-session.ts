/**
 * One front-end SCGI connection: exactly one request (a netstring of variables, then
 * CONTENT_LENGTH body bytes) and one response (the CGI head and body, raw), then the
 * connection closes: SCGI has no keep-alive, the close is the end of the response.
 *
 * A FIN from the client before the response is complete aborts the request (see onSocketEnd).
 */
import { performance } from 'node:perf_hooks';
import type { Socket } from 'node:net';
import { ErrorCodes, ProtocolError, ProxyError } from '../errors.js';
import { cgiErrorBodyLength, renderCgiError } from '../protocol/cgi-response.js';
import { Exchange, type CgiResponseHead, type ResponseSink } from '../protocol/exchange.js';
import type { CgiParams } from '../protocol/params.js';
import { ScgiRequestDecoder, type ScgiHandlers, type ScgiLimits } from '../protocol/scgi.js';
import { backendStderrLog } from './backend-stderr.js';
import { DeadlineNode, type ClientDeadlines, type ClientIdle, type ClientTimed } from './client-deadlines.js';
import { turnNow } from '../util/turn.js';
import { announceExchange, routeExchange } from './dispatch.js';
import type { FrontendEnv } from './env.js';
import { afterFreshGrace, type Session } from './listener-base.js';
import { attachSession, remoteOf, type SocketOwner } from './session-socket.js';
import { applyOverride } from './params-override.js';
import { errorText, statusOfProtocolError } from './request-errors.js';

/**
 * head:       reading the netstring
 * body:       exchange dispatched, body flowing in
 * waiting:    request complete, waiting for / streaming the response
 * closed:     socket ended or destroyed
 */
type ScgiState = 'head' | 'body' | 'waiting' | 'closed';

export class ScgiSession implements Session, ResponseSink, ClientTimed, ScgiHandlers, SocketOwner {
  listenerSlot = -1;
  private readonly env: FrontendEnv;
  private readonly socket: Socket;
  private readonly remote: string;
  private readonly decoder: ScgiRequestDecoder;
  /** The exchange was announced in this chunk and waits to be routed after it. */
  private unrouted = false;
  private state: ScgiState = 'head';
  private exchange: Exchange | undefined;
  private received = 0;
  private written = false;
  private bodyPaused = false;
  private awaitingDrain = false;
  private corked = false;
  private readonly deadlines: ClientDeadlines;
  /** Header list from the accept to the end of the netstring, then body list until the body is in. */
  private readonly deadline: DeadlineNode<ClientTimed> = new DeadlineNode<ClientTimed>(this);
  /** Monotonic ms of the last read or write: idle_timeout counts from it (client-deadlines.ts). */
  activeAt = 0;
  /** On the listener's idle watch while the socket is open. */
  private readonly idleNode: DeadlineNode<ClientIdle> = new DeadlineNode<ClientIdle>(this);
  /** Bytes the socket still held to write when idle_timeout last fell due: fewer since is progress. */
  private pendingAtTimeout = 0;

  constructor(env: FrontendEnv, socket: Socket, limits: ScgiLimits) {
    this.env = env;
    this.socket = socket;
    this.remote = remoteOf(socket, env.cfg.address);
    this.deadlines = env.deadlines!; // every stream listener builds them
    // The session is the decoder's handler and its socket's listener: no closures per connection.
    this.decoder = new ScgiRequestDecoder(limits, this);
    attachSession(socket, this);
    this.deadlines.idle?.watch(this.idleNode);
    // One request per connection: its head is due header_timeout after the accept, as
    // nginx's client_header_timeout (a client that waits before its first byte gains nothing).
    this.deadlines.header.push(this.deadline);
    env.listener.add(this);
  }

  // ---- Session ----------------------------------------------------------------------

  drain(): void {
    // One request per connection: only a connection that has not started one is idle,
    // and one that sent nothing yet may have its request on the wire (listener-base.ts afterFreshGrace).
    if (this.state === 'head' && this.received === 0) afterFreshGrace(closeIfSilent, this);
  }

  /** @internal timer target. */
  closeIfSilent(): void {
    if (this.state === 'head' && this.received === 0) this.finishSocket();
  }

  destroy(): void {
    this.closeNow();
  }

  // ---- decoder handlers ---------------------------------------------------------------

  /** @internal decoder handler. */
  onHead(params: CgiParams, _contentLength: number): void {
    this.state = 'body';
    this.deadlines.bodyActive(this.deadline);
    applyOverride(params, this.env.override);
    const ex = new Exchange(params, this, 'scgi', performance.now());
    ex.onBodyDrain = scgiBodyDrained;
    this.exchange = ex;
    announceExchange(this.env, ex);
    // Routed once the chunk is decoded: a body that came with the header (or its end) is
    // in the exchange by then, so the backend gets the request in one write.
    this.unrouted = true;
  }

  /** @internal decoder handler. */
  onBody(chunk: Buffer): void {
    const ex = this.exchange!;
    const more = ex.pushBody(chunk);
    if (this.bodyPaused || ex.finished) return;
    if (more) {
      if (this.state === 'body') this.deadlines.bodyActive(this.deadline);
      return;
    }
    // We stop reading: from now on the client is not the one stalling.
    this.deadlines.stop(this.deadline);
    this.bodyPaused = true;
    this.socket.pause();
  }

  /** @internal decoder handler: the request (head and body) is complete. */
  onEnd(): void {
    this.deadlines.stop(this.deadline);
    if (this.state === 'body') this.state = 'waiting';
    this.exchange?.endBody();
  }

  bodyDrained(): void {
    if (!this.bodyPaused) return;
    this.bodyPaused = false;
    if (this.state === 'body') this.deadlines.bodyActive(this.deadline);
    if (this.state !== 'closed') this.socket.resume();
  }

  // ---- client deadlines ---------------------------------------------------------------

  headerTimedOut(): void {
    if (this.state !== 'head') return;
    if (this.received === 0) {
      this.env.listener.log.debug({ remote: this.remote }, 'SCGI connection sent nothing within header_timeout; closed');
      this.closeNow();
      return;
    }
    this.env.listener.log.warn(
      { remote: this.remote, code: ErrorCodes.CLIENT_HEADER_TIMEOUT, received: this.received, timeoutMs: this.env.cfg.headerTimeout },
      'SCGI request head not complete within header_timeout; closing',
    );
    this.closeNow();
  }

  /** The body stalled: 408 to the client (if it still listens), the backend request cancelled. */
  bodyTimedOut(): void {
    if (this.state !== 'body') return;
    const ms = this.env.cfg.bodyTimeout;
    this.env.listener.log.warn({ remote: this.remote, code: ErrorCodes.CLIENT_BODY_TIMEOUT, received: this.received, timeoutMs: ms }, 'SCGI request body stalled for body_timeout; answered 408');
    this.exchange!.failByClient(new ProxyError(ErrorCodes.CLIENT_BODY_TIMEOUT, 408, `request body sent nothing for ${ms} ms`));
  }

  // ---- ResponseSink -------------------------------------------------------------------

  head(head: CgiResponseHead): void {
    this.write(head.raw);
  }

  body(chunk: Buffer): boolean {
    const ok = this.write(chunk);
    if (!ok) this.awaitingDrain = true;
    return ok;
  }

  stderr(chunk: Buffer): void {
    // SCGI has no error stream; the operator sees it in our log, rate-limited per listener.
    const l = this.env.listener;
    backendStderrLog(l, l.log).write(l.log, this.remote, this.exchange?.params.get('REQUEST_URI'), chunk);
  }

  end(): void {
    this.finishSocket();
  }

  fail(err: ProxyError): number {
    if (this.written) {
      this.env.listener.log.warn({ remote: this.remote, code: err.code }, 'response failed after its head; cutting the connection');
      this.closeNow();
      return 0;
    }
    const page = renderCgiError(err.status, errorText(err.status, err.code), err.retryAfter);
    this.write(page);
    this.finishSocket();
    return cgiErrorBodyLength(page);
  }

  // ---- socket -------------------------------------------------------------------------

  private write(buf: Buffer): boolean {
    if (this.state === 'closed') return true;
    this.written = true;
    this.activeAt = turnNow();
    if (!this.corked) {
      this.corked = true;
      this.socket.cork();
      process.nextTick(uncork, this);
    }
    return this.socket.write(buf);
  }

  /** @internal process.nextTick target. */
  uncorkNow(): void {
    this.corked = false;
    this.socket.uncork();
  }

  /** @internal socket listener (session-socket.ts). */
  onData(chunk: Buffer): void {
    if (this.state === 'closed') return;
    this.received += chunk.length;
    this.activeAt = turnNow();
    try {
      this.decoder.push(chunk);
    } catch (err) {
      this.badInput(err);
    }
    if (this.unrouted) {
      this.unrouted = false;
      routeExchange(this.env, this.exchange!); // nothing if bad input closed the connection (the exchange was aborted)
    }
  }

  private badInput(err: unknown): void {
    if (!(err instanceof ProtocolError)) {
      this.env.listener.log.error({ code: ErrorCodes.INTERNAL, remote: this.remote, err }, 'internal error on SCGI connection; closing it');
      this.closeNow();
      return;
    }
    const status = statusOfProtocolError(err);
    this.env.listener.log.warn({ remote: this.remote, code: err.code, err: err.message, status }, 'bad SCGI request; closing connection');
    const ex = this.exchange;
    if (ex !== undefined && !ex.finished) {
      this.state = 'closed';
      this.deadlines.stop(this.deadline);
      ex.abort();
      this.socket.destroy();
      return;
    }
    if (!this.written) this.write(renderCgiError(status, errorText(status, err.code)));
    this.finishSocket();
  }

  /** @internal socket listener (session-socket.ts). */
  onDrain(): void {
    this.activeAt = turnNow();
    if (!this.awaitingDrain) return;
    this.awaitingDrain = false;
    this.exchange?.responseDrained();
  }

  /** Ends our side after flushing the response; the socket closes once both sides did. */
  private finishSocket(): void {
    if (this.state === 'closed') return;
    const requestRead = this.state === 'waiting';
    this.state = 'closed';
    this.deadlines.stop(this.deadline);
    if (this.corked) this.uncorkNow();
    if (requestRead && this.env.cfg.address.kind === 'unix' && this.socket.writableLength === 0) {
      // The request was read and the kernel took the whole response: a Unix socket
      // delivers what it holds after close, so no shutdown and no wait for the client's
      // close (one system call and one read fewer per request, as in the FastCGI session).
      this.socket.destroy();
      return;
    }
    this.socket.end();
    // Unread request bytes left in the kernel would turn our close into a reset that
    // can destroy the response in flight; read and drop them instead.
    if (this.bodyPaused) {
      this.bodyPaused = false;
      this.socket.resume();
    }
    // The client may keep its side open; do not wait for it forever (a timeout that closed it found it unwatched).
    if (this.deadlines.idle !== undefined) this.deadlines.idle.watch(this.idleNode);
    else this.socket.setTimeout(5000);
  }

  private closeNow(): void {
    this.deadlines.idle?.stop(this.idleNode);
    this.state = 'closed';
    this.deadlines.stop(this.deadline);
    const ex = this.exchange;
    if (ex !== undefined && !ex.finished) ex.abort();
    this.socket.destroy();
  }

  /**
   * The client closed its side before the response was complete. Like nginx with HTTP
   * clients, that counts as gone: a half-close cannot be told from an abort, and a
   * cancelled request must not keep a worker busy. (@internal socket listener, session-socket.ts)
   */
  onSocketEnd(): void {
    if (this.state === 'closed') return;
    const log = this.env.listener.log;
    if (this.state === 'head' && this.received === 0) {
      log.debug({ remote: this.remote }, 'SCGI client closed without a request');
    } else if (this.state === 'waiting') {
      log.debug({ remote: this.remote }, 'SCGI client closed before its response was complete');
    } else {
      log.warn({ remote: this.remote, code: ErrorCodes.SCGI_BAD_NETSTRING, received: this.received }, 'SCGI client closed before its request was complete');
    }
    this.closeNow();
  }

  /** @internal socket listener (session-socket.ts). */
  onClose(): void {
    this.deadlines.idle?.stop(this.idleNode);
    const ex = this.exchange;
    if (ex !== undefined && !ex.finished) {
      this.env.listener.log.debug({ remote: this.remote }, 'SCGI client disconnected mid-request');
      ex.abort();
    }
    this.state = 'closed';
    this.deadlines.stop(this.deadline);
    this.env.listener.remove(this);
  }

  /** @internal socket listener (session-socket.ts). */
  onSocketError(err: NodeJS.ErrnoException): void {
    this.env.listener.log.debug({ remote: this.remote, code: err.code }, 'SCGI socket error');
  }

  /** @internal socket listener (session-socket.ts). */
  onTimeout(): void {
    this.idleTimedOut();
  }

  /** @internal the listener's idle watch: no read or write for idle_timeout; no longer watched. */
  idleTimedOut(): void {
    if (this.state === 'closed') {
      this.socket.destroy(); // we ended, the client never did
      return;
    }
    // Written bytes leaving slowly are not idleness (as Node's own timer: progress on a pending write).
    const pending = this.socket.writableLength;
    const moving = pending > 0 && pending !== this.pendingAtTimeout;
    this.pendingAtTimeout = pending;
    if (moving) {
      this.deadlines.idle?.watch(this.idleNode);
      return;
    }
    if (this.awaitingDrain) {
      this.env.listener.log.warn({ code: ErrorCodes.CLIENT_SEND_TIMEOUT, remote: this.remote }, 'SCGI client stopped reading its response; closing');
      this.closeNow();
      return;
    }
    if (this.bodyPaused || this.state === 'waiting') {
      // Back-pressure or a slow backend: watched again from now, as the socket's timer re-armed by the next I/O.
      this.deadlines.idle?.watch(this.idleNode);
      return;
    }
    if (this.received === 0) {
      this.env.listener.log.debug({ remote: this.remote }, 'idle SCGI connection closed');
    } else {
      this.env.listener.log.warn({ remote: this.remote, code: ErrorCodes.SCGI_BAD_NETSTRING, received: this.received }, 'SCGI client stalled mid-request; closing');
    }
    this.closeNow();
  }
}

function closeIfSilent(s: ScgiSession): void {
  s.closeIfSilent();
}

function uncork(s: ScgiSession): void {
  s.uncorkNow();
}

/** Exchange.onBodyDrain for SCGI exchanges: shared, `this` is the exchange. */
function scgiBodyDrained(this: Exchange): void {
  (this.sink as ScgiSession).bodyDrained();
}
