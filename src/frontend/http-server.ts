/**
 * The HTTP/1.1 listener (node:http), for development and small boxes with no web server
 * in front: each request is split into SCRIPT_NAME/PATH_INFO under the document root,
 * turned into CGI variables and dispatched like any other exchange.
 *
 * Timeouts: one socket inactivity timer decides by what the connection is doing (idle,
 * client not reading: close; waiting for a backend: keep). It runs at idle_timeout, and
 * at body_timeout while a request body is due (a stalled body is cut then). The first
 * head on a connection must be complete within header_timeout of the accept, as nginx's
 * client_header_timeout: a deadline of our own (firstHeads), exact, answered 408. A kept
 * connection's later heads, within header_timeout of their first byte: node's
 * headersTimeout (it answers 408), checked every HEADER_CHECK_MS instead of node's 30 s.
 * (A 'data' listener of our own would see the first byte, but it takes the socket from
 * node's parser, which reads it natively.) requestTimeout is off on purpose: a slow but
 * moving upload is fine.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { ListenerConfig, RewriteRule } from '../config/types.js';
import { ErrorCodes } from '../errors.js';
import { reasonPhrase } from '../protocol/cgi-response.js';
import { Exchange } from '../protocol/exchange.js';
import { dispatchExchange } from './dispatch.js';
import type { FrontendEnv } from './env.js';
import { HttpCall, HttpConnection } from './http-call.js';
import { buildHttpCgiParams, paramsBytes, splitTarget, type HttpCgiOptions } from './http-cgi.js';
import type { CgiParams } from '../protocol/params.js';
import type { FrontendContext, Listener } from './types.js';
import { remoteText } from './listen.js';
import { BufferedBody } from './request-body.js';
import { HttpRejectCodes } from './request-errors.js';
import { clientErrorStatus, headProblem } from './http-strict.js';
import { SessionListener } from './listener-base.js';
import { applyOverride, compileOverride } from './params-override.js';
import { answerMethodNotAllowed, hasDotSegment, serveFile } from './http-static.js';
import type { Pool } from '../pool/types.js';
import { latin1Path, ScriptGate, type ScriptVerdict } from './script-gate.js';
import { hasAllowedExtension, type ScriptRefusal } from './script-guard.js';
import { percentDecode, splitScript, type ScriptSplit } from './script-path.js';
import { frontController, joinQuery, rewriteByRules } from './rewrite.js';
import { bindListener } from './stream-listener.js';
import { systemClock } from '../util/clock.js';
import { DeadlineList } from '../util/deadline-list.js';

/** How often node looks for kept connections' heads past header_timeout: the margin of that timeout. */
const HEADER_CHECK_MS = 250;

export async function startHttpListener(cfg: ListenerConfig, ctx: FrontendContext): Promise<Listener> {
  const idle = cfg.idleTimeout;
  const server = createServer({
    noDelay: true,
    requestTimeout: 0,
    headersTimeout: cfg.headerTimeout,
    connectionsCheckingInterval: Math.min(HEADER_CHECK_MS, cfg.headerTimeout),
    keepAliveTimeout: idle > 0 ? idle : 5_000,
    maxHeaderSize: Math.max(16 * 1024, ctx.limits.maxBytes),
  });
  server.maxHeadersCount = 0; // we count variables against the limit ourselves, with a 431
  server.timeout = idle;
  const listener = new SessionListener(cfg, server, ctx.logger.child({ listener: cfg.address.text, protocol: cfg.protocol }));
  const env: FrontendEnv = { cfg, ctx, listener, override: compileOverride(cfg.params), scripts: new ScriptGate(cfg.documentRoot) };
  const handler = new HttpHandler(env);
  const firstHeads = new DeadlineList<HttpConnection>(systemClock, cfg.headerTimeout, (conn) => conn.firstHeadTimedOut());

  server.on('connection', (socket: Socket) => {
    const conn = new HttpConnection(env, socket);
    firstHeads.push(conn.firstHead);
    socket.on('close', () => conn.closed());
  });
  server.on('request', (req: IncomingMessage, res: ServerResponse) => handler.onRequest(req, res));
  // "Expect: 100-continue" for a body we will refuse gets the 413 instead of the go-ahead.
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    if (!(Number(req.headers['content-length'] ?? 0) > env.cfg.maxBodySize)) res.writeContinue();
    handler.onRequest(req, res);
  });
  server.on('timeout', (socket: Socket) => {
    const conn = HttpConnection.of(socket);
    if (conn) conn.onTimeout();
    else socket.destroy();
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => onClientError(env, err, socket));
  await bindListener(listener, ctx);
  return listener;
}

