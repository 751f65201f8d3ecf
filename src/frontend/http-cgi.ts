/**
 * RFC 3875 request variables for a request that arrived as plain HTTP, so backends
 * (php-cgi, WSGI adapters) see what nginx's fastcgi_params would have given them.
 */
import { CgiParams } from '../protocol/params.js';
import type { ScriptSplit } from './script-path.js';

/** Where the request came from and what it asked; the HTTP server fills this from node:http. */
export interface HttpRequestFacts {
  method: string;
  /** Request target as received (latin1). */
  url: string;
  httpVersion: string;
  /** node:http rawHeaders: [name, value, name, value, ...]. */
  rawHeaders: readonly string[];
  localAddress: string | undefined;
  localPort: number | undefined;
  remoteAddress: string | undefined;
  remotePort: number | undefined;
  /** Listener address text, for SERVER_ADDR on Unix sockets. */
  listenerText: string;
}

export interface HttpCgiOptions {
  /** Document root as a latin1 string of its bytes, no trailing slash; undefined = none. */
  documentRoot: string | undefined;
}

/** Splits a request target into path and query (QUERY_STRING keeps its escapes). */
export function splitTarget(url: string): { path: string; query: string } {
  const q = url.indexOf('?');
  const rawPath = q < 0 ? url : url.slice(0, q);
  const query = q < 0 ? '' : url.slice(q + 1);
  // Absolute-form targets ("GET http://host/x"), as proxies send them.
  if (rawPath.startsWith('http://') || rawPath.startsWith('https://')) {
    const slash = rawPath.indexOf('/', rawPath.indexOf('//') + 2);
    return { path: slash < 0 ? '/' : rawPath.slice(slash), query };
  }
  return { path: rawPath, query };
}

const HEADER_NAME_CACHE = new Map<string, string | null>();

/**
 * "user-agent" → "HTTP_USER_AGENT"; null for headers never passed:
 * Proxy (httpoxy: it would become HTTP_PROXY, which CGI programs read as their proxy),
 * names with "_" (they would alias a dashed name, e.g. to spoof X-Forwarded-For; nginx
 * and Apache drop them too), Content-Type/-Length (they have their own variables).
 */
function cgiHeaderName(name: string): string | null {
  let v = HEADER_NAME_CACHE.get(name);
  if (v !== undefined) return v;
  const lower = name.toLowerCase();
  if (lower === 'proxy' || lower === 'content-type' || lower === 'content-length' || lower.includes('_')) v = null;
  else v = 'HTTP_' + lower.toUpperCase().replace(/-/g, '_');
  if (HEADER_NAME_CACHE.size < 512) HEADER_NAME_CACHE.set(name, v);
  return v;
}

/** Host header without its port; IPv6 literals keep their brackets. */
export function hostWithoutPort(host: string): string {
  if (host.startsWith('[')) {
    const end = host.indexOf(']');
    return end < 0 ? host : host.slice(0, end + 1);
  }
  const colon = host.indexOf(':');
  return colon < 0 ? host : host.slice(0, colon);
}

function portOfHost(host: string): string | undefined {
  const end = host.startsWith('[') ? host.indexOf(']') + 1 : 0;
  const colon = host.indexOf(':', end);
  return colon < 0 ? undefined : host.slice(colon + 1);
}

/** "::ffff:1.2.3.4" (an IPv4 client on a dual-stack socket) → "1.2.3.4". */
function plainAddress(a: string): string {
  return a.startsWith('::ffff:') && a.includes('.') ? a.slice(7) : a;
}

export function buildHttpCgiParams(f: HttpRequestFacts, query: string, split: ScriptSplit, opts: HttpCgiOptions): CgiParams {
  const flat: string[] = [];
  const root = opts.documentRoot;
  let host: string | undefined;
  let contentType: string | undefined;
  let contentLength: string | undefined;
  const headers: string[] = [];
  const seen = new Map<string, number>();
  const raw = f.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const value = raw[i + 1]!;
    const cgi = cgiHeaderName(name);
    if (cgi === null) {
      const lower = name.toLowerCase();
      if (lower === 'content-type') contentType ??= value;
      else if (lower === 'content-length') contentLength ??= value;
      continue;
    }
    if (cgi === 'HTTP_HOST') host ??= value;
    // A map, not a scan: thousands of headers must not cost quadratic time.
    const j = seen.get(cgi);
    if (j !== undefined) headers[j + 1] += (cgi === 'HTTP_COOKIE' ? '; ' : ', ') + value;
    else {
      seen.set(cgi, headers.length);
      headers.push(cgi, value);
    }
  }

  if (root !== undefined) flat.push('SCRIPT_FILENAME', root + split.scriptName);
  flat.push('QUERY_STRING', query, 'REQUEST_METHOD', f.method);
  if (contentType !== undefined) flat.push('CONTENT_TYPE', contentType);
  if (contentLength !== undefined) flat.push('CONTENT_LENGTH', contentLength);
  flat.push('SCRIPT_NAME', split.scriptName, 'PATH_INFO', split.pathInfo);
  if (root !== undefined && split.pathInfo !== '') flat.push('PATH_TRANSLATED', root + split.pathInfo);
  flat.push('REQUEST_URI', f.url, 'DOCUMENT_URI', split.path);
  if (root !== undefined) flat.push('DOCUMENT_ROOT', root);
  flat.push('SERVER_PROTOCOL', 'HTTP/' + f.httpVersion, 'REQUEST_SCHEME', 'http', 'GATEWAY_INTERFACE', 'CGI/1.1', 'SERVER_SOFTWARE', 'fcgi-pm');
  if (f.remoteAddress !== undefined) {
    flat.push('REMOTE_ADDR', plainAddress(f.remoteAddress), 'REMOTE_PORT', String(f.remotePort ?? ''));
  } else {
    flat.push('REMOTE_ADDR', 'unix:'); // what nginx says for Unix-socket clients
  }
  const localPort = f.localPort !== undefined ? String(f.localPort) : host !== undefined ? (portOfHost(host) ?? '80') : '80';
  flat.push('SERVER_ADDR', f.localAddress !== undefined ? plainAddress(f.localAddress) : f.listenerText, 'SERVER_PORT', localPort);
  flat.push('SERVER_NAME', host !== undefined ? hostWithoutPort(host) : f.localAddress !== undefined ? plainAddress(f.localAddress) : 'localhost');
  // php-cgi's cgi.force_redirect refuses requests without it.
  flat.push('REDIRECT_STATUS', '200');
  for (let i = 0; i < headers.length; i++) flat.push(headers[i]!);
  return new CgiParams(flat);
}

/** Encoded size of the variables the way FastCGI limits count them (names + values). */
export function paramsBytes(p: CgiParams): number {
  const pairs = p.pairs;
  let n = 0;
  for (let i = 0; i < pairs.length; i++) n += pairs[i]!.length;
  return n;
}
