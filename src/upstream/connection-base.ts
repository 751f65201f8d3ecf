/**
 * One socket to a backend and the request running on it: connecting, timeouts, body
 * back-pressure in both directions, client abort, and what a close means in each state.
 * The protocol subclasses (FastCGI, SCGI) encode the request and decode the response.
 *
 * States:  connecting → busy ⇄ idle → closed      (connecting/busy always carry an exchange)
 *
 * A client abort closes the connection and reports 'aborted' at once, except with
 * drainOnAbort on a protocol that can cancel (FastCGI): the request is then `orphaned`,
 * cancelled with FCGI_ABORT_REQUEST and read (output discarded) to its end before the
 * outcome is reported, because a one-request backend is busy until then.
 *
 * Socket and exchange callbacks are bound once per connection, not per request.
 *
 * Timeouts are inactivity timeouts, as the socket's own timer would keep them, but on
 * an IdleWatch (src/util/idle-watch.ts) of all connections with the same timeout: the
 * socket's I/O only stamps `activeAt` (Node's timer is re-armed on every read and
 * write). connectTimeout until connected, then readTimeout. Our own writes count too,
 * so a backend still taking a request body is not "silent"; while the client is slow
 * (socket paused) the connection is not watched, and while the client owes body bytes
 * a timeout is ignored (the front end's body_timeout acts).
 */
import { connect, type NetConnectOpts, type Socket } from 'node:net';
import { closeTurn, openTurn, turnNow } from '../util/turn.js';
import { systemClock } from '../util/clock.js';
import { DeadlineNode, IdleWatch } from '../util/idle-watch.js';
import type { Logger } from '../log/log.js';
import type { SocketAddress } from '../protocol/address.js';
import type { BodyConsumer, CgiResponseHead, Exchange } from '../protocol/exchange.js';
import { grantedHead, judgeAuthorizerAnswer } from '../protocol/authorizer.js';
import { Role } from '../protocol/fastcgi.js';
import { ErrorCodes, ProtocolError } from '../errors.js';
import { ABORTED, ABORTED_BACKEND_BUSY, badAuthorizerAnswer, closedEarly, connectFailed, connectTimedOut, protocolFault, readTimedOut, unencodable, type FailedOutcome } from './failures.js';
import { isIdempotent, type AttemptFacts } from './retry.js';
import type { UpstreamOptions, UpstreamOutcome } from './types.js';

export type ConnectionState = 'connecting' | 'busy' | 'idle' | 'closed';

export type DoneCallback = (outcome: UpstreamOutcome) => void;

/** The endpoint that owns a connection. */
export interface ConnectionOwner {
  /**
   * The request on `conn` is over; called exactly once per start(). `reusable`: the
   * connection is idle and may take another request (else it is closed). `stale`: a
   * reused connection was closed by the backend before any response byte, so the
   * request may be replayed on a fresh connection.
   */
  requestFinished(
    conn: UpstreamConnection,
    ex: Exchange,
    done: DoneCallback,
    outcome: UpstreamOutcome,
    reusable: boolean,
    stale: boolean,
  ): void;
  /** An idle connection was closed by the backend or failed; forget it. */
  idleClosed(conn: UpstreamConnection): void;
}

const NO_BYTES = Buffer.alloc(0);

/** One watch per timeout value in use (a few: the pools' connect_timeout and read_timeout). */
const watches = new Map<number, IdleWatch<UpstreamConnection>>();

/** The watch of every connection with this timeout; undefined for 0 (none). */
function watchFor(ms: number): IdleWatch<UpstreamConnection> | undefined {
  if (!(ms > 0)) return undefined;
  let w = watches.get(ms);
  if (w === undefined) {
    w = new IdleWatch<UpstreamConnection>(systemClock, ms, (c) => c.timedOut());
    watches.set(ms, w);
  }
  return w;
}

/** Socket buffer before the request body is paused: one full FastCGI record fits. */
const WRITE_HIGH_WATER = 128 * 1024;

