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
import type { ListenerConfig } from '../config/types.js';
import { describeSocketFd } from '../util/proc-sockets.js';

export const SD_LISTEN_FDS_START = 3;

/**
 * Sockets a predecessor handed us through an exec in place (the same pid: upgrade.ts), at
 * the numbers they had: JSON [[fd, name], ...], names as in LISTEN_FDNAMES.
 */
export const EXEC_FDS_ENV = 'FCGI_PM_EXEC_FDS';

export interface InheritedSocket {
  fd: number;
  name: string | undefined;
  /** "tcp host:port" facts or a Unix path, when /proc told us. */
  tcp: { host: string; port: number } | undefined;
  unixPath: string | undefined;
}

function inherited(fd: number, name: string | undefined): InheritedSocket {
  const { tcp, unixPath } = describeSocketFd(fd);
  return { fd, name: name === undefined || name === '' || name === 'unknown' ? undefined : name, tcp, unixPath };
}

/** The sockets an exec in place kept for us (EXEC_FDS_ENV). Clears the variable. */
function takeExecSockets(env: NodeJS.ProcessEnv): InheritedSocket[] {
  const v = env[EXEC_FDS_ENV];
  delete env[EXEC_FDS_ENV];
  if (v === undefined) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(v);
  } catch {
    return [];
  }
  if (!Array.isArray(parsed)) return [];
  const out: InheritedSocket[] = [];
  for (const e of parsed as unknown[]) {
    if (!Array.isArray(e) || !Number.isInteger(e[0]) || (e[0] as number) < 3) continue;
    out.push(inherited(e[0] as number, typeof e[1] === 'string' ? e[1] : undefined));
  }
  return out;
}

/**
 * The sockets systemd (or a predecessor, in its form) passed us, [] when LISTEN_PID is not
 * our pid, and those an exec in place kept. Clears the variables.
 */
export function takeInheritedSockets(env: NodeJS.ProcessEnv = process.env, pid = process.pid): InheritedSocket[] {
  return [...takeListenFds(env, pid), ...takeExecSockets(env)];
}

function takeListenFds(env: NodeJS.ProcessEnv, pid: number): InheritedSocket[] {
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
    out.push(inherited(SD_LISTEN_FDS_START + i, nameList[i]));
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
