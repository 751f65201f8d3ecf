/**
 * One client connection of the load generator: opens its socket when needed, writes
 * the prebuilt request, feeds the reply to the protocol's reader, and reports the
 * outcome to its owner. A connection carries one request at a time; with keep-alive it
 * carries the next one on the same socket, otherwise it opens a fresh one.
 *
 * Sockets are replaced, never reused after an error; events of a replaced socket are
 * ignored (each socket's handlers check that it is still the current one).
 */
import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { SocketAddress } from '../protocol/address.js';
import { classifyErrno, type ErrorKind } from './error-kinds.js';
import type { ReplyReader } from './readers.js';
import type { BenchStats } from './stats.js';
import type { WireRequest } from './wire.js';

export interface ConnectionOwner {
  /** The reply is complete; the connection is free again. */
  replied(conn: BenchConnection): void;
  /** The request failed; the connection is free again (its socket closed). */
  failed(conn: BenchConnection, kind: ErrorKind): void;
}

export class BenchConnection {
  /** When the current request was started (performance.now() ms); 0 when idle. */
  reqStart = 0;
  /** When its first reply byte came; 0 before. */
  firstByte = 0;
  busy = false;
  readonly reader: ReplyReader;
  private socket: Socket | undefined;
  private connected = false;
  private connStart = 0;
  private readonly owner: ConnectionOwner;
  private readonly stats: BenchStats;
  private readonly wire: WireRequest;
  private readonly address: SocketAddress;

  constructor(owner: ConnectionOwner, stats: BenchStats, address: SocketAddress, wire: WireRequest, reader: ReplyReader) {
    this.owner = owner;
    this.stats = stats;
    this.address = address;
    this.wire = wire;
    this.reader = reader;
  }

  /** Starts a request (the owner checked that the connection is not busy). */
  send(now: number): void {
    this.busy = true;
    this.reqStart = now;
    this.firstByte = 0;
    const fresh = this.socket === undefined;
    this.reader.reset(fresh);
    if (fresh) this.open(now);
    // Before 'connect' the socket queues the bytes; no need to wait for it.
    this.socket!.write(this.wire.bytes);
    this.stats.bytesOut += this.wire.bytes.length;
  }

  /** Gives up on the running request (timeout), closing the socket. */
  abort(kind: ErrorKind): void {
    if (!this.busy) return;
    this.drop();
    this.finishFailed(kind);
  }

  /** Closes the socket (end of run). */
  close(): void {
    this.drop();
  }

  private open(now: number): void {
    const a = this.address;
    const s = a.kind === 'tcp' ? connect({ host: a.host, port: a.port, noDelay: true }) : connect({ path: a.path });
    this.socket = s;
    this.connected = false;
    this.connStart = now;
    this.stats.connections++;
    s.on('connect', () => {
      if (s !== this.socket) return;
      this.connected = true;
      this.stats.connect.record((performance.now() - this.connStart) * 1000);
    });
    s.on('data', (chunk: Buffer) => {
      if (s === this.socket) this.onData(chunk);
    });
    s.on('error', (err: NodeJS.ErrnoException) => {
      if (s !== this.socket) return;
      const kind = classifyErrno(err, this.connected);
      this.drop();
      if (this.busy) this.finishFailed(kind);
    });
    s.on('end', () => {
      if (s === this.socket) this.onEnd();
    });
    s.on('close', () => {
      // A close without 'end' or 'error' (destroyed elsewhere) is handled where it was destroyed.
      if (s === this.socket) this.onEnd();
    });
  }

  private onData(chunk: Buffer): void {
    this.stats.bytesIn += chunk.length;
    if (!this.busy) return; // unasked bytes on an idle keep-alive connection
    if (this.firstByte === 0) this.firstByte = performance.now();
    let complete: boolean;
    try {
      complete = this.reader.push(chunk);
    } catch {
      this.drop();
      this.finishFailed('protocol');
      return;
    }
    if (complete) this.finishReplied();
  }

  private onEnd(): void {
    this.drop();
    if (!this.busy) return; // the server closed an idle keep-alive connection: reopen on next send
    if (this.reader.eof()) this.finishReplied();
    else this.finishFailed('closed');
  }

  private drop(): void {
    const s = this.socket;
    if (s === undefined) return;
    this.socket = undefined;
    s.destroy();
  }

  private finishReplied(): void {
    if (!this.reader.reusable) this.drop();
    this.busy = false;
    this.owner.replied(this);
  }

  private finishFailed(kind: ErrorKind): void {
    this.busy = false;
    this.owner.failed(this, kind);
  }
}