export abstract class UpstreamConnection implements BodyConsumer {
  state: ConnectionState = 'connecting';
  /** Requests started on this connection; more than one means it was reused. */
  requests = 0;

  protected readonly socket: Socket;
  protected readonly owner: ConnectionOwner;
  protected readonly address: SocketAddress;
  protected readonly opts: UpstreamOptions;
  protected readonly logger: Logger;

  /** Its place in the endpoint's set of busy connections (src/protocol/dense-set.ts). */
  busySlot = -1;
  // The running request (undefined while idle or closed).
  protected ex: Exchange | undefined;
  private done: DoneCallback | undefined;
  /** Any byte from the backend since the request started. */
  protected gotBytes = false;
  /** The CGI response head went to the exchange. */
  protected headDone = false;
  /** The whole request body was written (the exchange detached its consumer). */
  protected bodyDone = false;
  /** The response body is read and dropped (an authorizer's granting answer has none that counts). */
  protected dropBody = false;
  /**
   * The request head reached our kernel (its write callback succeeded). Before that a
   * close means the backend never saw this request; after it, it may have run it.
   */
  protected headAccepted = false;
  /**
   * The client aborted and the backend was asked to cancel; its output is discarded
   * until the request ends, then 'aborted' is reported and the connection closed.
   */
  protected orphaned = false;
  /** data() returned false; 'drain' resumes the exchange. */
  private bodyPaused = false;
  /** Socket paused because the client is slow; onResponseDrain resumes it. */
  private readPaused = false;
  private lastError: Error | undefined;
  /** Monotonic ms of the socket's last I/O (read by the watch, src/util/idle-watch.ts). */
  activeAt = 0;
  /** On connectWatch while connecting, then on readWatch while a timeout may apply. */
  private readonly watchNode = new DeadlineNode<UpstreamConnection>(this);
  private readonly connectWatch: IdleWatch<UpstreamConnection> | undefined;
  private readonly readWatch: IdleWatch<UpstreamConnection> | undefined;
  /** Bytes the socket still held to write when a timeout was last found: fewer since is progress. */
  private pendingAtTimeout = 0;

  private readonly onAbortBound = (): void => this.onClientAbort();
  /** Write callback of a request head; bound once. */
  protected readonly onHeadWritten = (err?: Error | null): void => {
    if (!err) this.headAccepted = true;
  };

  /**
   * The request head was just written, alone and uncorked. Nothing left in the stream's
   * buffer and no error means the kernel took it all in that write (the usual case),
   * known without a write callback, which costs a tick per request; still buffered, an
   * empty write's callback says when the bytes before it are gone. A write that failed
   * (EPIPE: the backend closed a kept-alive connection) leaves the head not sent.
   */
  protected headWritten(): void {
    const s = this.socket;
    if (s.destroyed || s.errored !== null) return;
    if (s.writableLength === 0) this.headAccepted = true;
    else s.write(NO_BYTES, this.onHeadWritten);
  }
  private readonly onResponseDrainBound = (): void => this.resumeReading();

  constructor(owner: ConnectionOwner, address: SocketAddress, opts: UpstreamOptions, logger: Logger) {
    this.owner = owner;
    this.address = address;
    this.opts = opts;
    this.logger = logger;
    // writableHighWaterMark is passed through to the stream; @types/node does not list it.
    const connectOpts: NetConnectOpts & { writableHighWaterMark: number } =
      address.kind === 'unix'
        ? { path: address.path, writableHighWaterMark: WRITE_HIGH_WATER }
        : { host: address.host, port: address.port, noDelay: true, writableHighWaterMark: WRITE_HIGH_WATER };
    this.socket = connect(connectOpts);
    this.connectWatch = watchFor(opts.connectTimeout);
    this.readWatch = watchFor(opts.readTimeout);
    this.connectWatch?.watch(this.watchNode);
    this.socket.on('connect', () => this.onConnect());
    this.socket.on('data', (chunk: Buffer) => {
      this.gotBytes = true;
      // A turn (src/util/turn.ts): the responses this chunk ends leave once it is decoded,
      // after the freed worker got its next request.
      openTurn();
      this.activeAt = turnNow();
      try {
        this.onData(chunk);
      } catch (err) {
        this.onThrown(err, chunk);
      } finally {
        closeTurn();
      }
    });
    this.socket.on('end', () => this.onPeerClosed(undefined));
    this.socket.on('error', (err: Error) => {
      this.lastError ??= err;
    });
    this.socket.on('close', () => this.onPeerClosed(this.lastError));
    this.socket.on('drain', () => this.onWritable());
  }

