/**
 * FastCGI client side of one connection: one request at a time (php-cgi does not
 * multiplex), request id 1, role RESPONDER (or AUTHORIZER: the exchange's role), FCGI_KEEP_CONN when keep-alive is on.
 *
 * Request:  BEGIN_REQUEST + PARAMS in one write, body as STDIN records, empty STDIN
 *           (all in that one write when there is no body).
 * Response: STDOUT → CGI head parser → respondHead, then body views; STDERR →
 *           respondStderr; to a sink that takes records (a FastCGI front end), the
 *           STDOUT records go on as they are (respondRecords), those carrying the head
 *           held until it parsed (a bad or missing head still fails as before, with
 *           nothing sent); END_REQUEST → respondEnd (acted on once the chunk that
 *           carried it is fully decoded, so stray bytes after it cannot leak into the
 *           next request on this connection), with the backend's own closing records (its
 *           END_REQUEST, after its empty STDOUT when it sent one and they lay side by side
 *           in its chunk: the sink may send them on, ids rewritten, as one view with the
 *           records before them).
 */
import type { Logger } from '../log/log.js';
import type { SocketAddress } from '../protocol/address.js';
import { CgiResponseHeadParser } from '../protocol/cgi-response.js';
import type { Exchange } from '../protocol/exchange.js';
import {
  AUTHORIZER_AS_VARIABLE,
  encodeAbortRequest,
  encodeRecord,
  encodeRequestHead,
  encodeStream,
  FCGI_KEEP_CONN,
  FcgiDecoder,
  joinAdjacent,
  parseEndRequest,
  ProtocolStatus,
  RecordType,
  Role,
  type FcgiRecord,
} from '../protocol/fastcgi.js';
import { clearArray } from '../util/clear-array.js';
import { turnNow } from '../util/turn.js';
import { UpstreamConnection, type ConnectionOwner } from './connection-base.js';
import { authorizerRoleRefused, DONE, protocolFault, refusedRequest } from './failures.js';
import type { UpstreamOptions } from './types.js';

/** One request at a time per connection, so every request uses the same id. */
const REQUEST_ID = 1;

let emptyStdin: Buffer | undefined;
let abortRecord: Buffer | undefined;

export class FastcgiConnection extends UpstreamConnection {
  private readonly decoder: FcgiDecoder;
  /** One per connection, reset per request. */
  private readonly headParser = new CgiResponseHeadParser();
  /** END_REQUEST (complete) decoded in the current chunk; acted on after it. */
  private endSeen = false;
  /** STDOUT bytes arrived for the current request. */
  private sawStdout = false;
  /** Records after END_REQUEST or while idle: the connection is not reused. */
  private tainted = false;
  /** Reused output array for encodeStream. */
  private readonly out: Buffer[] = [];
  /** The sink takes the backend's STDOUT records as they are. */
  private passRecords = false;
  /** Raw STDOUT records of a head not yet complete (held so a bad head fails before any byte went out). */
  private readonly heldRecords: Buffer[] = [];
  /** The backend's empty STDOUT record (the end of the stream), when records are passed. */
  private stdoutEnd: Buffer | undefined;
  /** Its closing records as one view, for respondEnd: its empty STDOUT (when it sent one) and END_REQUEST. */
  private endRecords: Buffer | undefined;
  protected readonly cancellable = true;

  constructor(owner: ConnectionOwner, address: SocketAddress, opts: UpstreamOptions, logger: Logger) {
    super(owner, address, opts, logger);
    this.decoder = new FcgiDecoder((rec) => this.onRecord(rec), true, true);
  }

  // ---- request ------------------------------------------------------------------------

  protected sendRequest(ex: Exchange): void {
    const s = this.socket;
    const flags = this.opts.keepAlive ? FCGI_KEEP_CONN : 0;
    let role: number = Role.Responder;
    if (ex.role === Role.Authorizer) {
      if (this.opts.authorizerRole === 'responder') ex.params.override(AUTHORIZER_AS_VARIABLE);
      else role = Role.Authorizer;
    }
    if (ex.noBody) {
      // The usual GET: BEGIN_REQUEST, PARAMS and the empty STDIN in one buffer, one write.
      this.bodyDone = true;
      s.write(encodeRequestHead(REQUEST_ID, role, flags, ex.params, true));
      this.headWritten();
      ex.consumeBody(this); // detaches at once: end() finds bodyDone
      return;
    }
    s.cork();
    s.write(encodeRequestHead(REQUEST_ID, role, flags, ex.params), this.onHeadWritten);
    // Delivers what the front end already has (often the whole body) inside this cork.
    ex.consumeBody(this);
    s.uncork();
  }

  data(chunk: Buffer): boolean {
    if (this.state !== 'busy' || this.bodyDone) return true;
    if (chunk.length === 0) return true;
    const out = this.out;
    clearArray(out);
    encodeStream(RecordType.Stdin, REQUEST_ID, chunk, out);
    // Held until the end of this tick so that an end() that follows (the last body
    // bytes) leaves in the same write as them; see end().
    this.corkUntilTickEnd();
    const ok = this.writeBody(out);
    clearArray(out);
    return ok;
  }

  end(): void {
    if (this.state !== 'busy' || this.bodyDone) return;
    this.bodyDone = true;
    this.activeAt = turnNow();
    this.socket.write((emptyStdin ??= encodeRecord(RecordType.Stdin, REQUEST_ID)));
  }

  protected sendAbort(): void {
    this.socket.write((abortRecord ??= encodeAbortRequest(REQUEST_ID)));
  }

  // ---- response -----------------------------------------------------------------------

