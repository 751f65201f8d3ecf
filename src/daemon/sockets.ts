/**
 * Every listening socket of the daemon has one owner, this: the front-end listeners, the
 * control socket, the dashboard, and the sockets systemd passed that nothing claimed.
 * It adopts sockets from systemd (socket activation) or from the daemon we replace (an
 * upgrade in place, by a new process or by an exec in the same one: socket-activation.ts
 * reads both), binds the rest (src/frontend/listen.ts does the mechanics: modes, owners,
 * stale Unix sockets), and lists them all, with their descriptors, for an upgrade to hand
 * on. Descriptors are known from the inheritance or found through /proc
 * (util/proc-sockets.ts), never read from Node's private handles.
 *
 * An `accept: direct` pool's socket is bound and shared across a reload by the pool's side
 * (worker/shared-socket.ts, without libuv); its inherited descriptor is handed to it from
 * here, and it is listed for the hand-on with the others.
 */
import { closeSync } from 'node:fs';
import type { Server } from 'node:net';
import type { Config } from '../config/types.js';
import { ErrorCodes } from '../errors.js';
import { keepUnixPaths, listenOn, releaseUnixPath, removeSocketFile, type ListenOptions } from '../frontend/listen.js';
import type { Logger } from '../log/log.js';
import type { SocketAddress } from '../protocol/address.js';
import { findListeningFd } from '../util/proc-sockets.js';
import { acceptQueueOf, SharedSocket } from '../worker/shared-socket.js';
import { describeInherited, matchInherited, takeInheritedSockets, type InheritedSocket } from './socket-activation.js';
import { upgradeAddress, type HandedSocket } from './upgrade.js';

interface Bound {
  server: Server;
  address: SocketAddress;
  /** Known when inherited; else found through /proc when handed on. */
  fd: number | undefined;
  /** Its Unix socket file is ours to remove at the final stop (bound here, or by the daemon we replaced). */
  ownsPath: boolean;
}

export class Sockets {
  private readonly logger: Logger;
  /** Inherited descriptors not yet taken by a binder, by address text. */
  private readonly waiting = new Map<string, number>();
  /** Addresses whose socket was inherited (status shows it). */
  readonly inherited = new Set<string>();
  /** Inherited from the daemon we replaced, which had created their Unix socket files. */
  private readonly ownedPaths = new Set<string>();
  /** Sockets from systemd that match nothing: kept open and handed on, as systemd expects. */
  private readonly unclaimed: InheritedSocket[] = [];
  private readonly bound = new Set<Bound>();

  constructor(logger: Logger) {
    this.logger = logger;
  }

  /**
   * Takes the sockets passed to this process (call before anything binds): those an
   * upgrade handed on name their address; systemd's are matched to listeners by name,
   * then address, then to `accept: direct` pools.
   */
  adopt(cfg: Config, sockets: readonly InheritedSocket[] = takeInheritedSockets()): void {
    if (sockets.length === 0) return;
    const fromSystemd: InheritedSocket[] = [];
    const directByAddress = new Map([...cfg.pools.values()].filter((p) => p.accept === 'direct' && p.directListen !== undefined).map((p) => [p.directListen!.text, p.directListen!]));
    for (const s of sockets) {
      const handed = upgradeAddress(s.name);
      const direct = handed === undefined ? undefined : directByAddress.get(handed.address);
      if (handed === undefined) fromSystemd.push(s);
      else if (direct !== undefined) SharedSocket.adopt(direct, s.fd, handed.ownsPath);
      else {
        this.waiting.set(handed.address, s.fd);
        this.inherited.add(handed.address);
        if (handed.ownsPath) this.ownedPaths.add(handed.address);
      }
    }
    const { byListener, unmatched } = matchInherited(fromSystemd, cfg.listen);
    for (const [l, s] of byListener) {
      this.waiting.set(l.address.text, s.fd);
      this.inherited.add(l.address.text);
      this.logger.info({ kind: 'socket-activation', fd: s.fd, name: s.name, listener: l.address.text }, `listener ${l.protocol} ${l.address.text} takes over ${describeInherited(s)} from systemd`);
    }
    // The rest may be accept: direct pools' sockets (FileDescriptorName= the pool's name, or its direct_listen).
    const directs = [...cfg.pools.values()].filter((p) => p.accept === 'direct' && p.directListen !== undefined).map((p) => ({ address: p.directListen!, name: p.name }));
    const forPools = matchInherited(unmatched, directs);
    for (const [d, s] of forPools.byListener) {
      try {
        SharedSocket.adopt(d.address, s.fd);
        this.logger.info({ kind: 'socket-activation', fd: s.fd, name: s.name, pool: d.name }, `pool ${d.name}'s direct socket ${d.address.text} is ${describeInherited(s)} from systemd`);
      } catch (e) {
        this.logger.error({ code: ErrorCodes.DIRECT_SOCKET, kind: 'socket-activation', fd: s.fd, pool: d.name, err: e }, `pool ${d.name} cannot take ${describeInherited(s)} from systemd: ${(e as Error).message}`);
      }
    }
    for (const s of forPools.unmatched) {
      this.unclaimed.push(s);
      this.logger.warn({ code: ErrorCodes.SOCKET_UNMATCHED, kind: 'socket-activation', fd: s.fd, name: s.name }, `socket ${describeInherited(s)} from systemd matches no listener (by name or address); it is not served`);
    }
  }

