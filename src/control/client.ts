/**
 * The control socket's client side, for the CLI: one request, its response, and for
 * stop the wait until the daemon has gone (the daemon closes the connection as it exits).
 */
import { connect, type Socket } from 'node:net';
import { LineSplitter, type ControlRequest, type ControlResponse, type DaemonIdentity } from './protocol.js';

/** No daemon answers at the path (not running, stale socket, no permission). */
export class ControlUnavailable extends Error {
  readonly path: string;
  readonly errno: string | undefined;
  constructor(path: string, errno: string | undefined, why: string) {
    super(`no fcgi-pm daemon is running at ${path} (${why})`);
    this.name = 'ControlUnavailable';
    this.path = path;
    this.errno = errno;
  }
}

function why(err: NodeJS.ErrnoException): string {
  switch (err.code) {
    case 'ENOENT':
      return 'no such socket';
    case 'ECONNREFUSED':
      return 'connection refused: a stale socket';
    case 'EACCES':
    case 'EPERM':
      return 'permission denied: run as the daemon\'s user or root, or see control_socket_mode';
    case 'ENOTSOCK':
      return 'not a socket';
    default:
      return err.message;
  }
}

export interface ControlSession {
  response: ControlResponse;
  /** Resolves when the daemon closes the connection (or `ms` passed: false). */
  closed(ms: number): Promise<boolean>;
  end(): void;
}

/** Sends one request; resolves with its response. Rejects with ControlUnavailable when nobody listens. */
export function controlRequest(path: string, req: ControlRequest, timeoutMs = 60_000): Promise<ControlSession> {
  return new Promise((resolve, reject) => {
    const sock: Socket = connect({ path });
    sock.setEncoding('utf8');
    let connected = false;
    let done = false;
    let closed = false;
    const closeWaiters: Array<() => void> = [];
    const timer = setTimeout(() => {
      if (done) return;
      done = true;
      sock.destroy();
      reject(new Error(`the daemon at ${path} did not answer "${req.cmd}" within ${Math.round(timeoutMs / 1000)} s`));
    }, timeoutMs);
    const session = (response: ControlResponse): ControlSession => ({
      response,
      closed: (ms) =>
        new Promise<boolean>((res) => {
          if (closed) return res(true);
          const t = setTimeout(() => res(false), ms);
          closeWaiters.push(() => {
            clearTimeout(t);
            res(true);
          });
        }),
      end: () => sock.destroy(),
    });
    const lines = new LineSplitter((line) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      try {
        resolve(session(JSON.parse(line) as ControlResponse));
      } catch {
        reject(new Error(`the daemon at ${path} sent something that is not JSON: ${line.slice(0, 200)}`));
      }
    });
    sock.on('connect', () => {
      connected = true;
      sock.write(JSON.stringify(req) + '\n');
    });
    sock.on('data', (chunk: string) => lines.push(chunk));
    sock.on('error', (err: NodeJS.ErrnoException) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      reject(connected ? new Error(`control connection to ${path} failed: ${err.message}`) : new ControlUnavailable(path, err.code, why(err)));
    });
    sock.on('close', () => {
      closed = true;
      for (const w of closeWaiters.splice(0)) w();
      if (!done) {
        done = true;
        clearTimeout(timer);
        reject(new Error(`the daemon at ${path} closed the connection without answering "${req.cmd}"`));
      }
    });
  });
}

/**
 * Who answers at `path`: the daemon's identity when one does (from its answer to ping;
 * `{}` from a daemon too old to say), undefined when nobody listens there.
 */
export async function whoAnswers(path: string, timeoutMs = 5000): Promise<Partial<DaemonIdentity> | undefined> {
  try {
    const s = await controlRequest(path, { cmd: 'ping' }, timeoutMs);
    s.end();
    const r = s.response;
    const ping = r.ok ? (r.result as Partial<DaemonIdentity>) : {};
    return { pid: r.daemon?.pid ?? ping.pid, config: r.daemon?.config ?? ping.config };
  } catch (err) {
    if (err instanceof ControlUnavailable) return undefined;
    return {};
  }
}
