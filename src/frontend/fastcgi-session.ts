/**
 * One front-end FastCGI connection (nginx, lighttpd, Apache mod_proxy_fcgi, HAProxy):
 * a responder server over FcgiDecoder. Requests live in a Map by id, so records of
 * several requests may interleave (FCGI_MPXS_CONNS=1); records for ids we do not know
 * are ignored as the spec says.
 *
 * Failure policy: a request whose PARAMS break the limits is answered with an error and
 * the connection kept (record framing is still sound); bytes that are not FastCGI close
 * the connection and abort every exchange on it.
 */
import type { Socket } from 'node:net';
import { ErrorCodes, ProtocolError, ProxyError } from '../errors.js';
import {
  FcgiDecoder,
  FCGI_KEEP_CONN,
  ParamsCollector,
  ProtocolStatus,
  RecordType,
  Role,
  decodeNameValues,
  encodeEndRequest,
  encodeGetValuesResult,
  encodeUnknownType,
  parseBeginRequest,
  type FcgiRecord,
} from '../protocol/fastcgi.js';
import { cgiErrorBodyLength, renderCgiError } from '../protocol/cgi-response.js';
import { Exchange } from '../protocol/exchange.js';
import { CgiParams } from '../protocol/params.js';
import { DeadlineNode, type ClientDeadlines, type ClientIdle, type ClientTimed } from './client-deadlines.js';
import type { FrontendEnv } from './env.js';
import { FcgiRequest, RequestTable, fcgiBodyDrained, type FcgiConnection } from './fastcgi-request.js';
import { FcgiWriter } from './fastcgi-writer.js';
import { afterFreshGrace, type Session } from './listener-base.js';
import { attachSession, remoteOf, type SocketOwner } from './session-socket.js';
import { applyOverride } from './params-override.js';
import { errorText, statusOfProtocolError } from './request-errors.js';
import { announceExchange, routeExchange } from './dispatch.js';
import { clearArray } from '../util/clear-array.js';
import { TokenBucket } from '../util/token-bucket.js';
import { turnNow } from '../util/turn.js';

/**
 * Roles this server plays. An authorizer request is an exchange like any other with its
 * role set: the upstream asks the backend for that role and judges the answer
 * (src/protocol/authorizer.ts). The filter role is not played: FCGI_UNKNOWN_ROLE.
 */
const SUPPORTED_ROLES: ReadonlySet<number> = new Set([Role.Responder, Role.Authorizer]);

/** Authorizer requests with bodies come from a broken front end, every one of them: per listener a burst of warnings, then one a second with a count. */
const authorizerBodyLog = new WeakMap<object, TokenBucket>();

/** Requests one connection may have open at once; more get FCGI_OVERLOADED. */
export const MAX_REQUESTS_PER_CONNECTION = 256;

type SessionState = 'open' | 'draining' | 'closed';

export class FcgiSession implements Session, ClientTimed, SocketOwner, FcgiConnection {
  listenerSlot = -1;
  private readonly env: FrontendEnv;
  private readonly socket: Socket;
  private readonly remote: string;
  private readonly decoder: FcgiDecoder;
  private readonly requests = new RequestTable();
  private state: SessionState = 'open';
  /** The client sent bytes: from then on, no request in flight means idle (listener-base.ts afterFreshGrace). */
  private heard = false;
  /** Requests whose body the exchange asked us to stop reading. */
  private pausedBy = 0;
  /** Where responses are written, coalesced per tick. */
  readonly writer: FcgiWriter;
  /** Requests whose PARAMS ended in the chunk being decoded; routed once the whole chunk is. */
  private readonly ready: FcgiRequest[] = [];
  /** Requests begun in the chunk being decoded; their header deadline is armed after it, if their PARAMS did not end in it. */
  private readonly begun: FcgiRequest[] = [];
  /** A request head came whole in the chunk being decoded. */
  private headCame = false;
  private readonly deadlines: ClientDeadlines;
  /** On the header list while bytes arrived and no request has begun yet. */
  private readonly deadline: DeadlineNode<ClientTimed> = new DeadlineNode<ClientTimed>(this);
  /** Monotonic ms of the last read or write: idle_timeout counts from it (client-deadlines.ts). */
  activeAt = 0;
  /** On the listener's idle watch while the socket is open. */
  private readonly idleNode: DeadlineNode<ClientIdle> = new DeadlineNode<ClientIdle>(this);
  /** Bytes the socket still held to write when idle_timeout last fell due: fewer since is progress. */
  private pendingAtTimeout = 0;

