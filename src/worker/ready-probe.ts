/**
 * "Ready" = the worker accepts connections on its socket.
 *
 * argv mode: the command binds the socket itself, so a connect that succeeds means it
 *   listens. Poll with a short back-off (5 ms growing to 50 ms).
 * fd0 mode: we created the listening socket, so connect() succeeds at once (the kernel
 *   queues it in the backlog) whether or not the child ever calls accept(). Instead the
 *   probe connects, sends FIN, and waits for the peer's EOF: only a process that accepted
 *   and read can close it. php-cgi, libfcgi, flup, Go's net/http/fcgi and Node all close a
 *   connection that ends before a record header, and none counts it as a request
 *   (PHP_FCGI_MAX_REQUESTS is untouched). A reset means the listener vanished; retry.
 */
import net from 'node:net';
import type { SocketAddress } from '../protocol/address.js';

const POLL_FIRST_MS = 5;
const POLL_MAX_MS = 50;

export interface ReadyProbe {
  cancel(): void;
}

function connectOpts(addr: SocketAddress): net.NetConnectOpts {
  return addr.kind === 'unix' ? { path: addr.path } : { host: addr.host, port: addr.port };
}

/** Calls onReady once the address accepts a connection; retries until cancelled. */
export function probeConnect(addr: SocketAddress, onReady: () => void): ReadyProbe {
  let delay = POLL_FIRST_MS;
  let timer: NodeJS.Timeout | undefined;
  let sock: net.Socket | undefined;
  let done = false;
  const attempt = (): void => {
    timer = undefined;
    const s = net.connect(connectOpts(addr));
    sock = s;
    s.once('connect', () => {
      s.destroy();
      sock = undefined;
      if (!done) {
        done = true;
        onReady();
      }
    });
    s.once('error', () => {
      s.destroy();
      sock = undefined;
      if (done) return;
      timer = setTimeout(attempt, delay);
      delay = Math.min(POLL_MAX_MS, Math.ceil(delay * 1.5));
    });
  };
  attempt();
  return {
    cancel() {
      done = true;
      if (timer !== undefined) clearTimeout(timer);
      sock?.destroy();
    },
  };
}

/** Calls onReady once a process accepted a probe connection and closed it after our FIN. */
export function probeAccept(addr: SocketAddress, onReady: () => void): ReadyProbe {
  let delay = POLL_FIRST_MS;
  let timer: NodeJS.Timeout | undefined;
  let sock: net.Socket | undefined;
  let done = false;
  const retry = (): void => {
    if (done || timer !== undefined) return;
    timer = setTimeout(attempt, delay);
    delay = Math.min(POLL_MAX_MS, Math.ceil(delay * 1.5));
  };
  const attempt = (): void => {
    timer = undefined;
    const s = net.connect({ ...connectOpts(addr), allowHalfOpen: true });
    sock = s;
    let accepted = false;
    s.once('connect', () => s.end());
    s.on('data', () => {
      accepted = true; // whatever it says, it is reading
    });
    s.once('end', () => {
      accepted = true;
    });
    s.once('error', () => {
      accepted = false;
    });
    s.once('close', () => {
      sock = undefined;
      if (done) return;
      if (accepted) {
        done = true;
        onReady();
      } else retry();
    });
    s.resume();
  };
  attempt();
  return {
    cancel() {
      done = true;
      if (timer !== undefined) clearTimeout(timer);
      sock?.destroy();
    },
  };
}
