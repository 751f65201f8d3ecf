/**
 * Static files for the HTTP listener: a file under document_root that is not a script
 * of the pool (not in limit_extensions) is sent by fcgi-pm itself, never handed to a
 * worker that would run it. GET and HEAD, Content-Type by extension, ETag and
 * Last-Modified with 304s, one byte range (206/416); streamed from disk through the
 * exchange with back-pressure, so the access log and status see it like any request.
 *
 * The pure parts (type table, validators, ranges) are exported for the unit tests.
 */
import { open, type FileHandle } from 'node:fs/promises';
import type { Stats } from 'node:fs';
import type { Readable } from 'node:stream';
import { ErrorCodes, ProxyError } from '../errors.js';
import { reasonPhrase } from '../protocol/cgi-response.js';
import type { Exchange } from '../protocol/exchange.js';

const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8',
  htm: 'text/html; charset=utf-8',
  css: 'text/css; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  mjs: 'text/javascript; charset=utf-8',
  json: 'application/json',
  map: 'application/json',
  txt: 'text/plain; charset=utf-8',
  md: 'text/markdown; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
  xml: 'application/xml',
  svg: 'image/svg+xml',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  avif: 'image/avif',
  ico: 'image/vnd.microsoft.icon',
  bmp: 'image/bmp',
  woff: 'font/woff',
  woff2: 'font/woff2',
  ttf: 'font/ttf',
  otf: 'font/otf',
  pdf: 'application/pdf',
  zip: 'application/zip',
  gz: 'application/gzip',
  wasm: 'application/wasm',
  mp3: 'audio/mpeg',
  ogg: 'audio/ogg',
  wav: 'audio/wav',
  mp4: 'video/mp4',
  webm: 'video/webm',
};

/** Content-Type by the name's extension (case-insensitive); octet-stream when unknown. */
export function contentTypeOf(name: string): string {
  const base = name.slice(name.lastIndexOf('/') + 1);
  const dot = base.lastIndexOf('.');
  return (dot > 0 ? TYPES[base.slice(dot + 1).toLowerCase()] : undefined) ?? 'application/octet-stream';
}

/** nginx's strong validator: mtime seconds and size in hex. */
export function entityTag(st: Pick<Stats, 'mtimeMs' | 'size'>): string {
  return `"${Math.floor(st.mtimeMs / 1000).toString(16)}-${st.size.toString(16)}"`;
}

/** If-None-Match wins over If-Modified-Since (RFC 9110 13.2.2); weak comparison. */
export function isNotModified(ifNoneMatch: string | undefined, ifModifiedSince: string | undefined, etag: string, mtimeMs: number): boolean {
  if (ifNoneMatch !== undefined) {
    for (const t of ifNoneMatch.split(',')) {
      const tag = t.trim();
      if (tag === '*' || (tag.startsWith('W/') ? tag.slice(2) : tag) === etag) return true;
    }
    return false;
  }
  if (ifModifiedSince === undefined) return false;
  const since = Date.parse(ifModifiedSince);
  return !Number.isNaN(since) && Math.floor(mtimeMs / 1000) * 1000 <= since;
}

export type RangeAnswer = { start: number; end: number } | 'unsatisfiable' | undefined;

/**
 * One "bytes=a-b", "bytes=a-" or "bytes=-n" range, inclusive ends clamped to the size;
 * undefined (send it all) for anything else, several ranges included.
 */