  constructor(env: FrontendEnv, socket: Socket) {
    this.env = env;
    this.socket = socket;
    this.remote = remoteOf(socket, env.cfg.address);
    this.decoder = new FcgiDecoder((rec) => this.onRecord(rec), true);
    this.writer = new FcgiWriter(socket, () => this.state === 'closed', this);
    this.deadlines = env.deadlines!; // every stream listener builds them
    attachSession(socket, this);
    this.deadlines.idle?.watch(this.idleNode);
    // The first request's head is due header_timeout after the accept, as nginx's
    // client_header_timeout; a kept connection's later ones, after their first byte.
    this.deadlines.header.push(this.deadline);
    env.listener.add(this);
  }

  /** The session closed (read through a getter: a call out may have closed it). */
  private get closed(): boolean {
    return this.state === 'closed';
  }

  // ---- Session (listener side) ------------------------------------------------------

  drain(): void {
    if (this.state !== 'open') return;
    this.state = 'draining';
    if (this.requests.size > 0) return;
    if (this.heard) this.closeGracefully();
    else afterFreshGrace(closeIfSilent, this);
  }

  /** @internal timer target: a draining connection that still sent nothing is closed. */
  closeIfSilent(): void {
    if (!this.heard && this.state === 'draining' && this.requests.size === 0) this.closeGracefully();
  }

  destroy(): void {
    this.closeNow();
  }

  // ---- input ------------------------------------------------------------------------

  /**
   * @internal socket listener (session-socket.ts). The client deadlines are armed once
   * the chunk is decoded, for what is still owed then: a request head and a GET's empty
   * STDIN that come in one chunk, as a front end sends them, need no deadline at all.
   */
  onData(chunk: Buffer): void {
    if (this.state === 'closed') return;
    this.heard = true;
    this.activeAt = turnNow();
    // Bytes with no request begun: one must begin within header_timeout, unless a head comes whole here.
    const unbegun = this.requests.size === 0 && this.deadline.list === null;
    this.headCame = false;
    try {
      this.decoder.push(chunk);
    } catch (err) {
      clearArray(this.ready); // their exchanges were aborted with the connection
      clearArray(this.begun);
      this.badInput(err);
      return;
    }
    if (unbegun && !this.headCame && !this.closed) this.deadlines.header.push(this.deadline);
    if (this.begun.length > 0) this.armBegun();
    if (this.ready.length > 0) this.routeReady();
  }

  /** Requests begun in this chunk whose PARAMS did not end in it: their head is due within header_timeout. */
  private armBegun(): void {
    const list = this.begun;
    for (let i = 0; i < list.length; i++) {
      const r = list[i]!;
      if (r.state === 'params' && !this.closed) this.deadlines.header.push(r.deadline);
    }
    clearArray(list);
  }

  /**
   * Routes the requests whose PARAMS ended in this chunk. After the chunk, not inside the
   * decoder loop: the STDIN records behind the PARAMS (for a GET, the empty one) are in
   * the exchange by then, so the backend gets the whole request in one write. A request
   * still owed body bytes then (not paused by its exchange) gets its body deadline.
   */
  private routeReady(): void {
    const list = this.ready;
    for (let i = 0; i < list.length; i++) {
      const r = list[i]!;
      if (!this.closed) routeExchange(this.env, r.exchange!);
      if (r.state === 'running' && !r.stdinDone && !r.bodyPaused && r.role !== Role.Authorizer && !this.closed) this.deadlines.bodyActive(r.deadline);
    }
    clearArray(list);
  }

  private badInput(err: unknown): void {
    if (err instanceof ProtocolError) {
      this.env.listener.log.warn({ remote: this.remote, code: err.code, err: err.message }, 'bad FastCGI input; closing connection');
    } else {
      this.env.listener.log.error({ code: ErrorCodes.INTERNAL, remote: this.remote, err }, 'internal error on FastCGI connection; closing it');
    }
    this.closeNow();
  }