  /** Runs `ex` on this connection (fresh, or idle from the endpoint). */
  start(ex: Exchange, done: DoneCallback): void {
    this.ex = ex;
    this.done = done;
    this.requests++;
    this.gotBytes = false;
    this.headDone = false;
    this.bodyDone = false;
    this.dropBody = false;
    this.headAccepted = false;
    this.orphaned = false;
    this.bodyPaused = false;
    ex.onAbort = this.onAbortBound;
    ex.onResponseDrain = this.onResponseDrainBound;
    this.resetResponse();
    if (this.state === 'idle') {
      // Still watched from the last request unless a timeout found it idle since.
      if (this.watchNode.list === null) this.readWatch?.watch(this.watchNode);
      else this.activeAt = turnNow();
      this.state = 'busy';
      this.beginRequest(ex);
    }
  }

  /** The running request's head reached the kernel: the backend may have it. */
  get headSent(): boolean {
    return this.headAccepted;
  }

  /** Closes the connection without reporting anything (idle ones, or after finish). */
  close(): void {
    this.state = 'closed';
    this.watchNode.list?.remove(this.watchNode);
    this.socket.destroy();
  }

  /** The endpoint is going away: fail the running request. */
  abandon(outcome: FailedOutcome): void {
    if (this.state !== 'busy' && this.state !== 'connecting') return;
    this.fail(outcome);
  }

  // ---- BodyConsumer (the exchange calls these while the body flows) ----------------

  abstract data(chunk: Buffer): boolean;
  abstract end(): void;

  // ---- protocol hooks ---------------------------------------------------------------

  /** Clears per-request response parsing state. */
  protected abstract resetResponse(): void;
  /** Writes the request head and starts consuming the body. */
  protected abstract sendRequest(ex: Exchange): void;
  /** Backend bytes while busy (subclasses check the state; idle bytes are a fault). */
  protected abstract onData(chunk: Buffer): void;
  /** EOF or error while busy. */
  protected abstract onClosedWhileBusy(err: Error | undefined): void;
  /** Best effort: tell the backend the client is gone (before the socket is destroyed, or drained). */
  protected abstract sendAbort(): void;
  /** The protocol can cancel a running request and still frame its end (FastCGI, not SCGI). */
  protected abstract readonly cancellable: boolean;
  /** True once the backend has sent the whole response, though the request is not finished yet (SCGI: before its EOF). */
  protected responseComplete(): boolean {
    return false;
  }

  // ---- helpers for subclasses -------------------------------------------------------

  /** Writes buffers as one writev; returns false (and remembers to resume) when the socket is full. */
  protected writeBody(bufs: readonly Buffer[]): boolean {
    const s = this.socket;
    this.activeAt = turnNow();
    let ok = true;
    if (bufs.length === 1) {
      ok = s.write(bufs[0]!);
    } else {
      s.cork();
      for (let i = 0; i < bufs.length; i++) ok = s.write(bufs[i]!);
      s.uncork();
    }
    if (!ok) this.bodyPaused = true;
    return ok;
  }

  private corked = false;
  private readonly uncorkBound = (): void => {
    this.corked = false;
    this.socket.uncork();
  };

  /**
   * Coalesces the writes of this tick into one. A backend may answer as soon as it has
   * the last body byte and then close; an end-of-request write sent after that fails and
   * the socket's error discards the answer already received.
   */
  protected corkUntilTickEnd(): void {
    if (this.corked) return;
    this.corked = true;
    this.socket.cork();
    process.nextTick(this.uncorkBound);
  }