/** Where a request's path is resolved: the listener's document_root or a site's (latin1), and the rewrite rules there. */
interface Where {
  root: string | undefined;
  opts: HttpCgiOptions;
  rules: readonly RewriteRule[] | undefined;
  front: string | undefined;
}

function whereOf(root: string | undefined, rules: readonly RewriteRule[]): Where {
  return { root, opts: { documentRoot: root }, rules: rules.length > 0 ? rules : undefined, front: frontController(rules) };
}

class HttpHandler {
  private readonly env: FrontendEnv;
  private readonly rootFs: string | undefined;
  private readonly own: Where;
  /** Per site definition (a changed site is a new object). */
  private readonly sites = new WeakMap<object, Where>();

  constructor(env: FrontendEnv) {
    this.env = env;
    // CGI variables are latin1 strings of bytes; the root is UTF-8 on disk.
    this.rootFs = env.scripts.documentRoot;
    this.own = whereOf(this.rootFs, env.cfg.rewrite ?? []);
  }

  /** A vhosts listener resolves the path in the site the Host names (its rules first); else the listener's own. */
  private whereFor(req: IncomingMessage): Where {
    if (this.env.cfg.vhosts !== true) return this.own;
    const site = this.env.ctx.site?.(req.headers.host ?? '');
    if (site === undefined) return this.own;
    let w = this.sites.get(site);
    if (w === undefined) {
      w = whereOf(latin1Path(site.documentRoot), [...site.rewrite, ...(this.env.cfg.rewrite ?? [])]);
      this.sites.set(site, w);
    }
    return w;
  }

  onRequest(req: IncomingMessage, res: ServerResponse): void {
    const conn = HttpConnection.of(req.socket)!;
    conn.headCame();
    const call = new HttpCall(conn, req, res);
    const problem = headProblem(req);
    if (problem !== undefined) {
      this.env.listener.log.warn({ remote: conn.remote, code: problem.code, status: problem.status, url: req.url }, problem.why);
      call.answerPlain(problem.status, problem.code, true);
      return;
    }
    const url = req.url ?? '/';
    const target = splitTarget(url);
    let query = target.query;
    const at = this.whereFor(req);
    const root = at.root;
    if (root === undefined) {
      const path = percentDecode(target.path) ?? target.path;
      this.start(call, url, query, { path, scriptName: '', pathInfo: path, found: false }, at);
      return;
    }
    let path = percentDecode(target.path);
    if (path === undefined || path.includes('\0') || !path.startsWith('/')) {
      this.reject(call, 400, 'bad request path');
      return;
    }
    const r = at.rules === undefined ? undefined : rewriteByRules(at.rules, path);
    if (r !== undefined) {
      path = r.path;
      query = joinQuery(r.query, query);
    }
    const split = splitScript(root, path, this.env.cfg.index, this.env.scripts.cache);
    if (split === undefined) {
      this.reject(call, 400, 'request path escapes the document root');
      return;
    }
    if (!(split instanceof Promise)) {
      this.start(call, url, query, split, at);
      return;
    }
    split.then(
      (s) => this.start(call, url, query, s, at),
      (err: unknown) => {
        this.env.listener.log.error({ code: ErrorCodes.INTERNAL, remote: conn.remote, err }, 'script lookup failed');
        this.reject(call, 500, 'script lookup failed');
      },
    );
  }