  /** Whether binding `address` would take over an inherited socket (the control socket skips its "who answers" probe). */
  has(address: string): boolean {
    return this.waiting.has(address);
  }

  /** Binds `server` for `address`, or gives it the inherited socket for that address. */
  readonly listen = async (server: Server, address: SocketAddress, opts: ListenOptions = {}): Promise<string> => {
    const fd = this.waiting.get(address.text);
    this.waiting.delete(address.text);
    const ownsPath = address.kind === 'unix' && (fd === undefined || this.ownedPaths.has(address.text));
    const text = await listenOn(server, address, { ...opts, fd, ownsPath });
    const b: Bound = { server, address, fd, ownsPath };
    this.bound.add(b);
    // Closed by a reload or the stop: not ours to hand on any more.
    server.once('close', () => this.bound.delete(b));
    return text;
  };

  /**
   * Once started (or stopped while starting): inherited sockets for addresses the config no
   * longer has are closed, not left to queue connections; the files of those the daemon
   * we replaced had created go with them.
   */
  closeUnused(): void {
    const left = [...this.waiting.keys()];
    for (const [address, fd] of this.waiting) {
      try {
        closeSync(fd);
      } catch {
        // already closed
      }
      this.inherited.delete(address);
      if (this.ownedPaths.delete(address) && address.startsWith('unix:')) removeSocketFile(address.slice('unix:'.length));
    }
    this.waiting.clear();
    if (left.length > 0) this.logger.info({ kind: 'upgrade', closed: left }, `inherited sockets no listener uses, closed: ${left.join(', ')}`);
  }

  /**
   * A stop with no successor: closing a listener resets the connections still in its
   * accept queue (nginx answers them 502). So first the Unix socket files of `addresses`
   * go (a new connection is refused at once and nginx tries its next server), then the
   * servers go on accepting until their queues are empty, for at most `maxMs`; what they
   * take is served like any connection accepted just before the close. A TCP port cannot
   * turn new connections away while it listens: its queue is emptied once, and a
   * connection arriving in the last instant is still reset. Resolves with the number
   * left waiting (0 when all were taken).
   */
  async drainBacklogs(addresses: ReadonlySet<string>, maxMs: number): Promise<number> {
    const live = [...this.bound].filter((b) => b.server.listening && addresses.has(b.address.text));
    for (const b of live) if (b.address.kind === 'unix') releaseUnixPath(b.server);
    const fds = live.map((b) => b.fd ?? fdOf(b.server, b.address)).filter((fd): fd is number => fd !== undefined);
    const deadline = performance.now() + maxMs;
    for (;;) {
      const waiting = fds.reduce((n, fd) => n + (acceptQueueOf(fd) ?? 0), 0);
      if (waiting === 0 || performance.now() >= deadline) return waiting;
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  /** Every listening socket held now, with its descriptor, for an upgrade in place. */
  handOn(): HandedSocket[] {
    const out: HandedSocket[] = [];
    for (const b of this.bound) {
      // Closing (its 'close' comes once its connections ended): no longer listening.
      if (!b.server.listening) continue;
      const fd = b.fd ?? fdOf(b.server, b.address);
      if (fd !== undefined) out.push({ fd, address: b.address.text, ownsPath: b.ownsPath });
      else this.logger.warn({ code: ErrorCodes.UPGRADE_FAILED, kind: 'upgrade', address: b.address.text }, `cannot find the descriptor of the socket for ${b.address.text} in /proc/self/fd; it is not handed on`);
    }
    for (const s of this.unclaimed) out.push({ fd: s.fd, name: s.name });
    // accept: direct pools' sockets: the new daemon's workers accept on them while the old ones drain.
    for (const s of SharedSocket.held()) out.push({ fd: s.fd, address: s.address.text, ownsPath: s.ownsPath });
    return out;
  }

  /** The sockets went to a successor: closing ours leaves their Unix socket files to it. */
  handedOn(): void {
    SharedSocket.handOn();
    keepUnixPaths();
  }
}

/** A listening server's descriptor, found by its bound address (for a Unix socket, the name it was bound at). */
function fdOf(server: Server, address: SocketAddress): number | undefined {
  const a = server.address();
  if (typeof a === 'string') return findListeningFd({ path: a });
  if (a !== null) return findListeningFd({ host: a.address, port: a.port });
  return address.kind === 'unix' ? findListeningFd({ path: address.path }) : undefined;
}
