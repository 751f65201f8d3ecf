/**
 * Connections a listener cannot take (over max_conns, or into the open-files reserve)
 * are answered "overloaded" and closed, never reset: a reset reads as a broken server,
 * an overload answer as "try again". The answer waits for the client's first bytes
 * (a FastCGI answer needs the request id; closing with unread bytes would reset), then
 * the rest is read and dropped until the client closes or OVERFLOW_DEADLINE_MS passes.
 *
 * Warnings come as one line per episode: the first overflow, then a count every
 * REPORT_MS while it lasts, and one line when it is over.
 */
import type { Server, Socket } from 'node:net';
import { ErrorCodes } from '../errors.js';
import { renderCgiError } from '../protocol/cgi-response.js';
import { encodeEndRequest, encodeRecord, ProtocolStatus, RecordType } from '../protocol/fastcgi.js';
import type { FrontProtocol } from '../config/types.js';
import type { FdGuard } from './fd-guard.js';
import type { SessionListener } from './listener-base.js';
import { errorText } from './request-errors.js';

/** An overflow connection's whole life: enough to answer, bounded under a flood. */
const OVERFLOW_DEADLINE_MS = 2000;
const REPORT_MS = 10_000;
const RETRY_AFTER_S = 1;

type Why = 'max_conns' | 'open_files';

/**
 * Puts the admission check in front of every 'connection' listener the server has so
 * far (node:http's own parser setup among them), so a connection we do not take never
 * reaches a session or a parser. Call after the listeners are added, before binding.
 */
export function guardConnections(listener: SessionListener, fds: FdGuard | undefined): void {
  const server: Server = listener.server;
  const inner = server.listeners('connection') as Array<(socket: Socket) => void>;
  server.removeAllListeners('connection');
  const episode = new OverflowEpisode(listener);
  const fdClosed = fds === undefined ? undefined : (): void => fds.closed();
  server.on('connection', (socket: Socket) => {
    // A client allowed_clients refuses is closed unread before it can cost anything more.
    if (!listener.gate.admit(socket)) return;
    let why: Why | undefined;
    if (fds !== undefined) {
      fds.opened();
      socket.on('close', fdClosed!); // 'close' comes once; on() spares once()'s wrapper
      const room = fds.room();
      if (room === 'exhausted') {
        episode.note('open_files', true);
        socket.destroy();
        return;
      }
      if (room === 'overflow') why = 'open_files';
    }
    if (why === undefined && listener.connections >= listener.config.maxConns) why = 'max_conns';
    if (why === undefined) {
      for (let i = 0; i < inner.length; i++) inner[i]!.call(server, socket);
      return;
    }
    episode.note(why, false);
    answerOverloaded(socket, listener.config.protocol);
  });
}

/** The cheapest correct "overloaded" in each protocol, then close. */
export function answerOverloaded(socket: Socket, protocol: FrontProtocol): void {
  socket.setTimeout(OVERFLOW_DEADLINE_MS, () => socket.destroy());
  socket.on('error', ignore);
  socket.on('end', () => socket.destroy());
  let head = Buffer.alloc(0);
  const onData = (chunk: Buffer): void => {
    if (protocol === 'fastcgi' && head.length + chunk.length < 8) {
      head = Buffer.concat([head, chunk]);
      return;
    }
    socket.off('data', onData);
    socket.on('data', ignore); // read and drop: unread bytes would turn our close into a reset
    const first = head.length > 0 ? Buffer.concat([head, chunk]) : chunk;
    socket.end(overloadedAnswer(protocol, first));
  };
  socket.on('data', onData);
}

function overloadedAnswer(protocol: FrontProtocol, first: Buffer): Buffer {
  const page = renderCgiError(503, errorText(503, ErrorCodes.TOO_MANY_CONNECTIONS), RETRY_AFTER_S);
  if (protocol === 'scgi') return page;
  if (protocol === 'http') {
    const text = errorText(503, ErrorCodes.TOO_MANY_CONNECTIONS);
    return Buffer.from(
      `HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(text)}\r\nRetry-After: ${RETRY_AFTER_S}\r\nConnection: close\r\n\r\n${text}`,
    );
  }
  // The first record names the request (nginx opens with BEGIN_REQUEST). The page is for
  // web servers that show what they got; FCGI_OVERLOADED says it to those that read it.
  const id = first.readUInt16BE(2);
  if (id === 0) return Buffer.alloc(0); // a management record first: nothing to refuse
  return Buffer.concat([encodeRecord(RecordType.Stdout, id, page), encodeRecord(RecordType.Stdout, id), encodeEndRequest(id, 0, ProtocolStatus.Overloaded)]);
}

function ignore(): void {}

/** One warning when connections start to overflow, a count while they do, a line when it is over. */
class OverflowEpisode {
  private readonly listener: SessionListener;
  private answered = 0;
  private refused = 0;
  private total = 0;
  private startedAt = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(listener: SessionListener) {
    this.listener = listener;
  }

  note(why: Why, refused: boolean): void {
    this.total++;
    this.listener.overflowed++;
    if (this.timer !== undefined) {
      if (refused) this.refused++;
      else this.answered++;
      return;
    }
    this.startedAt = Date.now();
    const cfg = this.listener.config;
    this.listener.log.warn(
      { code: ErrorCodes.TOO_MANY_CONNECTIONS, why, maxConns: cfg.maxConns, connections: this.listener.connections },
      why === 'max_conns'
        ? `connections over max_conns (${cfg.maxConns}): answering "overloaded" and closing; counts follow every ${REPORT_MS / 1000}s`
        : `open files near the limit: answering new connections "overloaded"; counts follow every ${REPORT_MS / 1000}s`,
    );
    this.timer = setInterval(() => this.report(), REPORT_MS);
    this.timer.unref();
  }

  private report(): void {
    const log = this.listener.log;
    if (this.answered + this.refused > 0) {
      log.warn({ code: ErrorCodes.TOO_MANY_CONNECTIONS, answered: this.answered, refused: this.refused, connections: this.listener.connections }, `${this.answered + this.refused} more connections over the limit in ${REPORT_MS / 1000}s`);
      this.answered = this.refused = 0;
      return;
    }
    clearInterval(this.timer);
    this.timer = undefined;
    log.info({ code: ErrorCodes.TOO_MANY_CONNECTIONS, total: this.total, seconds: Math.round((Date.now() - this.startedAt) / 1000) }, 'connection overflow over');
    this.total = 0;
  }
}
