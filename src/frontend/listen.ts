/**
 * Binding a front-end server to its address: TCP (IPv4, IPv6) or a Unix socket.
 *
 * Unix sockets get the configured owner, group and file mode before listenOn resolves
 * (so before the listener is announced ready), and replace a stale socket file left by a
 * crashed predecessor, but never a live socket (someone answers there) and never a file
 * that is not a socket: deleting an operator's regular file by a config typo is worse
 * than refusing to start.
 *
 * A Unix socket is bound under a temporary name in its directory and renamed into place.
 * libuv removes the path it bound when the server closes; bound so, that is the temporary
 * name, and the real path is ours to remove (unixPathRelease): not at all when the socket
 * was handed to a successor (an upgrade in place: src/daemon/upgrade.ts), whose socket it
 * then is. The rename also replaces a stale file atomically.
 */
import { connect, type Server } from 'node:net';
import { chmodSync, chownSync, lstatSync, readFileSync, renameSync, unlinkSync } from 'node:fs';
import * as nodePath from 'node:path';
import { ErrorCodes } from '../errors.js';
import type { SocketAddress } from '../protocol/address.js';

export class ListenError extends Error {
  readonly code = ErrorCodes.LISTEN_FAILED;
  constructor(message: string) {
    super(message);
    this.name = 'ListenError';
  }
}

export interface ListenOptions {
  /** Unix sockets: file mode applied before the listener is reported ready. */
  mode?: number | undefined;
  /** Unix sockets: uid / gid given to the socket (chown; another user's takes root). */
  owner?: number | undefined;
  group?: number | undefined;
  /** listen() backlog; default: the kernel's cap (net.core.somaxconn), as PHP-FPM's listen.backlog. */
  backlog?: number | undefined;
  /** A socket already bound and listening for this address (socket activation, an upgrade): taken over instead of binding. */
  fd?: number | undefined;
  /** With `fd`: the Unix socket file was created by the daemon we replaced, so closing removes it as if bound here. */
  ownsPath?: boolean | undefined;
}

/** How a listener binds: the daemon's socket owner (src/daemon/sockets.ts) in a daemon, listenOn alone in tests. */
export type BindSocket = (server: Server, address: SocketAddress, opts?: ListenOptions) => Promise<string>;

/** The kernel caps every backlog at net.core.somaxconn; asking for that gets the most it allows. */
export function defaultBacklog(): number {
  try {
    const n = Number.parseInt(readFileSync('/proc/sys/net/core/somaxconn', 'utf8'), 10);
    if (n > 0) return n;
  } catch {
    // not Linux: node's own default
  }
  return 511;
}

/** Unix socket paths this process created, by server: removed when that server closes, unless handed on. */
const boundPaths = new WeakMap<Server, { path: string; ino: number }>();
let handingOn = false;

/** From now on, closing a server leaves its Unix socket file for the daemon the sockets were handed to. */
export function keepUnixPaths(): void {
  handingOn = true;
}

/**
 * Call when closing `server`: removes the Unix socket file it created, if that file is
 * still the socket it bound (a successor's socket at the same path is left alone).
 */
export function releaseUnixPath(server: Server): void {
  const b = boundPaths.get(server);
  if (b === undefined) return;
  boundPaths.delete(server);
  if (handingOn) return;
  try {
    if (lstatSync(b.path).ino === b.ino) unlinkSync(b.path);
  } catch {
    // gone already
  }
}

/** Binds `server` (net.Server or http.Server) and resolves with the bound address as text. */
export async function listenOn(server: Server, address: SocketAddress, opts: ListenOptions = {}): Promise<string> {
  const backlog = opts.backlog ?? defaultBacklog();
  const fd = opts.fd;
  if (fd !== undefined) {
    // Mode and stale-socket handling were systemd's (SocketMode=); the socket is live.
    await bind(server, `${address.text} (inherited fd ${fd})`, () => server.listen({ fd }));
    if (opts.ownsPath === true && address.kind === 'unix') rememberPath(server, address.path);
    return address.kind === 'tcp' ? tcpText(server, address) : address.text;
  }
  if (address.kind === 'tcp') {
    await bind(server, address.text, () => server.listen({ host: address.host, port: address.port, backlog }));
    return tcpText(server, address);
  }
  const path = address.path;
  await clearStaleSocket(path);
  const temp = tempName(path);
  if (temp !== path) removeSocketFile(temp);
  await bind(server, address.text, () => listenUnixRestricted(server, temp, backlog));
  if (temp !== path) {
    applyOrClose(server, address, 'cannot move the socket into place', () => renameSync(temp, path));
  }
  rememberPath(server, path);
  // The socket is 0600 to us until here. Giving it away goes through mode 0 (nobody but
  // root) so no one connects in between whom the final owner, group and mode do not admit.
  const owner = opts.owner ?? -1;
  const group = opts.group ?? -1;
  const chown = owner !== -1 || group !== -1;
  const mode = opts.mode ?? (chown ? 0o600 : undefined);
  if (chown) {
    applyOrClose(server, address, `cannot set owner ${owner}:${group}`, () => {
      chmodSync(path, 0);
      chownSync(path, owner, group);
    });
  }
  if (mode !== undefined) applyOrClose(server, address, `cannot set mode ${mode.toString(8)}`, () => chmodSync(path, mode));
  return address.text;
}

