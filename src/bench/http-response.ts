/**
 * A push parser for one HTTP/1.x response as a load generator needs it: the status,
 * whether the connection may be reused, where the body ends (Content-Length, chunked,
 * or the connection's end) and how many body bytes came. Header values other than the
 * framing ones are not kept. Pure; reset() readies it for the next response.
 */

export class HttpProtocolError extends Error {
  override name = 'HttpProtocolError';
}

const CR = 13;
const LF = 10;
const MAX_HEAD = 64 * 1024;

const enum St {
  Head,
  Length,
  ChunkSize,
  ChunkData,
  ChunkDataEnd,
  Trailers,
  UntilClose,
  Done,
}

export class HttpResponseParser {
  status = 0;
  /** False when the server said "Connection: close" or spoke HTTP/1.0 without keep-alive. */
  keepAlive = true;
  bodyBytes = 0;
  /** True once some bytes of this response arrived. */
  started = false;
  private state = St.Head;
  private head: Buffer | undefined;
  private remaining = 0;
  private noBody = false;
  // A chunk-size or trailer line that straddles reads.
  private line = '';

  /** `noBody`: the request was HEAD, so no body follows whatever the headers say. */
  reset(noBody: boolean): void {
    this.status = 0;
    this.keepAlive = true;
    this.bodyBytes = 0;
    this.started = false;
    this.state = St.Head;
    this.head = undefined;
    this.remaining = 0;
    this.noBody = noBody;
    this.line = '';
  }

  get done(): boolean {
    return this.state === St.Done;
  }

  /** True when the body runs to the end of the connection (EOF completes it). */
  get untilClose(): boolean {
    return this.state === St.UntilClose;
  }

  /** Feeds bytes; returns true when the response is complete. Bytes after it are ignored (no pipelining). */
  push(chunk: Buffer): boolean {
    this.started = true;
    let pos = 0;
    const len = chunk.length;
    while (pos < len && this.state !== St.Done) {
      switch (this.state) {
        case St.Head:
          pos = this.pushHead(chunk, pos);
          break;
        case St.Length: {
          const n = Math.min(this.remaining, len - pos);
          this.remaining -= n;
          this.bodyBytes += n;
          pos += n;
          if (this.remaining === 0) this.state = St.Done;
          break;
        }
        case St.UntilClose:
          this.bodyBytes += len - pos;
          pos = len;
          break;
        case St.ChunkData: {
          const n = Math.min(this.remaining, len - pos);
          this.remaining -= n;
          this.bodyBytes += n;
          pos += n;
          if (this.remaining === 0) this.state = St.ChunkDataEnd;
          break;
        }
        default:
          pos = this.pushLine(chunk, pos);
      }
    }
    return this.state === St.Done;
  }

  private pushHead(chunk: Buffer, pos: number): number {
    let buf: Buffer;
    let base: number;
    if (this.head === undefined) {
      buf = pos === 0 ? chunk : chunk.subarray(pos);
      base = 0;
    } else {
      base = this.head.length;
      buf = Buffer.concat([this.head, chunk.subarray(pos)]);
    }
    const end = buf.indexOf('\r\n\r\n', Math.max(0, base - 3), 'latin1');
    if (end < 0) {
      if (buf.length > MAX_HEAD) throw new HttpProtocolError(`HTTP response head over ${MAX_HEAD} bytes`);
      this.head = Buffer.from(buf);
      return chunk.length;
    }
    this.head = undefined;
    this.parseHead(buf.toString('latin1', 0, end));
    // Bytes of this chunk consumed: the part of the head that lay in it.
    return pos + (end + 4 - base);
  }

  private parseHead(text: string): void {
    const lines = text.split('\r\n');
    const m = /^HTTP\/1\.([01]) ([1-9]\d\d)(?: |$)/.exec(lines[0]!);
    if (!m) throw new HttpProtocolError(`bad HTTP status line: ${JSON.stringify(lines[0]!.slice(0, 80))}`);
    const status = Number(m[2]);
    let keepAlive = m[1] === '1';
    let length = -1;
    let chunked = false;
    for (let i = 1; i < lines.length; i++) {
      const l = lines[i]!;
      const colon = l.indexOf(':');
      if (colon <= 0) throw new HttpProtocolError(`bad HTTP header line: ${JSON.stringify(l.slice(0, 80))}`);
      const name = l.slice(0, colon).toLowerCase();
      if (name === 'content-length') {
        const v = l.slice(colon + 1).trim();
        if (!/^\d+$/.test(v)) throw new HttpProtocolError(`bad Content-Length: ${JSON.stringify(v)}`);
        length = Number(v);
      } else if (name === 'transfer-encoding') {
        chunked = /(^|,)\s*chunked\s*$/i.test(l.slice(colon + 1));
      } else if (name === 'connection') {
        const v = l.slice(colon + 1).toLowerCase();
        if (v.includes('close')) keepAlive = false;
        else if (v.includes('keep-alive')) keepAlive = true;
      }
    }
    // An interim 1xx (100 Continue, 103 Early Hints) is followed by the real response.
    if (status < 200 && status !== 101) return;
    this.status = status;
    this.keepAlive = keepAlive;
    if (this.noBody || status === 204 || status === 304 || status === 101) this.state = St.Done;
    else if (chunked) this.state = St.ChunkSize;
    else if (length >= 0) {
      this.remaining = length;
      this.state = length === 0 ? St.Done : St.Length;
    } else {
      this.keepAlive = false;
      this.state = St.UntilClose;
    }
  }

  /** Chunk-size lines, the CRLF after chunk data, and trailer lines. */
  private pushLine(chunk: Buffer, pos: number): number {
    const nl = chunk.indexOf(LF, pos);
    if (nl < 0) {
      this.line += chunk.toString('latin1', pos);
      if (this.line.length > 4096) throw new HttpProtocolError('chunked framing line too long');
      return chunk.length;
    }
    let line = this.line + chunk.toString('latin1', pos, nl);
    this.line = '';
    if (line.charCodeAt(line.length - 1) === CR) line = line.slice(0, -1);
    switch (this.state) {
      case St.ChunkDataEnd:
        if (line !== '') throw new HttpProtocolError('chunk data not followed by CRLF');
        this.state = St.ChunkSize;
        break;
      case St.ChunkSize: {
        const m = /^([0-9a-fA-F]+)\s*(;.*)?$/.exec(line);
        if (!m) throw new HttpProtocolError(`bad chunk size line: ${JSON.stringify(line.slice(0, 40))}`);
        const size = parseInt(m[1]!, 16);
        if (size === 0) this.state = St.Trailers;
        else {
          this.remaining = size;
          this.state = St.ChunkData;
        }
        break;
      }
      case St.Trailers:
        if (line === '') this.state = St.Done;
        break;
    }
    return nl + 1;
  }

  /** The connection ended; true when that completes the response (body read until close). */
  eof(): boolean {
    if (this.state === St.UntilClose) {
      this.state = St.Done;
      return true;
    }
    return this.state === St.Done;
  }
}