export function parseRange(header: string | undefined, size: number): RangeAnswer {
  if (header === undefined) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return undefined;
  if (m[1] === '') {
    const n = Number(m[2]);
    return n === 0 || size === 0 ? 'unsatisfiable' : { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (m[2] !== '' && Number(m[2]) < start) return undefined;
  return start >= size ? 'unsatisfiable' : { start, end };
}

/** "/.env", "/a/.git/config": hidden files are not served, nor run. "/.well-known/..." is (ACME, security.txt). */
export function hasDotSegment(path: string): boolean {
  let i = path.indexOf('/.');
  while (i >= 0) {
    if (!(i === 0 && (path.startsWith('/.well-known/') || path === '/.well-known'))) return true;
    i = path.indexOf('/.', i + 1);
  }
  return false;
}

function respond(ex: Exchange, status: number, headers: Array<[string, string]>): void {
  ex.respondHead({ status, reason: reasonPhrase(status), headers, raw: Buffer.alloc(0) });
}

/** 405 with the Allow header RFC 9110 asks for. */
export function answerMethodNotAllowed(ex: Exchange): void {
  const body = Buffer.from(`405 ${reasonPhrase(405)} (${ErrorCodes.HTTP_METHOD_NOT_ALLOWED})\n`);
  respond(ex, 405, [['Allow', 'GET, HEAD'], ['Content-Type', 'text/plain; charset=utf-8'], ['Content-Length', String(body.length)]]);
  ex.respondBody(body);
  ex.respondEnd();
}

/** Sends the file `path` (latin1 bytes, already checked to lie in document_root). */
export async function serveFile(ex: Exchange, path: string): Promise<void> {
  let fh: FileHandle;
  try {
    fh = await open(Buffer.from(path, 'latin1'), 'r');
  } catch {
    ex.respondError(new ProxyError(ErrorCodes.HTTP_STATIC_READ, 404, 'static file vanished'));
    return;
  }
  let stream: Readable | undefined;
  try {
    stream = answerFromStat(ex, fh, path, await fh.stat());
  } catch (err) {
    ex.respondError(new ProxyError(ErrorCodes.HTTP_STATIC_READ, 500, `static file read failed: ${(err as Error).message}`));
  }
  if (stream === undefined) await fh.close().catch(() => undefined);
  else pipeToExchange(stream, ex);
}

/** Answers what needs no body (304, 416, HEAD) at once; otherwise the head, and the stream of the body to send. */
function answerFromStat(ex: Exchange, fh: FileHandle, path: string, st: Stats): Readable | undefined {
  if (ex.finished) return undefined;
  if (!st.isFile()) {
    ex.respondError(new ProxyError(ErrorCodes.HTTP_STATIC_READ, 404, 'static file is no longer a regular file'));
    return undefined;
  }
  const p = ex.params;
  const etag = entityTag(st);
  const lastModified = new Date(Math.floor(st.mtimeMs / 1000) * 1000).toUTCString();
  const headers: Array<[string, string]> = [['ETag', etag], ['Last-Modified', lastModified], ['Accept-Ranges', 'bytes']];
  if (isNotModified(p.get('HTTP_IF_NONE_MATCH'), p.get('HTTP_IF_MODIFIED_SINCE'), etag, st.mtimeMs)) {
    respond(ex, 304, headers);
    ex.respondEnd();
    return undefined;
  }
  const ifRange = p.get('HTTP_IF_RANGE');
  const range = ifRange === undefined || ifRange === etag || ifRange === lastModified ? parseRange(p.get('HTTP_RANGE'), st.size) : undefined;
  if (range === 'unsatisfiable') {
    respond(ex, 416, [['Content-Range', `bytes */${st.size}`], ['Content-Length', '0']]);
    ex.respondEnd();
    return undefined;
  }
  const start = range?.start ?? 0;
  const end = range?.end ?? st.size - 1;
  headers.push(['Content-Type', contentTypeOf(path)], ['Content-Length', String(end - start + 1)]);
  if (range !== undefined) headers.push(['Content-Range', `bytes ${start}-${end}/${st.size}`]);
  respond(ex, range === undefined ? 200 : 206, headers);
  if (p.get('REQUEST_METHOD') === 'HEAD' || end < start) {
    ex.respondEnd();
    return undefined;
  }
  return fh.createReadStream({ start, end, highWaterMark: 64 * 1024 });
}

/** Back-pressure both ways: a slow client pauses the disk reads; a gone client stops them. */
function pipeToExchange(stream: Readable, ex: Exchange): void {
  ex.onResponseDrain = () => stream.resume();
  ex.onAbort = () => stream.destroy();
  stream.on('data', (chunk: Buffer) => {
    if (!ex.respondBody(chunk)) stream.pause();
  });
  stream.on('end', () => ex.respondEnd());
  // After the head, a failure cuts the response so the client sees it incomplete.
  stream.on('error', (err) => ex.respondError(new ProxyError(ErrorCodes.HTTP_STATIC_READ, 500, `static file read failed: ${err.message}`)));
}
