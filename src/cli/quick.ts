/**
 * The quick form of `fcgi-pm run`: listeners and one pool named "default" from
 * command-line options, turned into a config object in file form so it is validated
 * exactly like a config file.
 */
import { parseAddress } from '../protocol/address.js';

export interface QuickOptions {
  fastcgi: string[];
  scgi: string[];
  http: string[];
  documentRoot?: string;
  index?: string;
  backend: string[];
  command?: string;
  pm?: string;
  maxChildren?: string;
  user?: string;
  group?: string;
  accessLog?: boolean;
  shutdownTimeout?: string;
}

export const QUICK_POOL = 'default';

export class UsageError extends Error {
  override name = 'UsageError';
}

/** True when any quick-form listener or pool option was given. */
export function hasQuickOptions(o: QuickOptions): boolean {
  return o.fastcgi.length + o.scgi.length + o.http.length + o.backend.length > 0 || o.command !== undefined;
}

/**
 * Splits a command line like a POSIX shell would for words: spaces separate, single
 * quotes keep everything, double quotes keep spaces, backslash escapes one char.
 * No variables, globs or pipes: the program is run without a shell.
 */
export function splitCommandLine(s: string): string[] {
  const out: string[] = [];
  let cur = '';
  let inWord = false;
  let quote: '"' | "'" | undefined;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (quote === "'") {
      if (c === "'") quote = undefined;
      else cur += c;
    } else if (quote === '"') {
      if (c === '"') quote = undefined;
      else if (c === '\\' && i + 1 < s.length && '"\\$`'.includes(s[i + 1]!)) cur += s[++i];
      else cur += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      inWord = true;
    } else if (c === '\\' && i + 1 < s.length) {
      cur += s[++i];
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) out.push(cur);
      cur = '';
      inWord = false;
    } else {
      cur += c;
      inWord = true;
    }
  }
  if (quote !== undefined) throw new UsageError(`--command: unterminated ${quote} quote in ${JSON.stringify(s)}`);
  if (inWord) out.push(cur);
  return out;
}

/** "fastcgi://127.0.0.1:9001", "scgi://unix:/run/app.sock", "fastcgi:///run/php.sock" or a bare address (FastCGI). */
export function parseBackendUrl(url: string): { protocol: 'fastcgi' | 'scgi'; address: string } {
  const m = /^([a-z]+):\/\/(.*)$/i.exec(url);
  const scheme = m ? m[1]!.toLowerCase() : 'fastcgi';
  const address = m ? m[2]! : url;
  if (scheme !== 'fastcgi' && scheme !== 'scgi') throw new UsageError(`--backend ${url}: the scheme must be fastcgi:// or scgi://`);
  const a = parseAddress(address);
  if (typeof a === 'string') throw new UsageError(`--backend ${url}: ${a}`);
  return { protocol: scheme, address: a.text };
}

function checkAddress(option: string, value: string): string {
  const a = parseAddress(value);
  if (typeof a === 'string') throw new UsageError(`--${option} ${value}: ${a}`);
  return value;
}

/** Builds the config object (file form); throws UsageError for option mistakes. */
export function quickConfigObject(o: QuickOptions, logLevel: string | undefined): Record<string, unknown> {
  const listen: Array<Record<string, unknown>> = [];
  for (const a of o.fastcgi) listen.push({ protocol: 'fastcgi', address: checkAddress('fastcgi', a), pool: QUICK_POOL });
  for (const a of o.scgi) listen.push({ protocol: 'scgi', address: checkAddress('scgi', a), pool: QUICK_POOL });
  for (const a of o.http) {
    const l: Record<string, unknown> = { protocol: 'http', address: checkAddress('http', a), pool: QUICK_POOL };
    if (o.documentRoot !== undefined) l.document_root = o.documentRoot;
    if (o.index !== undefined) l.index = o.index;
    listen.push(l);
  }
  if (listen.length === 0) throw new UsageError('give at least one of --fastcgi ADDR, --scgi ADDR or --http ADDR (or -c FILE)');
  if ((o.documentRoot !== undefined || o.index !== undefined) && o.http.length === 0) throw new UsageError('--document-root and --index only apply with --http');

  const pool: Record<string, unknown> = {};
  if (o.backend.length > 0 && o.command !== undefined) throw new UsageError('give either --backend (running backends) or --command (spawn workers), not both');
  if (o.backend.length > 0) {
    const parsed = o.backend.map(parseBackendUrl);
    const protocols = new Set(parsed.map((b) => b.protocol));
    if (protocols.size > 1) throw new UsageError('all --backend addresses must use the same protocol (fastcgi:// or scgi://)');
    pool.backend = parsed[0]!.protocol;
    pool.backends = parsed.map((b) => b.address);
    if (o.pm !== undefined || o.maxChildren !== undefined) throw new UsageError('--pm and --max-children only apply with --command');
    if (o.user !== undefined || o.group !== undefined) throw new UsageError('--user and --group only apply with --command (backends run as whoever started them)');
  } else if (o.command !== undefined) {
    const argv = splitCommandLine(o.command);
    if (argv.length === 0) throw new UsageError('--command must name a program, e.g. --command php-cgi');
    pool.command = argv;
    if (o.pm !== undefined) pool.pm = o.pm;
    if (o.user !== undefined) pool.user = o.user;
    if (o.group !== undefined) pool.group = o.group;
    if (o.maxChildren !== undefined) {
      const n = Number(o.maxChildren);
      pool.max_children = /^\d+$/.test(o.maxChildren) ? n : o.maxChildren;
    }
  } else {
    throw new UsageError('give --backend fastcgi://ADDR (a running backend) or --command PROGRAM (workers to spawn)');
  }

  const obj: Record<string, unknown> = { listen, pools: { [QUICK_POOL]: pool } };
  const log: Record<string, unknown> = {};
  if (logLevel !== undefined) log.level = logLevel;
  if (o.accessLog === false) log.access = false;
  if (Object.keys(log).length > 0) obj.log = log;
  if (o.shutdownTimeout !== undefined) obj.shutdown_timeout = o.shutdownTimeout;
  return obj;
}