  /**
   * Gives the parsed response head to the exchange. An authorizer's answer is judged
   * first: a granting one goes on without its body, one that cannot be acted on fails
   * the request (false: nothing more to do).
   */
  protected passHead(head: CgiResponseHead): boolean {
    const ex = this.ex!;
    if (ex.role === Role.Authorizer) {
      const answer = judgeAuthorizerAnswer(head);
      if (answer.kind === 'bad') {
        this.fail(badAuthorizerAnswer(this.address.text, answer.reason));
        return false;
      }
      if (answer.kind === 'allow') {
        this.dropBody = true;
        ex.granted = answer.variables.flat();
        head = grantedHead(head);
      }
    }
    ex.respondHead(head);
    return true;
  }

  /** Passes response body bytes (a view, never copied) on; pauses the socket when the client is slow. */
  protected deliverBody(chunk: Buffer): void {
    if (this.dropBody) return;
    this.flowControl(this.ex!.respondBody(chunk));
  }

  /** `ok`: what the client's side answered to the last bytes passed on; false pauses the socket. */
  protected flowControl(ok: boolean): void {
    if (ok || this.readPaused || this.state !== 'busy') return;
    this.readPaused = true;
    this.socket.pause();
    // Waiting for the client is not the backend's silence.
    this.watchNode.list?.remove(this.watchNode);
  }

  /** The request ended normally or failed; hands the connection back to the endpoint. */
  protected finish(outcome: UpstreamOutcome, reusable: boolean, stale: boolean): void {
    const ex = this.ex!;
    const done = this.done!;
    this.ex = undefined;
    this.done = undefined;
    if (ex.onAbort === this.onAbortBound) ex.onAbort = undefined;
    if (ex.onResponseDrain === this.onResponseDrainBound) ex.onResponseDrain = undefined;
    if (reusable) {
      this.state = 'idle';
      if (this.readPaused) this.resumeReading();
    } else {
      this.close();
    }
    this.owner.requestFinished(this, ex, done, outcome, reusable, stale);
  }

  /**
   * Destroys the socket and reports the failure. An orphaned request has no client to
   * answer: it is reported aborted, with the backend possibly still running it.
   */
  protected fail(outcome: FailedOutcome): void {
    this.close();
    this.finish(this.orphaned ? ABORTED_BACKEND_BUSY : outcome, false, false);
  }

  /** An orphaned request ended (END_REQUEST): the backend is free; the connection is not reused (our abort record may be unread). */
  protected finishOrphan(): void {
    this.close();
    this.finish(ABORTED, false, false);
  }

  /**
   * A decoder threw (the backend broke the protocol), or a sink called from inside
   * onData did (a bug): either way only this request and connection are lost.
   */
  private onThrown(err: unknown, chunk: Buffer): void {
    if (this.state !== 'busy') {
      this.close();
      return;
    }
    if (err instanceof ProtocolError) {
      this.fail(protocolFault(this.address.text, err, chunk));
      return;
    }
    this.logger.error({ code: ErrorCodes.INTERNAL, err }, 'internal error while relaying a backend response');
    this.fail(protocolFault(this.address.text, `internal error: ${(err as Error)?.message}`));
  }

  /** An idle connection misbehaved (bytes without a request): drop it quietly. */
  protected dropIdle(why: string): void {
    this.logger.debug({ why }, 'dropping idle backend connection');
    this.close();
    this.owner.idleClosed(this);
  }

  // ---- socket and exchange events ---------------------------------------------------

  private onConnect(): void {
    if (this.state !== 'connecting') return;
    this.state = 'busy';
    // Kept watched while idle too: a timeout then is ignored, and the next request watches it again.
    if (this.readWatch) this.readWatch.watch(this.watchNode);
    else this.connectWatch?.stop(this.watchNode);
    this.beginRequest(this.ex!);
  }

