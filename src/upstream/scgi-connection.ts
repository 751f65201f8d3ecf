/**
 * SCGI client side: one connection per request. The request is the netstring head
 * (CONTENT_LENGTH first) followed by the body; the response is everything the backend
 * sends until it closes: a CGI head, then the body. No keep-alive in SCGI.
 */
import type { Logger } from '../log/log.js';
import type { SocketAddress } from '../protocol/address.js';
import { CgiResponseHeadParser } from '../protocol/cgi-response.js';
import { announcedLength, type Exchange } from '../protocol/exchange.js';
import { encodeScgiHead } from '../protocol/scgi.js';
import { AUTHORIZER_AS_VARIABLE, Role } from '../protocol/fastcgi.js';
import { UpstreamConnection, type ConnectionOwner } from './connection-base.js';
import { clearArray } from '../util/clear-array.js';
import { DONE } from './failures.js';
import type { UpstreamOptions } from './types.js';

export class ScgiConnection extends UpstreamConnection {
  /** One per connection (SCGI: one request per connection anyway). */
  private readonly headParser = new CgiResponseHeadParser();
  /** One-element array for writeBody, reused. */
  private readonly one: Buffer[] = [];
  /** No abort message in SCGI: closing is the only signal, and the backend may run on. */
  protected readonly cancellable = false;
  /** Body bytes still due by the response's Content-Length; -1 when it has none. */
  private bodyDue = -1;

  constructor(owner: ConnectionOwner, address: SocketAddress, opts: UpstreamOptions, logger: Logger) {
    super(owner, address, opts, logger);
  }

  protected sendRequest(ex: Exchange): void {
    const s = this.socket;
    // SCGI has no roles: an authorizer request says what it is in a variable.
    if (ex.role === Role.Authorizer) ex.params.override(AUTHORIZER_AS_VARIABLE);
    s.cork();
    s.write(encodeScgiHead(ex.params));
    ex.consumeBody(this);
    s.uncork();
  }

  data(chunk: Buffer): boolean {
    if (this.state !== 'busy' || this.bodyDone || chunk.length === 0) return true;
    this.one[0] = chunk;
    const ok = this.writeBody(this.one);
    clearArray(this.one);
    return ok;
  }

  end(): void {
    // SCGI frames the body by CONTENT_LENGTH; no half-close, some servers take EOF as
    // the client going away.
    this.bodyDone = true;
  }

  protected sendAbort(): void {
    // SCGI has no abort message; closing the connection is the signal.
  }

  protected resetResponse(): void {
    this.headParser.reset();
    this.bodyDue = -1;
  }

  protected override responseComplete(): boolean {
    return this.headDone && this.bodyDue === 0;
  }

  protected onData(chunk: Buffer): void {
    if (this.state !== 'busy') return;
    if (this.headDone) {
      this.passBody(chunk);
      return;
    }
    // Throws ProtocolError on a bad head; the base turns it into BACKEND_PROTOCOL.
    const r = this.headParser.push(chunk);
    if (r === undefined) return;
    this.headDone = true;
    this.bodyDue = announcedLength(r.head);
    if (!this.passHead(r.head)) return;
    if (this.state === 'busy' && (r.rest.length > 0 || this.bodyDue === 0)) this.passBody(r.rest);
  }

  /**
   * Body bytes on to the client. The last byte the head announced ends the response for
   * the client at once: waiting for the backend's EOF would keep nginx waiting on its
   * FastCGI END_REQUEST, or see its SCGI connection close as an abort. The connection
   * (and the worker's seat) still waits for that EOF.
   */
  private passBody(chunk: Buffer): void {
    if (this.bodyDue > 0) this.bodyDue = Math.max(0, this.bodyDue - chunk.length);
    if (chunk.length > 0) this.deliverBody(chunk);
    if (this.bodyDue === 0 && this.state === 'busy') this.ex!.respondEnd();
  }

  protected onClosedWhileBusy(err: Error | undefined): void {
    if (this.headDone && (err === undefined || this.bodyDue === 0)) {
      // EOF is the end of an SCGI response (a reset after the whole announced body changes nothing).
      this.ex!.respondEnd();
      this.finish(DONE, false, false);
      return;
    }
    this.failClosed(err);
  }
}
