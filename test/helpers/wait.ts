import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Thrown by a waitFor predicate to stop waiting at once (e.g. the process being waited on exited). */
export class WaitAborted extends Error {}

/** Polls `pred` until it returns a truthy value; throws naming `what` after `timeout` ms. */
export async function waitFor<T>(
  pred: () => T | Promise<T>,
  opts: { timeout?: number; interval?: number; what?: string } = {},
): Promise<NonNullable<T>> {
  const timeout = opts.timeout ?? 10_000;
  const interval = opts.interval ?? 25;
  const deadline = Date.now() + timeout;
  let lastErr: unknown;
  for (;;) {
    try {
      const v = await pred();
      if (v) return v as NonNullable<T>;
    } catch (err) {
      if (err instanceof WaitAborted) throw err;
      lastErr = err;
    }
    if (Date.now() >= deadline) {
      const why = lastErr instanceof Error ? ` (last error: ${lastErr.message})` : '';
      throw new Error(`timed out after ${timeout} ms waiting for ${opts.what ?? 'condition'}${why}`);
    }
    await sleep(interval);
  }
}

/** Rejects with a clear message if `p` does not settle within `ms`. */
export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

/** `localAddress`: the client's own address (e.g. 127.0.0.2, to test allowed_clients). */
export type ConnectTarget = { port: number; host?: string; localAddress?: string } | { path: string };

export function connectTo(target: ConnectTarget): Socket {
  return 'path' in target ? connect(target.path) : connect({ port: target.port, host: target.host ?? '127.0.0.1', localAddress: target.localAddress });
}

/** Resolves true when a connection to the target succeeds (and closes it), false on error. */
export function canConnect(target: ConnectTarget): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connectTo(target);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** Parses "unix:/p", "/p" or "host:port" the way the config does. */
export function targetOf(address: string): ConnectTarget {
  if (address.startsWith('unix:')) return { path: address.slice(5) };
  if (address.startsWith('/')) return { path: address };
  const i = address.lastIndexOf(':');
  let host = address.slice(0, i);
  if (host.startsWith('[')) host = host.slice(1, -1);
  if (host === '' || host === '*' || host === '0.0.0.0') host = '127.0.0.1';
  return { host, port: Number(address.slice(i + 1)) };
}

/**
 * True when something listens at the target, read from /proc/net without connecting:
 * php-cgi counts even a bare connect toward PHP_FCGI_MAX_REQUESTS, so a probe by
 * connecting would change what the test measures.
 */
export function isListening(target: ConnectTarget): boolean {
  if ('path' in target) {
    // Flags 00010000 = __SO_ACCEPTCON: a listening socket; the path is the last column.
    return readFileSync('/proc/net/unix', 'utf8')
      .split('\n')
      .some((line) => line.endsWith(` ${target.path}`) && line.split(/\s+/)[3] === '00010000');
  }
  const port = target.port.toString(16).toUpperCase().padStart(4, '0');
  return ['/proc/net/tcp', '/proc/net/tcp6'].some((f) =>
    readFileSync(f, 'utf8')
      .split('\n')
      .some((line) => {
        const cols = line.trim().split(/\s+/);
        return cols[1]?.endsWith(`:${port}`) === true && cols[3] === '0A';
      }),
  );
}
