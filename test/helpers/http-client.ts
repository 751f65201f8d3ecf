/**
 * A small HTTP client on node:http: whole-body responses, explicit keep-alive control,
 * and the local port of the socket used (to tell whether a connection was reused).
 */
import http from 'node:http';
import type { IncomingHttpHeaders } from 'node:http';

export interface HttpResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  text: string;
  /** Local port of the client socket, to check connection reuse. */
  localPort: number | undefined;
  reusedSocket: boolean;
}

export interface HttpRequestOptions {
  method?: string;
  headers?: Record<string, string | string[]>;
  body?: Buffer | string;
  /** false (default): a fresh connection closed after the response. An Agent: use it. */
  agent?: http.Agent | false;
  /** Rejects when no complete response arrived by then (default 30 s). */
  timeout?: number;
}

/** `url` is absolute ("http://127.0.0.1:PORT/path?x") or a socketPath-less path with opts.base. */
export function httpRequest(url: string, opts: HttpRequestOptions = {}): Promise<HttpResponse> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | string[]> = { ...opts.headers };
    if (opts.body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-length')) {
      headers['content-length'] = String(Buffer.byteLength(opts.body));
    }
    const req = http.request(url, { method: opts.method ?? 'GET', headers, agent: opts.agent ?? false });
    const timeout = opts.timeout ?? 30_000;
    const timer = setTimeout(() => {
      req.destroy(new Error(`HTTP ${opts.method ?? 'GET'} ${url}: no response within ${timeout} ms`));
    }, timeout);
    req.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.once('response', (res) => {
      const chunks: Buffer[] = [];
      const localPort = res.socket?.localPort;
      res.on('data', (c: Buffer) => chunks.push(c));
      res.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      res.once('end', () => {
        clearTimeout(timer);
        const body = Buffer.concat(chunks);
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body,
          text: body.toString('utf8'),
          localPort,
          reusedSocket: req.reusedSocket,
        });
      });
    });
    if (opts.body !== undefined) req.end(opts.body);
    else req.end();
  });
}

/** A keep-alive agent; `maxSockets` 1 forces every request onto the same connection. */
export function keepAliveAgent(maxSockets = 1): http.Agent {
  return new http.Agent({ keepAlive: true, maxSockets, maxFreeSockets: maxSockets });
}

/**
 * Streams `totalBytes` of `block` repeated as the request body, with Content-Length
 * (or chunked, with `chunked`), between an optional `prefix` and `suffix` (e.g.
 * multipart framing); `onChunk` sees each repeated-block chunk (e.g. to hash it).
 */
export function httpUpload(
  url: string,
  block: Buffer,
  totalBytes: number,
  opts: { headers?: Record<string, string>; timeout?: number; prefix?: Buffer; suffix?: Buffer; onChunk?: (chunk: Buffer) => void; chunked?: boolean } = {},
): Promise<HttpResponse> {
  const framing = (opts.prefix?.length ?? 0) + (opts.suffix?.length ?? 0);
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      method: 'POST',
      agent: false,
      headers: { 'content-type': 'application/octet-stream', ...(opts.chunked ? {} : { 'content-length': String(totalBytes + framing) }), ...opts.headers },
    });
    const timeout = opts.timeout ?? 60_000;
    const timer = setTimeout(() => req.destroy(new Error(`upload to ${url}: no response within ${timeout} ms`)), timeout);
    req.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.once('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.once('end', () => {
        clearTimeout(timer);
        const body = Buffer.concat(chunks);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text: body.toString('utf8'), localPort: undefined, reusedSocket: false });
      });
    });
    if (opts.prefix) req.write(opts.prefix);
    let sent = 0;
    const write = (): void => {
      while (sent < totalBytes) {
        const n = Math.min(block.length, totalBytes - sent);
        const chunk = n === block.length ? block : block.subarray(0, n);
        opts.onChunk?.(chunk);
        sent += n;
        if (!req.write(chunk)) {
          req.once('drain', write);
          return;
        }
      }
      if (opts.suffix) req.end(opts.suffix);
      else req.end();
    };
    write();
  });
}