  private beginRequest(ex: Exchange): void {
    try {
      this.sendRequest(ex);
    } catch (err) {
      // Encoders refuse what the protocol cannot carry; that request fails, nothing else.
      if (this.state === 'busy') this.fail(unencodable(this.address.text, err as Error));
    }
  }

  /** @internal the watch found no I/O for the timeout; no longer watched. */
  timedOut(): void {
    if (this.state === 'connecting') {
      this.fail(connectTimedOut(this.address.text, this.opts.connectTimeout));
    } else if (this.state === 'busy' && !this.readPaused) {
      // Written bytes leaving slowly are not silence (as Node's own timer: progress on a pending write).
      const pending = this.socket.writableLength;
      const moving = pending > 0 && pending !== this.pendingAtTimeout;
      this.pendingAtTimeout = pending;
      // A backend waiting for body bytes the client has not sent is not silent; the
      // front end's body_timeout judges the client.
      if (moving || (!this.bodyDone && !this.ex!.bodyComplete)) {
        this.readWatch?.watch(this.watchNode);
        return;
      }
      this.fail(readTimedOut(this.address.text, this.opts.readTimeout));
    }
  }

  private onPeerClosed(err: Error | undefined): void {
    switch (this.state) {
      case 'connecting':
        this.fail(connectFailed(this.address.text, err ?? new Error('connection closed while connecting')));
        return;
      case 'busy':
        this.onClosedWhileBusy(err);
        return;
      case 'idle':
        this.logger.debug({ err: err?.message }, 'idle backend connection closed');
        this.close();
        this.owner.idleClosed(this);
        return;
      case 'closed':
        return;
    }
  }

  /** A busy connection closed; subclasses call this when EOF is not the normal end. */
  protected failClosed(err: Error | undefined): void {
    if (this.orphaned) {
      // The backend dropped the cancelled request; if its process is going, the pool hears of the exit.
      this.finishOrphan();
      return;
    }
    const facts: AttemptFacts = {
      failure: 'closed',
      headSent: this.headAccepted,
      responseBytes: this.gotBytes,
      reused: this.requests > 1,
      reset: (err as NodeJS.ErrnoException | undefined)?.code === 'ECONNRESET',
      idempotent: isIdempotent(this.ex!.params.get('REQUEST_METHOD')),
    };
    const outcome = closedEarly(this.address.text, err, this.headDone, facts);
    if (outcome.retryable && facts.reused) {
      // A kept-alive connection the backend had already given up on: the endpoint
      // replays on a fresh one (retry.ts says when that is safe).
      this.close();
      this.finish(outcome, false, true);
      return;
    }
    this.fail(outcome);
  }

  private onWritable(): void {
    this.activeAt = turnNow();
    if (!this.bodyPaused || this.state !== 'busy') return;
    this.bodyPaused = false;
    this.ex!.bodyConsumerDrained();
  }

  private resumeReading(): void {
    if (!this.readPaused) return;
    this.readPaused = false;
    if (this.state === 'closed') return;
    this.readWatch?.watch(this.watchNode);
    this.socket.resume();
  }

  private onClientAbort(): void {
    if (this.state === 'connecting') {
      // Nothing reached the backend.
      this.close();
      this.finish(ABORTED, false, false);
      return;
    }
    if (this.state !== 'busy' || this.orphaned) return;
    this.activeAt = turnNow();
    this.sendAbort();
    if (this.opts.drainOnAbort === true && this.cancellable && this.bodyDone) {
      // php-cgi ignores FCGI_ABORT_REQUEST and runs the script to its end: the worker is
      // busy until END_REQUEST, so the outcome waits for it (read_timeout still applies).
      // Not with the body unfinished: php-cgi would wait for the rest of it forever.
      this.orphaned = true;
      this.resumeReading();
      return;
    }
    // A closed socket makes php-cgi's next write fail, but the script may run on; unless
    // the whole response is here (a front end that closes once it has Content-Length bytes
    // races the backend's own EOF): then the backend is done with it.
    const busy = !this.responseComplete();
    this.close();
    this.finish(busy ? ABORTED_BACKEND_BUSY : ABORTED, false, false);
  }
}
