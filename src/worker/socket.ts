/**
 * The socket a worker serves on.
 *
 * 'fd0' (php-cgi, libfcgi, spawn-fcgi convention FCGI_LISTENSOCK_FILENO): we create a
 *   listening Unix socket and the child gets it as fd 0. It is bound under a temporary
 *   name, and the real name is hard-linked to it once the child has it, so no client
 *   reaches it before a worker can accept. The native addon binds it without Node: the
 *   daemon never watches or accepts on it. Without the addon a net.Server binds it and its
 *   descriptor is read from Node's handle (no public way); measured with php-cgi on Node 20:
 *   - pass the raw fd (`stdio: [fd, …]`); passing the net.Server object throws after the
 *     fork and leaves an orphan;
 *   - libuv makes that fd blocking in the child, which changes the shared open file, so
 *     our own net.Server must stop listening at once or its accept() could block the event
 *     loop: we close it synchronously right after spawn();
 *   - server.close() unlinks its path (the temporary name only, once the real one is linked).
 * 'argv': the command binds by itself; `{socket}` becomes a path in the runtime dir,
 *   `{port}` a loopback port that was free a moment ago (bind 0, read, close: racy but
 *   what every port-0 handoff does).
 */
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { SocketAddress } from '../protocol/address.js';
import { nativeAddon } from '../util/native-addon.js';

/** The part of native/direct-socket.c a worker's own socket needs. */
interface ListenAddon {
  listenUnix(path: string, backlog: number): number;
  close(fd: number): void;
}
const listenAddon = nativeAddon<ListenAddon>('direct-socket', 'not Linux');

/** sun_path is 108 bytes on Linux including the NUL. */
export const MAX_UNIX_PATH = 107;

/** Creates `dir` 0700 if missing; tightens it to 0700 if we own it. Throws otherwise. */
export function ensureRuntimeDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = fs.statSync(dir);
  if ((st.mode & 0o077) !== 0) {
    if (process.getuid !== undefined && st.uid !== process.getuid()) {
      throw new Error(`runtime dir ${dir} is mode ${modeText(st.mode)} and owned by uid ${st.uid}; it must be a private 0700 directory`);
    }
    fs.chmodSync(dir, 0o700);
  }
}

/** A reason the runtime dir cannot hold worker sockets, or undefined when it is fine. */
export function checkRuntimeDir(dir: string): string | undefined {
  let st: fs.Stats;
  try {
    st = fs.statSync(dir);
  } catch (e) {
    return `runtime dir ${dir}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`;
  }
  if (!st.isDirectory()) return `runtime dir ${dir} is not a directory`;
  // php-cgi -b creates its socket 0777: only the directory keeps other users out.
  if ((st.mode & 0o077) !== 0) return `runtime dir ${dir} is mode ${modeText(st.mode)}; it must be 0700 (other users could reach the worker sockets)`;
  return undefined;
}

function modeText(mode: number): string {
  return '0' + (mode & 0o777).toString(8);
}

/** File-name-safe form of a pool name. */
export function socketBaseName(pool: string, id: number): string {
  const safe = pool.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 40) || 'pool';
  return `${safe}-${id}`;
}

function checkPathLength(p: string): string | undefined {
  return Buffer.byteLength(p) > MAX_UNIX_PATH ? `socket path too long (${Buffer.byteLength(p)} > ${MAX_UNIX_PATH} bytes): ${p}; use a shorter runtime dir` : undefined;
}

function unlinkQuiet(p: string): void {
  try {
    fs.unlinkSync(p);
  } catch {
    /* not there */
  }
}

/** A listening socket bound under a temporary name, ready to hand to a child as fd 0. */
export interface Fd0Listener {
  readonly fd: number;
  readonly path: string;
  /** Call synchronously right after spawn(): publishes `path` and stops our listening. */
  handOff(): void;
  /** Before handOff, when the spawn did not happen. */
  abort(): void;
}

export async function listenFd0(dir: string, base: string): Promise<Fd0Listener> {
  const real = path.join(dir, `${base}.sock`);
  const tmp = path.join(dir, `${base}.sock.tmp`);
  const tooLong = checkPathLength(tmp);
  if (tooLong !== undefined) throw new Error(tooLong);
  unlinkQuiet(tmp);
  const lib = listenAddon.get();
  if (lib !== undefined) return addonFd0(lib, tmp, real);
  const server = net.createServer();
  // Nobody knows the temporary name, so no connection can reach our own accept().
  server.on('connection', (s) => s.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ path: tmp, backlog: 511 }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  fs.chmodSync(tmp, 0o600);
  const fd = (server as unknown as { _handle?: { fd?: number } })._handle?.fd;
  if (typeof fd !== 'number' || fd < 0) {
    server.close();
    throw new Error('cannot get the listening socket fd (net.Server internals changed?)');
  }
  return fd0Listener(fd, tmp, real, () => server.close());
}

function addonFd0(lib: ListenAddon, tmp: string, real: string): Fd0Listener {
  const fd = lib.listenUnix(tmp, 511);
  let open = true;
  const close = (): void => {
    if (open) lib.close(fd);
    open = false;
  };
  try {
    fs.chmodSync(tmp, 0o600);
  } catch (e) {
    close();
    unlinkQuiet(tmp);
    throw e;
  }
  return fd0Listener(fd, tmp, real, close);
}

/** `fd` bound at `tmp`; `close` ends our hold on it (the child has its own copy once spawned). */
function fd0Listener(fd: number, tmp: string, real: string, close: () => void): Fd0Listener {
  return {
    fd,
    path: real,
    handOff() {
      unlinkQuiet(real); // a stale socket from an earlier run
      fs.linkSync(tmp, real);
      unlinkQuiet(tmp);
      close();
    },
    abort() {
      unlinkQuiet(tmp);
      close();
    },
  };
}

/** `{socket}` path for argv mode (the command binds it). Removes a stale file. */
export function argvSocketPath(dir: string, base: string): string {
  const p = path.join(dir, `${base}.sock`);
  const tooLong = checkPathLength(p);
  if (tooLong !== undefined) throw new Error(tooLong);
  unlinkQuiet(p);
  return p;
}

/** A loopback TCP port that was free when asked. */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen({ host: '127.0.0.1', port: 0, exclusive: true }, () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

export function substituteArgv(args: readonly string[], socketPath: string | undefined, port: number | undefined): string[] {
  return args.map((a) => {
    let r = a;
    if (socketPath !== undefined) r = r.replaceAll('{socket}', socketPath);
    if (port !== undefined) r = r.replaceAll('{port}', String(port));
    return r;
  });
}

export function unixAddress(p: string): SocketAddress {
  return { kind: 'unix', path: p, text: `unix:${p}` };
}

export function tcpAddress(host: string, port: number): SocketAddress {
  return { kind: 'tcp', host, port, text: `${host}:${port}` };
}

export { unlinkQuiet };
