/**
 * Conversions for the operations keys: status paths, status_allow, access_format
 * and control_socket. Called from schema.ts's convert(); `bad` records the problem and
 * returns schema's INVALID marker.
 */
import * as nodePath from 'node:path';
import { parseAccessFormat } from './access-format.js';
import { parseAllowRule } from './cidr.js';
import { show } from './units.js';

export type OperationsKind = 'url-path' | 'allow-list' | 'client-list' | 'access-format' | 'path-or-off';

export function convertOperations<T>(kind: OperationsKind, v: unknown, bad: (msg: string) => T, baseDir: string): unknown | T {
  switch (kind) {
    case 'url-path': {
      if (typeof v !== 'string' || !v.startsWith('/')) return bad(`must be a URL path starting with "/", e.g. "/status", got ${show(v)}`);
      if (/[?#\s]/.test(v)) return bad(`must be a plain path (no query, fragment or spaces), got ${show(v)}`);
      return v;
    }
    case 'allow-list':
    case 'client-list': {
      // allowed_clients takes addresses only: the words describe REMOTE_ADDR, not a TCP peer.
      const words = kind === 'allow-list' ? ' (or unix, local, all)' : '';
      const list = typeof v === 'string' ? [v] : v;
      if (!Array.isArray(list) || list.length === 0) return bad(`must be a list of CIDR blocks or addresses${words}, got ${show(v)}`);
      const out: string[] = [];
      for (const item of list) {
        if (typeof item !== 'string') return bad(`must be a list of strings, got ${show(item)} in it`);
        const r = parseAllowRule(item);
        if (typeof r === 'string') return bad(r);
        if (words === '' && r.kind !== 'v4' && r.kind !== 'v6') return bad(`"${item}" is not an address or CIDR block; list the clients' addresses, or leave allowed_clients out to allow any`);
        out.push(item.trim().toLowerCase());
      }
      return out;
    }
    case 'access-format': {
      if (typeof v !== 'string' || v.trim() === '') return bad(`must be json, fpm or a %-format string, got ${show(v)}`);
      const s = v.trim().toLowerCase();
      if (s === 'json' || s === 'fpm') return s;
      const tokens = parseAccessFormat(v);
      if (typeof tokens === 'string') return bad(tokens);
      if (!tokens.some((t) => t.kind === 'field')) return bad(`must be json, fpm, or a format with at least one %-letter such as "%R %m %U %s", got ${show(v)}`);
      return v;
    }
    case 'path-or-off': {
      if (v === false || (typeof v === 'string' && ['off', 'none', 'false', 'no'].includes(v.trim().toLowerCase()))) return false;
      if (typeof v !== 'string' || v === '' || v.includes('\0')) return bad(`must be a path or off, got ${show(v)}`);
      // A bare word is more likely a typo of "off" than a socket meant to sit next to the config.
      if (!v.startsWith('/') && !v.startsWith('./') && !v.startsWith('../')) return bad(`must be an absolute path, a path starting with ./ (next to the config file) or off, got ${show(v)}`);
      const p = nodePath.resolve(baseDir, v);
      // sockaddr_un holds 107 bytes of path.
      if (Buffer.byteLength(p) > 107) return bad(`is ${Buffer.byteLength(p)} bytes long; Unix socket paths are limited to 107`);
      return p;
    }
  }
}
