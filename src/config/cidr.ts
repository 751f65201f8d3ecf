/**
 * Client address rules for status_allow: CIDR blocks ("10.0.0.0/8", "fd00::/8"), single
 * addresses ("127.0.0.1", "::1"), and three words: `unix` (a client the front end saw on
 * a Unix socket: REMOTE_ADDR "unix:"), `local` (no REMOTE_ADDR at all: a FastCGI client
 * talking to fcgi-pm directly, as php-fpm exporters do) and `all`.
 *
 * Pure. parseAllowRule() validates (config time); compileAllow() builds the matcher once
 * per listener; the match itself allocates nothing but the address parse.
 */
import { isIPv4, isIPv6 } from 'node:net';

export type AllowRule =
  | { kind: 'v4'; net: number; bits: number }
  | { kind: 'v6'; net: bigint; bits: number }
  | { kind: 'unix' }
  | { kind: 'local' }
  | { kind: 'all' };

export const DEFAULT_STATUS_ALLOW: readonly string[] = ['127.0.0.0/8', '::1', 'unix', 'local'];

function v4ToInt(s: string): number {
  const p = s.split('.');
  return ((Number(p[0]) << 24) | (Number(p[1]) << 16) | (Number(p[2]) << 8) | Number(p[3])) >>> 0;
}

function v6ToBigInt(s: string): bigint {
  // An embedded IPv4 tail ("::ffff:1.2.3.4") becomes two hex groups first.
  let text = s;
  const dot = text.lastIndexOf(':');
  if (text.includes('.')) {
    const n = v4ToInt(text.slice(dot + 1));
    text = `${text.slice(0, dot + 1)}${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') as [string, string] : [text, undefined];
  const h = head === '' ? [] : head.split(':');
  const t = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  let out = 0n;
  for (const g of groups) out = (out << 16n) | BigInt(parseInt(g, 16));
  return out;
}

function maskV4(bits: number): number {
  return bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
}

function maskV6(bits: number): bigint {
  return bits === 0 ? 0n : ((1n << 128n) - 1n) ^ ((1n << BigInt(128 - bits)) - 1n);
}

/** A rule, or a message saying what is wrong with it. */
export function parseAllowRule(text: string): AllowRule | string {
  const s = text.trim().toLowerCase();
  if (s === 'unix' || s === 'local' || s === 'all') return { kind: s };
  const slash = s.indexOf('/');
  const addr = slash < 0 ? s : s.slice(0, slash);
  const bitsText = slash < 0 ? undefined : s.slice(slash + 1);
  const v4 = isIPv4(addr);
  if (!v4 && !isIPv6(addr)) return `"${text}" is not an IP address, a CIDR block such as "10.0.0.0/8", or one of unix, local, all`;
  const max = v4 ? 32 : 128;
  let bits = max;
  if (bitsText !== undefined) {
    if (!/^\d{1,3}$/.test(bitsText) || Number(bitsText) > max) return `"${text}": the prefix length must be 0..${max}`;
    bits = Number(bitsText);
  }
  // "::ffff:10.0.0.0/104" is how an IPv4 client of a dual-stack socket looks: match it as IPv4.
  const mapped = !v4 && addr.startsWith('::ffff:') && isIPv4(addr.slice(7)) && bits >= 96;
  if (v4 || mapped) {
    const b = mapped ? bits - 96 : bits;
    return { kind: 'v4', net: (v4ToInt(mapped ? addr.slice(7) : addr) & maskV4(b)) >>> 0, bits: b };
  }
  return { kind: 'v6', net: v6ToBigInt(addr) & maskV6(bits), bits };
}

export type AllowMatcher = (remoteAddr: string | undefined) => boolean;

/** Compiles validated rules (strings that parseAllowRule accepted; others are skipped). */
export function compileAllow(rules: readonly string[]): AllowMatcher {
  const parsed = rules.map(parseAllowRule).filter((r): r is AllowRule => typeof r !== 'string');
  const all = parsed.some((r) => r.kind === 'all');
  const unix = parsed.some((r) => r.kind === 'unix');
  const local = parsed.some((r) => r.kind === 'local');
  const v4 = parsed.filter((r): r is Extract<AllowRule, { kind: 'v4' }> => r.kind === 'v4');
  const v6 = parsed.filter((r): r is Extract<AllowRule, { kind: 'v6' }> => r.kind === 'v6');
  return (remote) => {
    if (all) return true;
    if (remote === undefined || remote === '') return local;
    if (remote.startsWith('unix')) return unix;
    let a = remote;
    // IPv4 clients of a dual-stack socket show up as "::ffff:1.2.3.4".
    if (a.startsWith('::ffff:') && isIPv4(a.slice(7))) a = a.slice(7);
    const pct = a.indexOf('%'); // zone index of a link-local address
    if (pct >= 0) a = a.slice(0, pct);
    if (isIPv4(a)) {
      const n = v4ToInt(a);
      for (const r of v4) if (((n & maskV4(r.bits)) >>> 0) === r.net) return true;
      return false;
    }
    if (isIPv6(a)) {
      const n = v6ToBigInt(a);
      for (const r of v6) if ((n & maskV6(r.bits)) === r.net) return true;
    }
    return false;
  };
}