  private onRecord(rec: FcgiRecord): void {
    if (this.state === 'closed') return;
    const id = rec.requestId;
    if (id === 0) {
      this.onManagementRecord(rec);
      return;
    }
    switch (rec.type) {
      case RecordType.BeginRequest:
        this.onBegin(id, rec.content);
        return;
      case RecordType.Params: {
        const r = this.requests.get(id);
        if (r !== undefined && r.state === 'params') this.onParams(r, rec.content);
        return;
      }
      case RecordType.Stdin: {
        const r = this.requests.get(id);
        if (r === undefined) return;
        if (r.state === 'params') throw new ProtocolError(ErrorCodes.FCGI_BAD_RECORD, `STDIN for request ${id} before its PARAMS ended`);
        this.onStdin(r, rec.content);
        return;
      }
      case RecordType.AbortRequest: {
        const r = this.requests.get(id);
        if (r !== undefined) this.onAbortRequest(r);
        return;
      }
      case RecordType.Data:
        // Only the filter role reads DATA; a responder has no use for it.
        return;
      default:
        this.writer.write1(encodeUnknownType(rec.type));
    }
  }

  private onManagementRecord(rec: FcgiRecord): void {
    if (rec.type !== RecordType.GetValues) {
      this.writer.write1(encodeUnknownType(rec.type));
      return;
    }
    const asked = decodeNameValues(rec.content, this.env.ctx.limits);
    const answer = new CgiParams();
    const maxConns = this.env.cfg.maxConns;
    asked.forEach((name) => {
      switch (name) {
        case 'FCGI_MAX_CONNS':
          answer.set(name, String(maxConns));
          break;
        case 'FCGI_MAX_REQS':
          answer.set(name, String(maxConns * MAX_REQUESTS_PER_CONNECTION));
          break;
        case 'FCGI_MPXS_CONNS':
          answer.set(name, '1');
          break;
      }
    });
    this.writer.write1(encodeGetValuesResult(answer));
  }

  private onBegin(id: number, content: Buffer): void {
    if (this.requests.has(id)) throw new ProtocolError(ErrorCodes.FCGI_BAD_RECORD, `BEGIN_REQUEST for request ${id}, which is already in flight`);
    const { role, flags } = parseBeginRequest(content);
    const keepConn = (flags & FCGI_KEEP_CONN) !== 0;
    if (!SUPPORTED_ROLES.has(role)) {
      this.env.listener.log.warn({ code: ErrorCodes.FCGI_UNKNOWN_ROLE, remote: this.remote, role }, 'FastCGI role not supported; answered FCGI_UNKNOWN_ROLE');
      this.rejectBegin(id, ProtocolStatus.UnknownRole, keepConn);
      return;
    }
    if (this.requests.size >= MAX_REQUESTS_PER_CONNECTION) {
      this.env.listener.log.warn({ code: ErrorCodes.FCGI_OVERLOADED, remote: this.remote, open: this.requests.size }, 'too many requests on one connection; answered FCGI_OVERLOADED');
      this.rejectBegin(id, ProtocolStatus.Overloaded, keepConn);
      return;
    }
    const r = new FcgiRequest(this, id, role, keepConn, new ParamsCollector(this.env.ctx.limits));
    this.requests.add(r);
    this.begun.push(r); // its header deadline: after the chunk (onData)
  }

  private rejectBegin(id: number, protocolStatus: number, keepConn: boolean): void {
    this.writer.write1(encodeEndRequest(id, 0, protocolStatus));
    if (!keepConn || this.state === 'draining') this.maybeCloseAfterRequest(false);
  }

