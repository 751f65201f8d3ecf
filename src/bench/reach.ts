/**
 * Before a run: can the target be reached at all? A refused port or a missing socket
 * would otherwise make every request a "connect" error and the report look like a
 * measurement; the caller turns the reason ("ECONNREFUSED 127.0.0.1:9",
 * "ENOENT /run/php.sock") into an error.
 */
import { connect } from 'node:net';
import type { SocketAddress } from '../protocol/address.js';

/** Undefined when a connection could be opened (and is closed again); else why not. */
export function unreachableReason(address: SocketAddress, timeoutMs: number): Promise<string | undefined> {
  const where = address.kind === 'tcp' ? address.text : address.path;
  return new Promise((resolve) => {
    const s = address.kind === 'tcp' ? connect({ host: address.host, port: address.port }) : connect({ path: address.path });
    const timer = setTimeout(() => {
      s.destroy();
      resolve(`ETIMEDOUT ${where} (no connection after ${timeoutMs} ms)`);
    }, timeoutMs);
    s.once('connect', () => {
      clearTimeout(timer);
      s.destroy();
      resolve(undefined);
    });
    s.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve(`${err.code ?? err.message} ${where}`);
    });
  });
}
