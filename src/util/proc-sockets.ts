/**
 * What a socket descriptor of this process is, from Linux's documented /proc files: its
 * inode (/proc/self/fd), then its bound address (/proc/net/tcp, tcp6, unix). Used to name
 * inherited sockets (socket activation, upgrade in place) and to find the descriptor of a
 * socket we listen on, which Node does not expose (its handle's fd is private).
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

export interface SocketFacts {
  tcp: { host: string; port: number } | undefined;
  unixPath: string | undefined;
  /** TCP: in state LISTEN; Unix: a listening (SO_ACCEPTCON) socket. */
  listening: boolean;
}

function inodeOf(fd: number | string): string | undefined {
  try {
    const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/self/fd/${fd}`));
    return m ? m[1] : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The rows of a socket table whose inode column (`col`) is one of `inodes`. A busy host's
 * /proc/net/tcp holds tens of thousands of rows (TIME_WAIT included): only a row that
 * contains a wanted inode as a whole number is split, not every row.
 */
function readRows(path: string, col: number, inodes: ReadonlySet<string>): string[][] {
  let text: string;
  try {
    text = readFileSync(path, 'latin1');
  } catch {
    return [];
  }
  const out: string[][] = [];
  for (const inode of inodes) {
    const needle = ` ${inode}`;
    for (let at = text.indexOf(needle); at >= 0; at = text.indexOf(needle, at + 1)) {
      // The whole number: a space, a line's end or the text's after it (a Unix row without a path ends with its inode).
      const next = text.charCodeAt(at + needle.length);
      if (next === next && next !== 0x20 && next !== 0x0a) continue;
      const start = text.lastIndexOf('\n', at) + 1;
      const end = text.indexOf('\n', at);
      const f = text.slice(start, end < 0 ? undefined : end).trim().split(/\s+/);
      if (f[col] === inode) out.push(f);
    }
  }
  return out;
}

/** "0100007F:2328" (little-endian words) → { host: '127.0.0.1', port: 9000 }. */
export function parseProcAddress(hex: string): { host: string; port: number } {
  const [addr, port] = hex.split(':') as [string, string];
  const words: number[] = [];
  for (let i = 0; i < addr.length; i += 8) words.push(parseInt(addr.slice(i, i + 8), 16));
  const bytes: number[] = [];
  for (const w of words) bytes.push(w & 0xff, (w >>> 8) & 0xff, (w >>> 16) & 0xff, (w >>> 24) & 0xff);
  let host: string;
  if (bytes.length === 4) host = bytes.join('.');
  else if (bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff) host = bytes.slice(12).join('.');
  else {
    const groups: number[] = [];
    for (let i = 0; i < 16; i += 2) groups.push((bytes[i]! << 8) | bytes[i + 1]!);
    host = compressV6(groups);
  }
  return { host, port: parseInt(port, 16) };
}

/** RFC 5952 text of eight 16-bit groups: the longest run of zeros becomes "::". */
function compressV6(groups: number[]): string {
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

/**
 * The sockets of `inodes` in the socket tables: inode → facts. The Unix table (short) first,
 * and a table is read only while some inode is not found yet: the kernel writes out every
 * row of a table that is read (about 15 ms for 13,000 rows).
 */
function socketTable(inodes: ReadonlySet<string>): Map<string, SocketFacts> {
  const out = new Map<string, SocketFacts>();
  // Num RefCount Protocol Flags Type St Inode Path; Flags 00010000 is __SO_ACCEPTCON.
  if (inodes.size > 0) for (const f of readRows('/proc/net/unix', 6, inodes)) out.set(f[6]!, { tcp: undefined, unixPath: f[7], listening: (parseInt(f[3]!, 16) & 0x10000) !== 0 });
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    if (out.size >= inodes.size) break;
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
    for (const f of readRows(file, 9, inodes)) out.set(f[9]!, { tcp: parseProcAddress(f[1]!), unixPath: undefined, listening: f[3] === '0A' });
  }
  return out;
}

/** What the socket at `fd` is bound to (both undefined when /proc does not say). */
export function describeSocketFd(fd: number): SocketFacts {
  const inode = inodeOf(fd);
  return (inode === undefined ? undefined : socketTable(new Set([inode])).get(inode)) ?? { tcp: undefined, unixPath: undefined, listening: false };
}

const WILDCARDS = new Set(['0.0.0.0', '::']);

/**
 * The descriptor of this process's listening socket bound to `bound` (a TCP host and port,
 * or the Unix path it was bound at), undefined when none is. The lowest such descriptor
 * when there are several (a duplicate kept for an upgrade is a higher one).
 */
export function findListeningFd(bound: { host: string; port: number } | { path: string }): number | undefined {
  let names: string[];
  try {
    names = readdirSync('/proc/self/fd');
  } catch {
    return undefined;
  }
  const inodes = new Map<string, string>();
  for (const name of names) {
    const inode = inodeOf(name);
    if (inode !== undefined) inodes.set(name, inode);
  }
  const table = socketTable(new Set(inodes.values()));
  let best: number | undefined;
  for (const [name, inode] of inodes) {
    const s = table.get(inode);
    if (s === undefined || !s.listening) continue;
    const match = 'path' in bound
      ? s.unixPath === bound.path
      : s.tcp !== undefined && s.tcp.port === bound.port && (s.tcp.host === bound.host || (WILDCARDS.has(s.tcp.host) && WILDCARDS.has(bound.host)));
    const fd = Number(name);
    if (match && (best === undefined || fd < best)) best = fd;
  }
  return best;
}