  private onParams(r: FcgiRequest, content: Buffer): void {
    let params: CgiParams | undefined;
    try {
      params = r.collector!.add(content);
    } catch (err) {
      if (!(err instanceof ProtocolError)) throw err;
      // The record framing is intact: refuse this request, keep the connection.
      const status = statusOfProtocolError(err);
      this.env.listener.log.warn({ remote: this.remote, code: err.code, err: err.message, status }, 'bad FastCGI request variables; request refused');
      this.answerError(r, status, err.code, undefined);
      return;
    }
    if (params === undefined) return;
    r.collector = undefined;
    r.state = 'running';
    // A head came whole: the connection's own header deadline (from its accept or first byte) is met.
    this.headCame = true;
    if (this.deadline.list !== null) this.deadlines.stop(this.deadline);
    applyOverride(params, this.env.override);
    const ex = new Exchange(params, r, 'fastcgi', turnNow());
    ex.onBodyDrain = fcgiBodyDrained;
    r.exchange = ex;
    if (r.role === Role.Authorizer) {
      // No body and no wait for STDIN: Apache's mod_authnz_fcgi sends none, not even the empty record.
      ex.role = Role.Authorizer;
      ex.endBody();
    }
    // Off the header list (begun in an earlier chunk); the body deadline is armed after this chunk (routeReady).
    r.stopDeadline(this.deadlines);
    announceExchange(this.env, ex);
    this.ready.push(r);
  }

  private onStdin(r: FcgiRequest, content: Buffer): void {
    if (r.stdinDone) return;
    const ex = r.exchange!;
    if (r.role === Role.Authorizer) {
      if (content.length === 0) r.stdinDone = true;
      else this.refuseAuthorizerBody(r, ex, content.length);
      return;
    }
    if (content.length === 0) {
      r.stdinDone = true;
      r.stopDeadline(this.deadlines);
      ex.endBody();
      return;
    }
    const more = ex.pushBody(content);
    if (r.state !== 'running' || r.bodyPaused) return;
    if (more) {
      this.deadlines.bodyActive(r.deadline);
      return;
    }
    // We stop reading: from now on the client is not the one stalling.
    r.stopDeadline(this.deadlines);
    r.bodyPaused = true;
    if (this.pausedBy++ === 0) this.socket.pause();
  }

  /**
   * STDIN bytes for an authorizer request: 400. Routed after the chunk is decoded, a
   * request whose body came with its head never reaches a worker; a later body cancels
   * the worker's request (its answer is not given).
   */
  private refuseAuthorizerBody(r: FcgiRequest, ex: Exchange, bytes: number): void {
    const l = this.env.listener;
    let bucket = authorizerBodyLog.get(l);
    if (bucket === undefined) authorizerBodyLog.set(l, (bucket = new TokenBucket({ ratePerSec: 1, burst: 10 })));
    const fields = bucket.lineFields();
    if (fields !== undefined) {
      l.log.warn(
        { remote: this.remote, code: ErrorCodes.AUTHORIZER_BODY, request: r.id, bytes, uri: ex.params.get('REQUEST_URI'), ...fields },
        'FastCGI authorizer request with a body (the role has none); answered 400',
      );
    }
    ex.failByClient(new ProxyError(ErrorCodes.AUTHORIZER_BODY, 400, 'an authorizer request has no body'));
  }

  /** The exchange wants more body (called through Exchange.onBodyDrain). */
  bodyDrained(r: FcgiRequest): void {
    if (!r.bodyPaused) return;
    r.bodyPaused = false;
    if (!r.stdinDone && r.state === 'running') this.deadlines.bodyActive(r.deadline);
    if (--this.pausedBy === 0 && this.state !== 'closed') this.socket.resume();
  }

  // ---- client deadlines (ClientTimed; the request's own calls come through FcgiRequest) --

  /**
   * header_timeout: no request head came whole within it of the accept (or, on a kept
   * connection, of the next request's first byte), or a request's PARAMS did not end
   * within it of its BEGIN_REQUEST.
   */
  headerTimedOut(r?: FcgiRequest): void {
    if (this.state === 'closed') return;
    if (r !== undefined && r.state !== 'params') return;
    if (!this.heard) {
      this.env.listener.log.debug({ remote: this.remote }, 'FastCGI connection sent nothing within header_timeout; closed');
      this.closeNow();
      return;
    }
    this.env.listener.log.warn(
      { remote: this.remote, code: ErrorCodes.CLIENT_HEADER_TIMEOUT, request: r?.id, timeoutMs: this.env.cfg.headerTimeout },
      r === undefined
        ? this.requests.size === 0
          ? 'FastCGI client began no request within header_timeout; closing'
          : 'FastCGI client sent no whole request head within header_timeout; closing'
        : 'FastCGI request PARAMS not complete within header_timeout; closing',
    );
    this.closeNow();
  }

