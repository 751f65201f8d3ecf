/**
 * The listening socket of an `accept: direct` pool: every worker gets it as fd 0 and
 * accepts on it itself; fcgi-pm holds it, watches its accept queue, and never accepts.
 *
 * It comes from the native addon (native/direct-socket.c), because every way Node has to
 * open or watch a descriptor (net.Server, uv_poll_init) sets O_NONBLOCK on the open file
 * the workers share, and php-cgi then gets EAGAIN from accept() and exits. Without the
 * addon (no compiler at install) `directSocketSupport()` says why, and the pool runs
 * through its proxy listener instead.
 *
 * One socket per address, shared by the generations of a pool across a reload: the new
 * pool's workers accept on the socket the old ones drain from, so no connection waiting
 * in its queue is lost, and a TCP address is never bound twice.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import type { SocketAddress } from '../protocol/address.js';

interface Addon {
  listenUnix(path: string, backlog: number): number;
  listenTcp(host: string, port: number, backlog: number): number;
  close(fd: number): void;
  isNonBlocking(fd: number): boolean;
  makeBlocking(fd: number): void;
  queued(fd: number): [number, number];
  watch(fd: number, onWake: (status: number) => void): () => void;
}

const ADDON_PATH = new URL('../../../native/build/direct-socket.node', import.meta.url).pathname;

let addon: Addon | undefined;
let addonProblem: string | undefined;

function loadAddon(): Addon | undefined {
  if (addon !== undefined || addonProblem !== undefined) return addon;
  try {
    addon = createRequire(import.meta.url)(ADDON_PATH) as Addon;
  } catch (e) {
    addonProblem = `the native addon ${ADDON_PATH} is not built (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}); run "node scripts/build-native.mjs" with a C compiler and Node's headers (the nodejs package's /usr/include/node)`;
  }
  return addon;
}

/** undefined when direct sockets work here; else why not. */
export function directSocketSupport(): string | undefined {
  if (process.platform !== 'linux') return 'accept: direct needs Linux (epoll, sock_diag, /proc)';
  loadAddon();
  return addonProblem;
}

/**
 * Connections waiting in the accept queue of any listening socket `fd` (Unix or TCP, a
 * net.Server's too); undefined without the addon or when the kernel does not say.
 */
export function acceptQueueOf(fd: number): number | undefined {
  const lib = loadAddon();
  if (lib === undefined) return undefined;
  try {
    return lib.queued(fd)[0];
  } catch {
    return undefined;
  }
}

export interface SocketOptions {
  backlog: number;
  /** Unix sockets: file mode and owner. */
  mode: number;
  uid: number | undefined;
  gid: number | undefined;
}

/** A watch on the accept queue; stop() ends it. */
export interface QueueWatch {
  stop(): void;
}

export class SharedSocket {
  readonly address: SocketAddress;
  readonly fd: number;
  private refs = 0;
  private readonly lib: Addon;
  /** Passed in by systemd: its file and descriptor are systemd's to remove. */
  private readonly inherited: boolean;
  /** Its Unix socket file is ours to remove (an upgrade hands this on). */
  get ownsPath(): boolean {
    return !this.inherited && this.address.kind === 'unix';
  }

  private constructor(lib: Addon, address: SocketAddress, fd: number, inherited: boolean) {
    this.lib = lib;
    this.address = address;
    this.fd = fd;
    this.inherited = inherited;
  }

  /**
   * A listening socket passed to us for `address`: the pool that acquires that address
   * takes it instead of binding. Made blocking if the unit said NonBlocking=yes. One from
   * systemd (socket activation) is kept open for the daemon's life, as systemd expects;
   * one whose file the daemon we replaced created (`ownsPath`) is ours as if bound here.
   */
  static adopt(address: SocketAddress, fd: number, ownsPath = false): void {
    const lib = loadAddon();
    if (lib === undefined) throw new Error(addonProblem);
    if (lib.isNonBlocking(fd)) lib.makeBlocking(fd);
    const s = new SharedSocket(lib, address, fd, !ownsPath);
    s.refs = ownsPath ? 0 : 1;
    SharedSocket.open.set(address.text, s);
  }

  /** Connections waiting in the accept queue, and the queue's limit (the backlog). */
  queued(): { waiting: number; backlog: number } {
    const [waiting, backlog] = this.lib.queued(this.fd);
    return { waiting, backlog };
  }

  /** Calls onWake once per connection that arrives (edge-triggered), from the event loop. */
  watch(onWake: () => void): QueueWatch {
    const stop = this.lib.watch(this.fd, onWake);
    return { stop };
  }

  /** O_NONBLOCK set on the shared open file (it must never be: tests check). */
  get nonBlocking(): boolean {
    return this.lib.isNonBlocking(this.fd);
  }

  private static readonly open = new Map<string, SharedSocket>();

  /** The socket for `address`, created on first use; release() each acquire. Throws with errno codes. */
  static acquire(address: SocketAddress, opts: SocketOptions): SharedSocket {
    const lib = loadAddon();
    if (lib === undefined) throw new Error(addonProblem);
    let s = SharedSocket.open.get(address.text);
    if (s === undefined) {
      s = new SharedSocket(lib, address, SharedSocket.listen(lib, address, opts), false);
      SharedSocket.open.set(address.text, s);
    }
    s.refs++;
    return s;
  }

  release(): void {
    if (--this.refs > 0 || this.inherited) return;
    SharedSocket.open.delete(this.address.text);
    this.lib.close(this.fd);
    if (this.address.kind === 'unix' && !SharedSocket.handedOn) unlinkSocket(this.address.path);
  }

  /** The sockets held now, for an upgrade in place to hand on. */
  static held(): SharedSocket[] {
    return [...SharedSocket.open.values()];
  }

  /** After an upgrade in place handed the sockets to a new daemon: their files are its now. */
  static handOn(): void {
    SharedSocket.handedOn = true;
  }

  private static handedOn = false;

  private static listen(lib: Addon, address: SocketAddress, opts: SocketOptions): number {
    if (address.kind === 'tcp') return lib.listenTcp(address.host, address.port, opts.backlog);
    unlinkSocket(address.path);
    const fd = lib.listenUnix(address.path, opts.backlog);
    try {
      fs.chmodSync(address.path, opts.mode);
      if (opts.uid !== undefined || opts.gid !== undefined) fs.chownSync(address.path, opts.uid ?? -1, opts.gid ?? -1);
    } catch (e) {
      lib.close(fd);
      unlinkSocket(address.path);
      throw e;
    }
    return fd;
  }
}

/** Removes a socket file left from an earlier run; refuses to remove anything else. */
function unlinkSocket(p: string): void {
  try {
    if (fs.lstatSync(p).isSocket()) fs.unlinkSync(p);
  } catch {
    /* not there */
  }
}
