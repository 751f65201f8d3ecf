/**
 * The control socket's server side: a Unix socket (mode control_socket_mode, default
 * 0600, owned by the daemon's user) answering protocol.ts requests through handlers the
 * daemon supplies. Binding is injected (the daemon passes src/frontend's listenOn, which
 * replaces a stale socket but never a live one or a non-socket file).
 */
import { createServer, type Server, type Socket } from 'node:net';
import type { Logger } from '../log/log.js';
import { LineSplitter, MAX_REQUEST_LINE, parseRequest, type ControlError, type ControlRequest, type ControlResponse, type DaemonIdentity } from './protocol.js';
import { ErrorCodes } from '../errors.js';

export interface ControlHandlers {
  status(req: ControlRequest): Promise<unknown>;
  reload(): Promise<unknown>;
  /** Replaces one pool's workers: a reload of the running config with that pool swapped, or `rolling`, one at a time. */
  restart(pool: string, rolling: boolean): Promise<unknown>;
  /** Retires one pool's workers after their requests. */
  drain(pool: string): Promise<unknown>;
  /** Starts a stop; the daemon closes the socket when it is done. */
  stop(timeoutMs: number | undefined): void;
  ping(): unknown;
  /** Readiness (readiness.ts), of one pool too when named. */
  ready(pool?: string): unknown;
  /** Upgrade in place: resolves with the new daemon's pid once it serves; this one then stops. */
  upgrade(): Promise<unknown>;
  /** Reopens the log files; resolves with their paths. */
  reopenLogs(): unknown;
  /** The daemon's recent warn/error lines. */
  warnings(): unknown;
}

/** What binding gave: how to remove the socket file on close. */
export interface BoundControl {
  release(): void;
}

export type BindControl = (server: Server, path: string, mode: number) => Promise<BoundControl>;

/** Turns a thrown error into the protocol's error object. */
export function controlError(err: unknown): ControlError {
  const e = err as { code?: unknown; message?: unknown; problems?: unknown };
  return {
    code: typeof e?.code === 'string' ? e.code : undefined,
    message: typeof e?.message === 'string' ? e.message : String(err),
    problems: Array.isArray(e?.problems) ? (e.problems as string[]) : undefined,
  };
}

export class ControlServer {
  readonly path: string;
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private bound: BoundControl | undefined;

  private constructor(path: string, server: Server) {
    this.path = path;
    this.server = server;
  }

  static async start(path: string, mode: number, handlers: ControlHandlers, logger: Logger, bind: BindControl, identity: DaemonIdentity): Promise<ControlServer> {
    const server = createServer({ allowHalfOpen: true });
    const cs = new ControlServer(path, server);
    server.on('connection', (sock) => cs.serve(sock, handlers, logger, identity));
    server.on('error', (err) => logger.error({ code: ErrorCodes.CONTROL_SOCKET, err, path }, 'control socket error'));
    cs.bound = await bind(server, path, mode);
    return cs;
  }

  private serve(sock: Socket, handlers: ControlHandlers, logger: Logger, identity: DaemonIdentity): void {
    this.sockets.add(sock);
    sock.setEncoding('utf8');
    // Responses go out in request order even when a later request finishes first.
    let chain: Promise<void> = Promise.resolve();
    const reply = (r: ControlResponse): void => {
      if (!sock.destroyed && sock.writable) sock.write(JSON.stringify({ ...r, daemon: identity }) + '\n');
    };
    const lines = new LineSplitter((line) => {
      chain = chain.then(async () => {
        const req = parseRequest(line);
        if (typeof req === 'string') return reply({ ok: false, error: { code: 'EBADREQUEST', message: req } });
        logger.debug({ cmd: req.cmd }, 'control request');
        try {
          switch (req.cmd) {
            case 'status':
              return reply({ ok: true, result: await handlers.status(req) });
            case 'reload':
              return reply({ ok: true, result: await handlers.reload() });
            case 'ping':
              return reply({ ok: true, result: handlers.ping() });
            case 'ready':
              return reply({ ok: true, result: handlers.ready(req.pool) });
            case 'warnings':
              return reply({ ok: true, result: handlers.warnings() });
            case 'restart':
              return reply({ ok: true, result: await handlers.restart(req.pool!, req.rolling === true) });
            case 'drain':
              return reply({ ok: true, result: await handlers.drain(req.pool!) });
            case 'upgrade':
              return reply({ ok: true, result: await handlers.upgrade() });
            case 'reopen-logs':
              return reply({ ok: true, result: handlers.reopenLogs() });
            case 'stop':
              reply({ ok: true, result: { stopping: true } });
              handlers.stop(req.timeout_ms);
              return;
          }
        } catch (err) {
          reply({ ok: false, error: controlError(err) });
        }
      });
    }, MAX_REQUEST_LINE);
    sock.on('data', (chunk: string) => {
      if (!lines.push(chunk)) {
        reply({ ok: false, error: { code: 'EBADREQUEST', message: `request line longer than ${MAX_REQUEST_LINE} bytes` } });
        sock.end();
      }
    });
    sock.on('end', () => void chain.then(() => sock.end()));
    sock.on('error', () => sock.destroy());
    sock.on('close', () => this.sockets.delete(sock));
  }

  /**
   * Stops accepting. With `dropConnections` (the daemon's last step) open connections are
   * closed too, so a waiting `fcgi-pm stop` sees the daemon gone; without, they may finish.
   */

  close(dropConnections = true): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.bound?.release();
      if (dropConnections) for (const s of this.sockets) s.destroy();
      else resolve();
    });
  }
}