  /**
   * body_timeout: the request is answered 408 and its backend request cancelled; the
   * connection stays for other requests unless the stall is in the middle of a record.
   */
  bodyTimedOut(r?: FcgiRequest): void {
    if (r === undefined || r.state !== 'running' || r.stdinDone || this.state === 'closed') return;
    const ms = this.env.cfg.bodyTimeout;
    this.env.listener.log.warn({ remote: this.remote, code: ErrorCodes.CLIENT_BODY_TIMEOUT, request: r.id, timeoutMs: ms }, 'FastCGI request body stalled for body_timeout; answered 408');
    r.exchange!.failByClient(new ProxyError(ErrorCodes.CLIENT_BODY_TIMEOUT, 408, `request body sent nothing for ${ms} ms`));
    if (this.decoder.midRecord) this.closeGracefully();
  }

  private onAbortRequest(r: FcgiRequest): void {
    this.forget(r);
    r.exchange?.abort();
    this.writer.write1(encodeEndRequest(r.id, 0, ProtocolStatus.RequestComplete));
    this.maybeCloseAfterRequest(r.keepConn);
  }

  // ---- output (the writer writes; these end a request) -------------------------------

  /** `endRecords`: the backend's own closing records (ResponseSink.end), sent on when they join what is held. */
  endRequest(r: FcgiRequest, endRecords?: Buffer): void {
    if (r.state === 'ended') return;
    this.forget(r);
    if (this.state === 'closed') return;
    this.writer.held(r, true, endRecords);
    this.maybeCloseAfterRequest(r.keepConn);
  }

  /** Answers the request with a CGI error page (nothing was sent for it yet) and ends it. */
  /** Answers with an error page; returns its body bytes written. */
  answerError(r: FcgiRequest, status: number, code: string, retryAfter: number | undefined): number {
    if (r.state === 'ended') return 0;
    let written = 0;
    if (this.state !== 'closed') {
      const page = renderCgiError(status, errorText(status, code), retryAfter);
      this.writer.stream(RecordType.Stdout, r.id, page);
      written = cgiErrorBodyLength(page);
    }
    this.endRequest(r);
    return written;
  }

  /**
   * The response failed after its head went out. FastCGI has no way to say "this
   * response is broken" short of closing the connection; a clean END_REQUEST would let
   * nginx cache or pass on a truncated page.
   */
  cutResponse(r: FcgiRequest, err: ProxyError): void {
    this.env.listener.log.warn({ remote: this.remote, request: r.id, code: err.code }, 'response failed after its head; closing the connection');
    this.forget(r);
    this.closeNow();
  }

  // ---- lifecycle --------------------------------------------------------------------

  /** Drops a request from the session (its exchange has finished or is being aborted). */
  private forget(r: FcgiRequest): void {
    if (r.state === 'ended') return;
    r.state = 'ended';
    r.collector = undefined;
    r.stopDeadline(this.deadlines);
    this.requests.delete(r);
    if (r.bodyPaused) {
      r.bodyPaused = false;
      if (--this.pausedBy === 0 && this.state !== 'closed') this.socket.resume();
    }
  }

  private maybeCloseAfterRequest(keepConn: boolean): void {
    if (this.state === 'closed') return;
    if (!keepConn) this.closeGracefully();
    else if (this.state === 'draining' && this.requests.size === 0) this.closeGracefully();
  }