  /** Scanners send these by the thousand: the warning shares the gate's rate limit. */
  private reject(call: HttpCall, status: number, why: string): void {
    this.env.scripts.warn(this.env.listener.log, { status, code: HttpRejectCodes.BAD_PATH, reason: why }, undefined, call.req.url, call.conn.remote);
    call.answerPlain(status, HttpRejectCodes.BAD_PATH);
  }

  private start(call: HttpCall, url: string, query: string, found: ScriptSplit, at: Where): void {
    if (call.gone) return;
    const req = call.req;
    // try_files $uri /index.php: a path naming no file runs the front controller.
    const split = found.found || at.front === undefined ? found : { path: found.path, scriptName: at.front, pathInfo: found.path, found: true };
    if (at.root !== undefined && hasDotSegment(split.path)) {
      this.env.scripts.warn(this.env.listener.log, DOTFILE, undefined, url, call.conn.remote);
      call.answerPlain(DOTFILE.status, DOTFILE.code);
      return;
    }
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
      at.opts,
    );
    applyOverride(params, this.env.override);
    if (params.size > limits.maxCount || paramsBytes(params) > limits.maxBytes) {
      const code = params.size > limits.maxCount ? ErrorCodes.PARAMS_TOO_MANY : ErrorCodes.PARAMS_TOO_LARGE;
      this.env.listener.log.warn({ remote: call.conn.remote, code, count: params.size }, 'HTTP request variables over the limits; answered 431');
      call.answerPlain(431, code);
      return;
    }
    this.readBody(call, params, split, at.root);
  }

  /**
   * A Content-Length body streams to the backend as it arrives; a chunked one is read
   * whole first (request-body.ts) so the backend gets its CONTENT_LENGTH.
   */
  private readBody(call: HttpCall, params: CgiParams, split: ScriptSplit, root: string | undefined): void {
    const { req } = call;
    const cfg = this.env.cfg;
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > cfg.maxBodySize) {
      this.tooLarge(call, declared);
      return;
    }
    if (req.headers['transfer-encoding'] === undefined) {
      this.dispatch(call, params, split, root);
      return;
    }
    const body = new BufferedBody({ memory: cfg.bodyBufferSize, max: cfg.maxBodySize, dir: this.env.ctx.tempDir?.() });
    call.buffered = body;
    call.conn.bodyDue(true);
    body.collect(req, (o) => {
      call.conn.bodyDue(false);
      if (o.ok) {
        params.set('CONTENT_LENGTH', String(body.size));
        this.dispatch(call, params, split, root);
      } else if (o.tooLarge) {
        this.tooLarge(call, body.size);
      } else {
        this.env.listener.log.error({ remote: call.conn.remote, code: ErrorCodes.HTTP_BODY_BUFFER, err: o.err?.message }, 'could not buffer the HTTP request body; answered 500');
        call.answerPlain(500, ErrorCodes.HTTP_BODY_BUFFER, true);
      }
    });
  }

  private tooLarge(call: HttpCall, bytes: number): void {
    const code = ErrorCodes.HTTP_BODY_TOO_LARGE;
    this.env.listener.log.warn({ remote: call.conn.remote, code, bytes, max: this.env.cfg.maxBodySize, url: call.req.url }, 'HTTP request body over max_body_size; answered 413');
    call.answerPlain(413, code, true);
  }

  private dispatch(call: HttpCall, params: CgiParams, split: ScriptSplit, root: string | undefined): void {
    const ex = new Exchange(params, call, 'http', performance.now());
    if (call.buffered !== undefined) call.attachBuffered(ex);
    else call.attach(ex);
    dispatchExchange(this.env, ex, split.found && root !== undefined ? (pool) => this.serveStatic(ex, split, pool, root) : undefined);
  }

  /**
   * A file the pool would not run (its name is not in limit_extensions) is sent as it is;
   * true when it was taken. Pools without limit_extensions get every request as before.
   */
  private serveStatic(ex: Exchange, split: ScriptSplit, pool: Pool, root: string): boolean {
    const exts = pool.scriptRules?.extensions;
    if (exts === undefined || exts.length === 0 || split.pathInfo !== '' || hasAllowedExtension(split.scriptName, exts)) return false;
    const log = this.env.listener.log;
    const method = ex.params.get('REQUEST_METHOD');
    if (method !== 'GET' && method !== 'HEAD') {
      this.env.scripts.warn(log, METHOD_NOT_ALLOWED, undefined, ex.params.get('REQUEST_URI'), ex.params.get('REMOTE_ADDR'));
      answerMethodNotAllowed(ex);
      return true;
    }
    const file = root + split.scriptName;
    const serve = (v: ScriptVerdict): void => {
      if (ex.finished) return;
      if (v !== undefined) this.env.scripts.refuse(log, ex, v);
      else void serveFile(ex, file);
    };
    const verdict = this.env.scripts.checkStatic(file, root);
    if (verdict instanceof Promise) void verdict.then(serve);
    else serve(verdict);
    return true;
  }
}