function rememberPath(server: Server, path: string): void {
  try {
    boundPaths.set(server, { path, ino: lstatSync(path).ino });
  } catch {
    // removed under us: nothing to release later
  }
}

/** A leftover of a crashed process with our pid, or an inherited socket's file no listener took; only ever a socket. */
export function removeSocketFile(path: string): void {
  try {
    if (lstatSync(path).isSocket()) unlinkSync(path);
  } catch {
    // none
  }
}

/** A sibling name for binding; the path itself when the sibling would not fit sockaddr_un (107 bytes). */
function tempName(path: string): string {
  const t = nodePath.join(nodePath.dirname(path), `.${nodePath.basename(path)}.${process.pid}.tmp`);
  return Buffer.byteLength(t) <= 107 ? t : path;
}

function applyOrClose(server: Server, address: SocketAddress, what: string, fn: () => void): void {
  try {
    fn();
  } catch (err) {
    server.close();
    const e = err as NodeJS.ErrnoException;
    const hint = e.code === 'EPERM' ? ' (giving a socket to another user or a group fcgi-pm is not in takes root)' : '';
    throw new ListenError(`${address.text}: ${what}: ${e.message}${hint}`);
  }
}

function tcpText(server: Server, address: SocketAddress): string {
  const a = server.address();
  if (a === null || typeof a === 'string') return address.text;
  return a.family === 'IPv6' || a.address.includes(':') ? `[${a.address}]:${a.port}` : `${a.address}:${a.port}`;
}

function bind(server: Server, text: string, start: () => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException): void => {
      server.off('listening', onListening);
      const why = err.code === 'EADDRINUSE' ? 'already in use' : err.message;
      reject(new ListenError(`cannot listen on ${text}: ${why}`));
    };
    const onListening = (): void => {
      server.off('error', onError);
      resolve();
    };
    server.once('error', onError);
    server.once('listening', onListening);
    try {
      start();
    } catch (err) {
      server.off('error', onError);
      server.off('listening', onListening);
      reject(new ListenError(`cannot listen on ${text}: ${(err as Error).message}`));
    }
  });
}

/**
 * Node binds a Unix socket synchronously inside listen(), so a restrictive umask set
 * around the call means the socket is never reachable by others before chmod gives it
 * the configured mode. process.umask() cannot be set in worker threads; chmod alone
 * then still applies the mode, only a moment later.
 */
function listenUnixRestricted(server: Server, path: string, backlog: number): void {
  let old: number | undefined;
  try {
    old = process.umask(0o177);
  } catch {
    old = undefined;
  }
  try {
    server.listen({ path, backlog });
  } finally {
    if (old !== undefined) process.umask(old);
  }
}

async function clearStaleSocket(path: string): Promise<void> {
  let st;
  try {
    st = lstatSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw new ListenError(`unix:${path}: ${(err as Error).message}`);
  }
  if (!st.isSocket()) throw new ListenError(`unix:${path}: exists and is not a socket; not removing it`);
  const state = await probeSocket(path);
  if (state === 'alive') throw new ListenError(`unix:${path}: already in use (something answers there)`);
  if (state !== 'stale') throw new ListenError(`unix:${path}: cannot probe existing socket: ${state}`);
  try {
    unlinkSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new ListenError(`unix:${path}: cannot remove stale socket: ${(err as Error).message}`);
  }
}

/** 'alive' when a connect succeeds, 'stale' when refused (nobody listens), else the error text. */
function probeSocket(path: string): Promise<string> {
  return new Promise((resolve) => {
    const s = connect({ path });
    const timer = setTimeout(() => {
      // A listener with a full backlog does not accept at once but is still alive.
      s.destroy();
      resolve('alive');
    }, 1000);
    s.once('connect', () => {
      clearTimeout(timer);
      s.destroy();
      resolve('alive');
    });
    s.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve(err.code === 'ECONNREFUSED' || err.code === 'ENOENT' ? 'stale' : err.message);
    });
  });
}

/** Address text for log lines: "1.2.3.4:5678", "[::1]:5678" or "unix". */
export function remoteText(addr: string | undefined, port: number | undefined): string {
  if (addr === undefined) return 'unix';
  return addr.includes(':') ? `[${addr}]:${port}` : `${addr}:${port}`;
}
