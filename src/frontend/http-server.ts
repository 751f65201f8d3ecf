/**
 * The HTTP/1.1 listener (node:http), for development and small boxes with no web server
 * in front: each request is split into SCRIPT_NAME/PATH_INFO under the document root,
 * turned into CGI variables and dispatched like any other exchange.
 *
 * Timeouts: one socket inactivity timer of idle_timeout decides by what the connection
 * is doing (idle, stalled head, stalled body, client not reading: close; waiting for a
 * backend: keep). requestTimeout is off on purpose: a slow but moving upload is fine.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { ListenerConfig } from '../config/types.js';
import { ErrorCodes } from '../errors.js';
import { Exchange } from '../protocol/exchange.js';
import { dispatchExchange } from './dispatch.js';
import type { FrontendEnv } from './env.js';
import { HttpCall, HttpConnection } from './http-call.js';
import { buildHttpCgiParams, paramsBytes, splitTarget, type HttpCgiOptions } from './http-cgi.js';
import type { FrontendContext, Listener } from './index.js';
import { remoteText } from './listen.js';
import { HttpRejectCodes } from './request-errors.js';
import { SessionListener } from './listener-base.js';
import { applyOverride, compileOverride } from './params-override.js';
import { StatCache, percentDecode, splitScript, type ScriptSplit } from './script-path.js';
import { bindListener } from './stream-listener.js';

export async function startHttpListener(cfg: ListenerConfig, ctx: FrontendContext): Promise<Listener> {
  const idle = cfg.idleTimeout;
  const server = createServer({
    noDelay: true,
    requestTimeout: 0,
    headersTimeout: cfg.headerTimeout,
    // node checks headersTimeout on this interval; our socket timer is the precise one.
    connectionsCheckingInterval: Math.max(250, Math.min(30_000, cfg.headerTimeout, idle > 0 ? idle : 30_000)),
    keepAliveTimeout: idle > 0 ? idle : 5_000,
    maxHeaderSize: Math.max(16 * 1024, ctx.limits.maxBytes),
  });
  server.maxHeadersCount = 0; // we count variables against the limit ourselves, with a 431
  server.timeout = idle;
  const listener = new SessionListener(cfg, server, ctx.logger.child({ listener: cfg.address.text, protocol: cfg.protocol }));
  const env: FrontendEnv = { cfg, ctx, listener, override: compileOverride(cfg.params) };
  const handler = new HttpHandler(env);

  server.on('connection', (socket: Socket) => {
    const conn = new HttpConnection(env, socket);
    socket.on('close', () => conn.closed());
  });
  server.on('request', (req: IncomingMessage, res: ServerResponse) => handler.onRequest(req, res));
  server.on('timeout', (socket: Socket) => {
    const conn = HttpConnection.of(socket);
    if (conn) conn.onTimeout();
    else socket.destroy();
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => onClientError(env, err, socket));
  await bindListener(listener, ctx);
  return listener;
}

class HttpHandler {
  private readonly env: FrontendEnv;
  private readonly opts: HttpCgiOptions;
  private readonly rootFs: string | undefined;
  private readonly cache = new StatCache();

  constructor(env: FrontendEnv) {
    this.env = env;
    const dr = env.cfg.documentRoot;
    // CGI variables are latin1 strings of bytes; the root is UTF-8 on disk.
    const root = dr === undefined ? undefined : Buffer.from(dr.replace(/\/+$/, ''), 'utf8').toString('latin1');
    this.rootFs = root;
    this.opts = { documentRoot: root };
  }

  onRequest(req: IncomingMessage, res: ServerResponse): void {
    const conn = HttpConnection.of(req.socket)!;
    const call = new HttpCall(conn, req, res);
    const url = req.url ?? '/';
    const { path: rawPath, query } = splitTarget(url);
    const root = this.rootFs;
    if (root === undefined) {
      const path = percentDecode(rawPath) ?? rawPath;
      this.start(call, url, query, { path, scriptName: '', pathInfo: path, found: false });
      return;
    }
    const path = percentDecode(rawPath);
    if (path === undefined || path.includes('\0') || !path.startsWith('/')) {
      this.reject(call, 400, 'bad request path');
      return;
    }
    const split = splitScript(root, path, this.env.cfg.index, this.cache);
    if (split === undefined) {
      this.reject(call, 400, 'request path escapes the document root');
      return;
    }
    if (!(split instanceof Promise)) {
      this.start(call, url, query, split);
      return;
    }
    split.then(
      (s) => this.start(call, url, query, s),
      (err: unknown) => {
        this.env.listener.log.error({ remote: conn.remote, err }, 'script lookup failed');
        this.reject(call, 500, 'script lookup failed');
      },
    );
  }

  private reject(call: HttpCall, status: number, why: string): void {
    this.env.listener.log.warn({ remote: call.conn.remote, code: HttpRejectCodes.BAD_PATH, status, url: call.req.url }, why);
    call.answerPlain(status, HttpRejectCodes.BAD_PATH);
  }

  private start(call: HttpCall, url: string, query: string, split: ScriptSplit): void {
    if (call.gone) return;
    const req = call.req;
    const limits = this.env.ctx.limits;
    // Refuse a flood of headers before building anything from them.
    if (req.rawHeaders.length / 2 > limits.maxCount) {
      this.env.listener.log.warn({ remote: call.conn.remote, code: ErrorCodes.PARAMS_TOO_MANY, count: req.rawHeaders.length / 2 }, 'HTTP request with too many headers; answered 431');
      call.answerPlain(431, ErrorCodes.PARAMS_TOO_MANY);
      return;
    }
    const sock = req.socket;
    const params = buildHttpCgiParams(
      {
        method: req.method ?? 'GET',
        url,
        httpVersion: req.httpVersion,
        rawHeaders: req.rawHeaders,
        localAddress: sock.localAddress,
        localPort: sock.localPort,
        remoteAddress: sock.remoteAddress,
        remotePort: sock.remotePort,
        listenerText: this.env.listener.address,
      },
      query,
      split,
      this.opts,
    );
    applyOverride(params, this.env.override);
    if (params.size > limits.maxCount || paramsBytes(params) > limits.maxBytes) {
      const code = params.size > limits.maxCount ? ErrorCodes.PARAMS_TOO_MANY : ErrorCodes.PARAMS_TOO_LARGE;
      this.env.listener.log.warn({ remote: call.conn.remote, code, count: params.size }, 'HTTP request variables over the limits; answered 431');
      call.answerPlain(431, code);
      return;
    }
    const ex = new Exchange(params, call, 'http', performance.now());
    call.attach(ex);
    dispatchExchange(this.env, ex);
  }
}

function onClientError(env: FrontendEnv, err: NodeJS.ErrnoException, socket: Socket): void {
  const remote = remoteText(socket.remoteAddress, socket.remotePort);
  const code = err.code ?? 'HTTP_BAD_REQUEST';
  if (code === 'ECONNRESET' || code === 'EPIPE') {
    env.listener.log.debug({ remote, code }, 'HTTP client connection reset');
    socket.destroy();
    return;
  }
  env.listener.log.warn({ remote, code, err: err.message }, 'bad HTTP request; closing connection');
  const status = code === 'HPE_HEADER_OVERFLOW' ? 431 : code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
  const busy = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true;
  if (socket.writable && !busy) {
    const text = `${status} ${status === 431 ? 'Request Header Fields Too Large' : status === 408 ? 'Request Timeout' : 'Bad Request'}\n`;
    socket.write(`HTTP/1.1 ${status} ${text.slice(4, -1)}\r\nContent-Type: text/plain\r\nContent-Length: ${text.length}\r\nConnection: close\r\n\r\n${text}`);
    socket.destroySoon();
  } else {
    socket.destroy();
  }
}
