/**
 * The socket listeners of the FastCGI and SCGI sessions: one set of module functions
 * that find their session on the socket, so accepting a connection allocates no
 * closures for them (a connection per request is nginx's default).
 */
import type { Socket } from 'node:net';
import type { SocketAddress } from '../protocol/address.js';
import { remoteText } from './listen.js';
import { closeTurn, openTurn } from '../util/turn.js';

/** What a session does with its socket's events. */
export interface SocketOwner {
  onData(chunk: Buffer): void;
  onSocketEnd(): void;
  onClose(): void;
  onSocketError(err: NodeJS.ErrnoException): void;
  onDrain(): void;
  onTimeout(): void;
}

const OWNER = Symbol('session');
type OwnedSocket = Socket & { [OWNER]: SocketOwner };

/** Routes the socket's events to `owner`. */
export function attachSession(socket: Socket, owner: SocketOwner): void {
  (socket as OwnedSocket)[OWNER] = owner;
  socket.on('data', onSocketData);
  socket.on('end', onSocketEnd);
  socket.on('close', onSocketClose);
  socket.on('error', onSocketError);
  socket.on('drain', onSocketDrain);
  socket.on('timeout', onSocketTimeout);
}

/** The client's address for log lines; on a Unix socket there is none to ask for. */
export function remoteOf(socket: Socket, address: SocketAddress): string {
  return address.kind === 'unix' ? 'unix' : remoteText(socket.remoteAddress, socket.remotePort);
}

// `this` is the socket (EventEmitter calls listeners so).
// A turn (src/util/turn.ts): what the chunk's requests write leaves when it is decoded.
function onSocketData(this: Socket, chunk: Buffer): void {
  openTurn();
  try {
    (this as OwnedSocket)[OWNER].onData(chunk);
  } finally {
    closeTurn();
  }
}
function onSocketEnd(this: Socket): void {
  (this as OwnedSocket)[OWNER].onSocketEnd();
}
function onSocketClose(this: Socket): void {
  (this as OwnedSocket)[OWNER].onClose();
}
function onSocketError(this: Socket, err: NodeJS.ErrnoException): void {
  (this as OwnedSocket)[OWNER].onSocketError(err);
}
function onSocketDrain(this: Socket): void {
  (this as OwnedSocket)[OWNER].onDrain();
}
function onSocketTimeout(this: Socket): void {
  (this as OwnedSocket)[OWNER].onTimeout();
}