  protected resetResponse(): void {
    this.headParser.reset();
    this.endSeen = false;
    this.sawStdout = false;
    // An authorizer's answer may be rewritten (src/protocol/authorizer.ts): not passed as records.
    const ex = this.ex;
    this.passRecords = ex !== undefined && ex.sink.records !== undefined && ex.role !== Role.Authorizer;
    clearArray(this.heldRecords);
    this.stdoutEnd = this.endRecords = undefined;
  }

  protected onData(chunk: Buffer): void {
    if (this.state === 'idle') {
      this.dropIdle('backend sent data while no request was running');
      return;
    }
    if (this.state !== 'busy') return;
    // Decoder and head parser throw ProtocolError; the base turns it into BACKEND_PROTOCOL.
    this.decoder.push(chunk);
    if (this.endSeen && this.state === 'busy') this.complete();
  }

  private onRecord(rec: FcgiRecord): void {
    if (this.state !== 'busy' || this.endSeen) {
      if (rec.requestId !== 0) this.tainted = true;
      return;
    }
    if (rec.requestId !== REQUEST_ID) {
      // Management records (id 0, e.g. GET_VALUES_RESULT) are not for a request.
      if (rec.requestId === 0) return;
      this.fail(protocolFault(this.address.text, `record for request id ${rec.requestId}, expected ${REQUEST_ID}`));
      return;
    }
    switch (rec.type) {
      case RecordType.Stdout:
        if (this.orphaned) return; // nobody to send it to
        this.onStdout(rec.content, this.passRecords ? rec.raw : undefined);
        return;
      case RecordType.Stderr:
        if (rec.content.length > 0) this.ex!.respondStderr(rec.content);
        return;
      case RecordType.EndRequest:
        this.onEndRequest(rec.content, this.passRecords ? rec.raw : undefined);
        return;
      default:
        this.fail(protocolFault(this.address.text, `unexpected record type ${rec.type}`));
    }
  }

  /** `raw`: the whole record, when the sink takes records. */
  private onStdout(content: Buffer, raw: Buffer | undefined): void {
    if (content.length === 0) {
      this.stdoutEnd = raw; // end of the STDOUT stream; END_REQUEST follows
      return;
    }
    this.sawStdout = true;
    if (this.headDone) {
      if (raw !== undefined) this.flowControl(this.ex!.respondRecords(raw, content.length));
      else this.deliverBody(content);
      return;
    }
    const held = this.heldRecords;
    if (raw !== undefined) held.push(raw);
    const r = this.headParser.push(content);
    if (r === undefined) return;
    this.headDone = true;
    const ex = this.ex!;
    ex.recordsPassed = raw !== undefined;
    if (!this.passHead(r.head)) return;
    // The sink may have aborted the exchange from inside respondHead.
    if (this.state !== 'busy') {
      clearArray(held);
      return;
    }
    if (raw === undefined) {
      if (r.rest.length > 0) this.deliverBody(r.rest);
      return;
    }
    const last = held.length - 1;
    let ok = true;
    for (let i = 0; i <= last; i++) ok = ex.respondRecords(held[i]!, i === last ? r.rest.length : 0);
    clearArray(held);
    this.flowControl(ok);
  }

  private onEndRequest(content: Buffer, raw: Buffer | undefined): void {
    if (this.orphaned) {
      // The cancelled request is over, whatever its status: the worker is free.
      this.endSeen = true;
      return;
    }
    if (content.length < 8) {
      this.fail(protocolFault(this.address.text, `END_REQUEST body of ${content.length} bytes`));
      return;
    }
    const { protocolStatus } = parseEndRequest(content);
    if (protocolStatus === ProtocolStatus.CantMpxConn || protocolStatus === ProtocolStatus.Overloaded) {
      const why = protocolStatus === ProtocolStatus.Overloaded ? 'FCGI_OVERLOADED' : 'FCGI_CANT_MPX_CONN';
      if (!this.sawStdout) {
        this.fail(refusedRequest(this.address.text, why));
      } else {
        this.fail(protocolFault(this.address.text, `${why} after response output`));
      }
      return;
    }
    if (protocolStatus === ProtocolStatus.UnknownRole && this.ex!.role === Role.Authorizer && !this.sawStdout) {
      this.fail(authorizerRoleRefused(this.address.text));
      return;
    }
    if (protocolStatus !== ProtocolStatus.RequestComplete) {
      this.fail(protocolFault(this.address.text, `END_REQUEST with protocol status ${protocolStatus}`));
      return;
    }
    if (!this.headDone) {
      this.fail(protocolFault(this.address.text, 'request ended without a complete CGI response head'));
      return;
    }
    this.endSeen = true;
    // php-cgi sends no empty STDOUT before its END_REQUEST (it is what front ends get
    // from php-fpm too): its END_REQUEST alone is then its closing record.
    const end = this.stdoutEnd;
    if (raw !== undefined) this.endRecords = end === undefined ? raw : joinAdjacent(end, raw);
  }

  private complete(): void {
    this.endSeen = false;
    if (this.orphaned) {
      this.finishOrphan();
      return;
    }
    // Reuse only a connection whose request went out completely: leftover STDIN for
    // id 1 would be read as part of the next request.
    const reusable = this.opts.keepAlive && this.bodyDone && !this.tainted && !this.decoder.midRecord;
    const end = this.endRecords;
    this.stdoutEnd = this.endRecords = undefined;
    this.ex!.respondEnd(end);
    this.finish(DONE, reusable, false);
  }

  protected onClosedWhileBusy(err: Error | undefined): void {
    this.failClosed(err);
  }
}
