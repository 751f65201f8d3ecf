/**
 * The bytes of one bench request, built once per run and written as-is for every
 * request (every request of a run is the same, and one FastCGI request id per
 * connection is enough: the bench never multiplexes).
 */
import { FCGI_KEEP_CONN, RecordType, Role, encodeRecord, encodeRequestHead, encodeStream } from '../protocol/fastcgi.js';
import { encodeScgiHead } from '../protocol/scgi.js';
import { cgiParamsFor, DEFAULT_BODY_TYPE, type BenchTarget, type RequestShape } from './target.js';

export const FCGI_REQUEST_ID = 1;

export interface WireRequest {
  bytes: Buffer;
  /** HTTP HEAD: the reply has no body whatever its headers say. */
  noBody: boolean;
  /** Whether a connection may carry the next request (SCGI never). */
  keepAlive: boolean;
}

export function buildWireRequest(t: BenchTarget, r: RequestShape): WireRequest {
  switch (t.protocol) {
    case 'fastcgi': {
      const params = cgiParamsFor(t, r);
      const parts = [encodeRequestHead(FCGI_REQUEST_ID, Role.Responder, r.keepAlive ? FCGI_KEEP_CONN : 0, params)];
      if (r.body !== undefined) encodeStream(RecordType.Stdin, FCGI_REQUEST_ID, r.body, parts);
      parts.push(encodeRecord(RecordType.Stdin, FCGI_REQUEST_ID));
      return { bytes: Buffer.concat(parts), noBody: false, keepAlive: r.keepAlive };
    }
    case 'scgi': {
      const head = encodeScgiHead(cgiParamsFor(t, r));
      return { bytes: r.body === undefined ? head : Buffer.concat([head, r.body]), noBody: false, keepAlive: false };
    }
    case 'http':
      return { bytes: httpRequestBytes(t, r), noBody: r.method === 'HEAD', keepAlive: r.keepAlive };
  }
}

function httpRequestBytes(t: BenchTarget, r: RequestShape): Buffer {
  const target = t.query === '' ? t.path : `${t.path}?${t.query}`;
  const hostHeader = t.address.kind === 'tcp' && t.port !== 80 ? `${t.host}:${t.port}` : t.host;
  const given = new Set(r.headers.map(([n]) => n.toLowerCase()));
  let head = `${r.method} ${target} HTTP/1.1\r\n`;
  if (!given.has('host')) head += `Host: ${hostHeader}\r\n`;
  if (!given.has('user-agent')) head += 'User-Agent: fcgi-pm-bench\r\n';
  if (!given.has('connection')) head += r.keepAlive ? 'Connection: keep-alive\r\n' : 'Connection: close\r\n';
  if (r.body !== undefined) {
    if (!given.has('content-type')) head += `Content-Type: ${DEFAULT_BODY_TYPE}\r\n`;
    head += `Content-Length: ${r.body.length}\r\n`;
  }
  for (const [name, value] of r.headers) if (name.toLowerCase() !== 'content-length') head += `${name}: ${value}\r\n`;
  head += '\r\n';
  const h = Buffer.from(head, 'utf8');
  return r.body === undefined ? h : Buffer.concat([h, r.body]);
}
