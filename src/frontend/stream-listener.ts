/**
 * Shared start-up for the socket-level listeners (FastCGI, SCGI): build the
 * per-listener environment once, turn each accepted socket into a session, bind.
 */
import type { Server, Socket } from 'node:net';
import type { ListenerConfig } from '../config/types.js';
import type { FrontendEnv } from './env.js';
import type { FrontendContext, Listener } from './index.js';
import { listenOn } from './listen.js';
import { SessionListener } from './listener-base.js';
import { compileOverride } from './params-override.js';
import { ScriptGate } from './script-gate.js';
import { ErrorCodes } from '../errors.js';

export async function startSessionListener(
  cfg: ListenerConfig,
  ctx: FrontendContext,
  server: Server,
  makeSession: (env: FrontendEnv, socket: Socket) => unknown,
): Promise<Listener> {
  const listener = new SessionListener(cfg, server, ctx.logger.child({ listener: cfg.address.text, protocol: cfg.protocol }));
  const env: FrontendEnv = { cfg, ctx, listener, override: compileOverride(cfg.params), scripts: new ScriptGate(undefined) };
  acceptConnections(listener, (socket) => makeSession(env, socket));
  watchServer(listener);
  await bindListener(listener, ctx);
  return listener;
}

/**
 * The one accept path of every listener: allowed_clients first, so a refused client's
 * socket is closed before a byte is read or a session is made for it.
 */
export function acceptConnections(listener: SessionListener, serve: (socket: Socket) => void): void {
  listener.server.on('connection', (socket: Socket) => {
    if (listener.gate.admit(socket)) serve(socket);
  });
}

/** Logs what the server itself reports: refused connections over max_conns, errors after start. */
export function watchServer(listener: SessionListener): void {
  listener.server.on('drop', (d?: { remoteAddress?: string }) => {
    listener.log.warn({ code: ErrorCodes.MAX_CONNS, remote: d?.remoteAddress ?? 'unix', maxConns: listener.config.maxConns }, 'connection refused: max_conns reached');
  });
}

/** Binds, then rebinds the logger to the real address (port 0 → the port we got). */
export async function bindListener(listener: SessionListener, ctx: FrontendContext): Promise<void> {
  const cfg = listener.config;
  listener.address = await listenOn(listener.server, cfg.address, { mode: cfg.mode, owner: cfg.owner?.id, group: cfg.group?.id, maxConns: cfg.maxConns });
  listener.log = ctx.logger.child({ listener: listener.address, protocol: cfg.protocol });
  listener.server.on('error', (err) => listener.log.error({ code: ErrorCodes.ACCEPT_FAILED, err }, 'listener error'));
  listener.log.info('listening');
}
