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

function readTable(path: string): string[][] {
  try {
    return readFileSync(path, 'latin1').split('\n').slice(1).map((l) => l.trim().split(/\s+/)).filter((f) => f.length > 3);
  } catch {
    return [];
  }
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

/** The socket tables, read once per lookup: inode → facts. */
function socketTable(): Map<string, SocketFacts> {
  const out = new Map<string, SocketFacts>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
    for (const f of readTable(file)) out.set(f[9]!, { tcp: parseProcAddress(f[1]!), unixPath: undefined, listening: f[3] === '0A' });
  }
  // Num RefCount Protocol Flags Type St Inode Path; Flags 00010000 is __SO_ACCEPTCON.
  for (const f of readTable('/proc/net/unix')) out.set(f[6]!, { tcp: undefined, unixPath: f[7], listening: (parseInt(f[3]!, 16) & 0x10000) !== 0 });
  return out;
}

/** What the socket at `fd` is bound to (both undefined when /proc does not say). */
export function describeSocketFd(fd: number): SocketFacts {
  const inode = inodeOf(fd);
  return (inode === undefined ? undefined : socketTable().get(inode)) ?? { tcp: undefined, unixPath: undefined, listening: false };
}

const WILDCARDS = new Set(['0.0.0.0', '::']);

/**
 * The descriptor of this process's listening socket bound to `bound` (a TCP host and port,
 * or the Unix path it was bound at), undefined when none is. The lowest such descriptor
 * when there are several (a duplicate kept for an upgrade is a higher one).
 */
export function findListeningFd(bound: { host: string; port: number } | { path: string }): number | undefined {
  const table = socketTable();
  let names: string[];
  try {
    names = readdirSync('/proc/self/fd');
  } catch {
    return undefined;
  }
  let best: number | undefined;
  for (const name of names) {
    const inode = inodeOf(name);
    const s = inode === undefined ? undefined : table.get(inode);
    if (s === undefined || !s.listening) continue;
    const match = 'path' in bound
      ? s.unixPath === bound.path
      : s.tcp !== undefined && s.tcp.port === bound.port && (s.tcp.host === bound.host || (WILDCARDS.has(s.tcp.host) && WILDCARDS.has(bound.host)));
    const fd = Number(name);
    if (match && (best === undefined || fd < best)) best = fd;
  }
  return best;
}