  /** Flushes what was written, then closes; requests still open are aborted. */
  private closeGracefully(): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.deadlines.stop(this.deadline);
    const wasPaused = this.pausedBy > 0;
    this.abortAll();
    this.writer.flush();
    if (this.env.cfg.address.kind === 'unix' && this.socket.writableLength === 0) {
      // All written (the usual case: a connection per request, its answer taken by the
      // kernel at once). A Unix socket delivers what it holds after close, so no
      // shutdown and no wait for the client's FIN: one system call and one read fewer.
      this.env.listener.remove(this);
      this.socket.destroy();
      return;
    }
    this.socket.end();
    // Read (and drop) until the client closes too; a paused socket would never see its FIN.
    if (wasPaused) this.socket.resume();
    // The client's FIN is awaited idle_timeout at most (a timeout that closed it found it unwatched).
    if (this.deadlines.idle !== undefined) this.deadlines.idle.watch(this.idleNode);
    else this.socket.setTimeout(5000);
    this.env.listener.remove(this);
  }

  private closeNow(): void {
    this.deadlines.idle?.stop(this.idleNode);
    if (this.state !== 'closed') {
      this.state = 'closed';
      this.deadlines.stop(this.deadline);
      this.abortAll();
      this.env.listener.remove(this);
    }
    this.socket.destroy();
  }

  private abortAll(): void {
    if (this.requests.size === 0) return;
    const open = this.requests.values();
    this.requests.clear();
    for (const r of open) {
      r.state = 'ended';
      r.stopDeadline(this.deadlines);
      r.exchange?.abort();
    }
    this.pausedBy = 0;
    this.writer.forgetDrainWaiters();
  }

  /** @internal socket listener (session-socket.ts). */
  onDrain(): void {
    this.writer.onDrain();
  }

  /** @internal socket listener (session-socket.ts). */
  onSocketEnd(): void {
    if (this.state === 'closed') return;
    if (this.decoder.midRecord) {
      this.env.listener.log.warn({ remote: this.remote, code: ErrorCodes.FCGI_TRUNCATED }, 'FastCGI connection closed in the middle of a record');
    } else {
      this.env.listener.log.debug({ remote: this.remote, open: this.requests.size }, 'FastCGI client closed the connection');
    }
    this.closeNow();
  }

  /** @internal socket listener (session-socket.ts). */
  onClose(): void {
    this.deadlines.idle?.stop(this.idleNode);
    if (this.state === 'closed') return;
    this.env.listener.log.debug({ remote: this.remote, open: this.requests.size }, 'FastCGI connection lost');
    this.state = 'closed';
    this.deadlines.stop(this.deadline);
    this.abortAll();
    this.env.listener.remove(this);
  }

  /** @internal socket listener (session-socket.ts). */
  onSocketError(err: NodeJS.ErrnoException): void {
    // ECONNRESET and EPIPE are how clients usually go away; 'close' follows.
    this.env.listener.log.debug({ remote: this.remote, code: err.code }, 'FastCGI socket error');
  }

  /** @internal socket listener (session-socket.ts): only while closing with no idle_timeout (closeGracefully). */
  onTimeout(): void {
    this.idleTimedOut();
  }

  /** @internal the listener's idle watch: no read or write for idle_timeout; no longer watched. */
  idleTimedOut(): void {
    if (this.state === 'closed') {
      this.socket.destroy(); // we ended our side; the client never closed its own
      return;
    }
    // Written bytes leaving slowly are not idleness (as Node's own timer: progress on a pending write).
    const pending = this.socket.writableLength;
    const moving = pending > 0 && pending !== this.pendingAtTimeout;
    this.pendingAtTimeout = pending;
    if (moving) {
      this.watchAgain();
      return;
    }
    if (this.writer.waitingForDrain) {
      this.env.listener.log.warn({ code: ErrorCodes.CLIENT_SEND_TIMEOUT, remote: this.remote, open: this.requests.size }, 'FastCGI client stopped reading responses; closing');
      this.closeNow();
      return;
    }
    if (this.pausedBy > 0) {
      this.watchAgain();
      return;
    }
    if (this.decoder.midRecord) {
      this.env.listener.log.warn({ remote: this.remote, code: ErrorCodes.FCGI_TRUNCATED }, 'FastCGI client stalled in the middle of a record; closing');
      this.closeNow();
      return;
    }
    let running = false;
    for (const r of this.requests.values()) if (r.state === 'running') running = true;
    if (running) {
      this.watchAgain(); // waiting for a backend is not idleness
      return;
    }
    if (this.requests.size > 0) {
      this.env.listener.log.warn({ remote: this.remote, code: ErrorCodes.FCGI_TRUNCATED }, 'FastCGI client stalled before its PARAMS ended; closing');
    } else {
      this.env.listener.log.debug({ remote: this.remote }, 'idle FastCGI connection closed');
    }
    this.closeGracefully();
  }

  /** A timeout found the session not idle: watched again from now, as the socket's timer re-armed by the next I/O. */
  private watchAgain(): void {
    this.deadlines.idle?.watch(this.idleNode);
  }
}

function closeIfSilent(s: FcgiSession): void {
  s.closeIfSilent();
}
