/**
 * systemd socket activation (sd_listen_fds): listening sockets handed to us as fds 3, 4,
 * ... with LISTEN_FDS=N, LISTEN_PID=<our pid> and optionally LISTEN_FDNAMES=a:b. The
 * front-end web server can connect before fcgi-pm runs (and while it restarts): the
 * kernel queues connections in the socket's backlog.
 *
 * Each socket is matched to a listener: first by name (listener `name` = the socket
 * unit's FileDescriptorName=), then by address (the socket's bound address, read from
 * /proc/net/{tcp,tcp6,unix} by its inode, against the listener's `address`). A matched
 * listener takes the fd instead of binding; unmatched ones bind as usual.
 * The variables are removed from our environment, as sd_listen_fds(unset=1) does.
 */
import { readFileSync, readlinkSync } from 'node:fs';
import type { ListenerConfig } from '../config/types.js';

export const SD_LISTEN_FDS_START = 3;

export interface InheritedSocket {
  fd: number;
  name: string | undefined;
  /** "tcp host:port" facts or a Unix path, when /proc told us. */
  tcp: { host: string; port: number } | undefined;
  unixPath: string | undefined;
}

function inodeOf(fd: number): string | undefined {
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

function describe(fd: number): Pick<InheritedSocket, 'tcp' | 'unixPath'> {
  const inode = inodeOf(fd);
  if (inode === undefined) return { tcp: undefined, unixPath: undefined };
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
    const row = readTable(file).find((f) => f[9] === inode);
    if (row) return { tcp: parseProcAddress(row[1]!), unixPath: undefined };
  }
  // Num RefCount Protocol Flags Type St Inode Path
  const u = readTable('/proc/net/unix').find((f) => f[6] === inode);
  return { tcp: undefined, unixPath: u?.[7] };
}

/** The sockets systemd passed us, or [] when LISTEN_PID is not our pid. Clears the variables. */
export function takeInheritedSockets(env: NodeJS.ProcessEnv = process.env, pid = process.pid): InheritedSocket[] {
  const listenPid = env['LISTEN_PID'];
  const listenFds = env['LISTEN_FDS'];
  const names = env['LISTEN_FDNAMES'];
  delete env['LISTEN_PID'];
  delete env['LISTEN_FDS'];
  delete env['LISTEN_FDNAMES'];
  if (listenPid === undefined || listenFds === undefined || Number(listenPid) !== pid) return [];
  const n = Number(listenFds);
  if (!Number.isInteger(n) || n <= 0) return [];
  const nameList = names === undefined ? [] : names.split(':');
  const out: InheritedSocket[] = [];
  for (let i = 0; i < n; i++) {
    const fd = SD_LISTEN_FDS_START + i;
    const name = nameList[i];
    out.push({ fd, name: name === undefined || name === '' || name === 'unknown' ? undefined : name, ...describe(fd) });
  }
  return out;
}

const WILDCARDS = new Set(['0.0.0.0', '::', '*']);

/** What a socket is matched on: a listener, or an accept: direct pool's socket (named after the pool). */
export type SocketUser = Pick<ListenerConfig, 'address' | 'name'>;

function sameAddress(s: InheritedSocket, l: SocketUser): boolean {
  const a = l.address;
  if (a.kind === 'unix') return s.unixPath !== undefined && s.unixPath === a.path;
  if (s.tcp === undefined || s.tcp.port !== a.port) return false;
  const isIp = /^[\d.]+$/.test(a.host) || a.host.includes(':');
  // A host name in the config ("localhost:9000") matches by port.
  return !isIp || s.tcp.host === a.host || (WILDCARDS.has(a.host) && WILDCARDS.has(s.tcp.host));
}

export interface ActivationMatch<L extends SocketUser = ListenerConfig> {
  byListener: Map<L, InheritedSocket>;
  unmatched: InheritedSocket[];
}

/** Pairs sockets with listeners: by name first, then by address; each used once. */
export function matchInherited<L extends SocketUser>(sockets: readonly InheritedSocket[], listeners: readonly L[]): ActivationMatch<L> {
  const byListener = new Map<L, InheritedSocket>();
  const used = new Set<InheritedSocket>();
  for (const l of listeners) {
    if (l.name === undefined) continue;
    const s = sockets.find((x) => !used.has(x) && x.name === l.name);
    if (s) {
      byListener.set(l, s);
      used.add(s);
    }
  }
  for (const l of listeners) {
    if (byListener.has(l)) continue;
    const s = sockets.find((x) => !used.has(x) && sameAddress(x, l));
    if (s) {
      byListener.set(l, s);
      used.add(s);
    }
  }
  return { byListener, unmatched: sockets.filter((s) => !used.has(s)) };
}

export function describeInherited(s: InheritedSocket): string {
  const where = s.tcp ? `${s.tcp.host.includes(':') ? `[${s.tcp.host}]` : s.tcp.host}:${s.tcp.port}` : s.unixPath ? `unix:${s.unixPath}` : 'unknown address';
  return `fd ${s.fd} (${where}${s.name ? `, name ${s.name}` : ''})`;
}
