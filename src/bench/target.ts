/**
 * Bench targets as URLs, and the CGI variables a request to one carries.
 *
 *   fcgi://127.0.0.1:9000/index.php?x=1     FastCGI over TCP ("fastcgi://" works too)
 *   fcgi://unix:/run/php.sock/index.php     FastCGI over a Unix socket
 *   fcgi://unix:/run/php.sock:/index.php    the same (curl's and nginx's notation)
 *   scgi://127.0.0.1:4000/app               SCGI
 *   http://127.0.0.1:8080/index.php         HTTP/1.1
 *   http://unix:/run/fcgi-pm.sock:/         HTTP over a Unix socket
 *
 * Unix sockets: the socket path runs from "unix:" to the first path component that ends
 * in ".sock" or is a socket on disk, or else to the first ":" (the request path follows
 * that colon); with neither, all of it is the socket path and the request path is "/".
 * Socket paths that themselves hold a ":" or "?" cannot be written.
 */
import { statSync } from 'node:fs';
import { parseAddress, type SocketAddress } from '../protocol/address.js';
import { CgiParams } from '../protocol/params.js';

export type BenchProtocol = 'fastcgi' | 'scgi' | 'http';

export interface BenchTarget {
  protocol: BenchProtocol;
  address: SocketAddress;
  /** Decoded-as-typed request path, starting with "/" (no query). */
  path: string;
  /** Without the "?"; "" when none. */
  query: string;
  /** For the Host header and SERVER_NAME/SERVER_PORT. */
  host: string;
  port: number;
  /** The URL as given, for reports. */
  url: string;
}

export class TargetError extends Error {
  override name = 'TargetError';
}

const SCHEMES: Record<string, BenchProtocol> = { fcgi: 'fastcgi', fastcgi: 'fastcgi', scgi: 'scgi', http: 'http' };
const DEFAULT_PORTS: Record<BenchProtocol, number> = { fastcgi: 9000, scgi: 4000, http: 80 };

export function parseTarget(url: string): BenchTarget {
  const m = /^([a-z]+):\/\/(.*)$/i.exec(url.trim());
  if (!m) throw new TargetError(`target ${JSON.stringify(url)}: expected fcgi://, scgi:// or http:// followed by an address and a path`);
  const protocol = SCHEMES[m[1]!.toLowerCase()];
  if (protocol === undefined) throw new TargetError(`target ${url}: unknown scheme "${m[1]}://" (use fcgi://, scgi:// or http://)`);
  const rest = m[2]!;
  let addrText: string;
  let pathAndQuery: string;
  if (rest.startsWith('unix:')) {
    const split = splitUnix(rest.slice(5));
    addrText = `unix:${split.socket}`;
    pathAndQuery = split.rest;
  } else {
    const slash = rest.search(/[/?]/);
    addrText = slash < 0 ? rest : rest.slice(0, slash);
    pathAndQuery = slash < 0 ? '/' : rest.slice(slash);
    // A bare host ("http://localhost/") gets the scheme's usual port.
    if (!/:\d+$/.test(addrText) && !addrText.endsWith(']:')) addrText = `${addrText}:${DEFAULT_PORTS[protocol]}`;
  }
  if (pathAndQuery.startsWith('?')) pathAndQuery = `/${pathAndQuery}`;
  if (!pathAndQuery.startsWith('/')) throw new TargetError(`target ${url}: the request path must start with "/"`);
  const address = parseAddress(addrText);
  if (typeof address === 'string') throw new TargetError(`target ${url}: ${address}`);
  const q = pathAndQuery.indexOf('?');
  const path = q < 0 ? pathAndQuery : pathAndQuery.slice(0, q);
  const query = q < 0 ? '' : pathAndQuery.slice(q + 1);
  const host = address.kind === 'tcp' ? address.host : 'localhost';
  const port = address.kind === 'tcp' ? address.port : DEFAULT_PORTS[protocol];
  return { protocol, address, path, query, host, port, url };
}

function isSocket(path: string): boolean {
  try {
    return statSync(path).isSocket();
  } catch {
    return false;
  }
}