const DOTFILE: ScriptRefusal = { status: 403, code: ErrorCodes.HTTP_FORBIDDEN, reason: 'path segment starting with "." (only /.well-known/ is served)' };
const METHOD_NOT_ALLOWED: ScriptRefusal = { status: 405, code: ErrorCodes.HTTP_METHOD_NOT_ALLOWED, reason: 'static files answer GET and HEAD only' };

function onClientError(env: FrontendEnv, err: NodeJS.ErrnoException, socket: Socket): void {
  const remote = remoteText(socket.remoteAddress, socket.remotePort);
  const code = err.code ?? 'HTTP_BAD_REQUEST';
  if (code === 'ECONNRESET' || code === 'EPIPE') {
    env.listener.log.debug({ remote, parserCode: code }, 'HTTP client connection reset');
    socket.destroy();
    return;
  }
  const conn = HttpConnection.of(socket);
  if (code === 'HPE_INVALID_EOF_STATE' && conn?.calls.snapshot().some((c) => c.exchange !== undefined && !c.exchange.finished && !c.req.complete)) {
    // The client closed its side owing a body: none can come, so its request ends now
    // (499, as when the client vanishes) rather than at body_timeout.
    env.listener.log.debug({ remote, parserCode: code }, 'HTTP client closed its connection in the middle of a request body');
    socket.destroy();
    return;
  }
  env.listener.log.warn({ code: ErrorCodes.HTTP_BAD_REQUEST, remote, parserCode: code, err: err.message }, 'bad HTTP request; closing connection');
  // One answer per request: a request already answered, complete (its body parsed) or
  // whose response a backend may still send keeps that answer, then the connection
  // closes; otherwise the bad bytes are in a body still being read (that request is
  // dropped) or begin a new request, and get the 400.
  // node answers some requests itself (HTTP/1.1 without Host: 400, Connection: close)
  // and never shows them to us; the bytes after such a head must not get a second answer.
  let answered = (socket as Socket & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage?.headersSent === true;
  for (const c of conn?.calls.snapshot() ?? []) {
    if (c.exchange !== undefined || c.res.headersSent || c.req.complete) answered = true;
    else {
      c.gone = true;
      c.buffered?.discard();
    }
  }
  if (answered) {
    if (conn !== undefined) conn.drain();
    else socket.destroySoon();
    return;
  }
  if (socket.writable) {
    const status = clientErrorStatus(err);
    const text = `${status} ${reasonPhrase(status)}\n`;
    socket.write(`HTTP/1.1 ${text.slice(0, -1)}\r\nContent-Type: text/plain\r\nContent-Length: ${text.length}\r\nConnection: close\r\n\r\n${text}`);
    socket.destroySoon();
  } else {
    socket.destroy();
  }
}