/** "/run/php.sock/x.php?q" → socket "/run/php.sock", rest "/x.php?q" (see the header). */
export function splitUnix(text: string): { socket: string; rest: string } {
  const stop = text.search(/[:?]/);
  const limit = stop < 0 ? text.length : stop;
  for (let i = text.indexOf('/', 1); ; i = text.indexOf('/', i + 1)) {
    const end = i < 0 || i > limit ? limit : i;
    const candidate = text.slice(0, end);
    if (end < limit && (candidate.endsWith('.sock') || isSocket(candidate))) return { socket: candidate, rest: text.slice(end) };
    if (end === limit) break;
  }
  const socket = text.slice(0, limit);
  if (stop < 0) return { socket, rest: '/' };
  return { socket, rest: text[stop] === ':' ? text.slice(stop + 1) || '/' : text.slice(stop) };
}

/** UTF-8 text as the latin1 byte string CgiParams carries. */
export function toLatin1(s: string): string {
  return Buffer.from(s, 'utf8').toString('latin1');
}

/**
 * A body's type unless --content-type or a Content-Type header says otherwise: opaque
 * bytes. Form-urlencoded would make PHP parse a binary body as form variables.
 */
export const DEFAULT_BODY_TYPE = 'application/octet-stream';

export interface RequestShape {
  method: string;
  /** Request body, or undefined for none. */
  body: Buffer | undefined;
  /** "Name: value" headers as given (HTTP headers; HTTP_* variables for FastCGI/SCGI). */
  headers: Array<[string, string]>;
  /** --param NAME=VALUE overrides and additions, in order. */
  params: Array<[string, string]>;
  keepAlive: boolean;
}

/**
 * The CGI variables a web server would send for this URL: what nginx's fastcgi_params
 * sets, then the HTTP headers as HTTP_*, then the --param values over everything.
 * SCRIPT_FILENAME defaults to DOCUMENT_ROOT + SCRIPT_NAME when a DOCUMENT_ROOT is given.
 */
export function cgiParamsFor(t: BenchTarget, r: RequestShape): CgiParams {
  const p = new CgiParams();
  const hostHeader = t.address.kind === 'tcp' && t.port !== 80 ? `${t.host}:${t.port}` : t.host;
  p.set('GATEWAY_INTERFACE', 'CGI/1.1');
  p.set('SERVER_SOFTWARE', 'fcgi-pm-bench');
  p.set('REQUEST_METHOD', r.method);
  p.set('REQUEST_SCHEME', 'http');
  p.set('SERVER_PROTOCOL', 'HTTP/1.1');
  p.set('SCRIPT_NAME', toLatin1(t.path));
  p.set('DOCUMENT_URI', toLatin1(t.path));
  p.set('REQUEST_URI', toLatin1(t.query === '' ? t.path : `${t.path}?${t.query}`));
  p.set('QUERY_STRING', toLatin1(t.query));
  p.set('CONTENT_LENGTH', r.body === undefined ? '' : String(r.body.length));
  p.set('CONTENT_TYPE', r.body === undefined ? '' : DEFAULT_BODY_TYPE);
  p.set('SERVER_NAME', t.host);
  p.set('SERVER_ADDR', t.address.kind === 'tcp' ? t.host : '127.0.0.1');
  p.set('SERVER_PORT', String(t.port));
  p.set('REMOTE_ADDR', '127.0.0.1');
  p.set('REMOTE_PORT', '0');
  p.set('REDIRECT_STATUS', '200');
  p.set('HTTP_HOST', hostHeader);
  p.set('HTTP_USER_AGENT', 'fcgi-pm-bench');
  for (const [name, value] of r.headers) {
    const key = name.toLowerCase();
    if (key === 'content-type') p.set('CONTENT_TYPE', toLatin1(value));
    else if (key !== 'content-length') p.set(`HTTP_${name.toUpperCase().replace(/-/g, '_')}`, toLatin1(value));
  }
  let explicitFilename = false;
  for (const [name, value] of r.params) {
    p.set(name, toLatin1(value));
    if (name === 'SCRIPT_FILENAME') explicitFilename = true;
  }
  const root = p.get('DOCUMENT_ROOT');
  if (!explicitFilename && root !== undefined) p.set('SCRIPT_FILENAME', root.replace(/\/+$/, '') + p.get('SCRIPT_NAME'));
  return p;
}
