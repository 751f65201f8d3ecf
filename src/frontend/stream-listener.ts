/**
 * Shared start-up for the socket-level listeners (FastCGI, SCGI): build the
 * per-listener environment once, turn each accepted socket into a session, bind.
 */
import type { Server, Socket } from 'node:net';
import type { ListenerConfig } from '../config/types.js';
import type { FrontendEnv } from './env.js';
import type { FrontendContext, Listener } from './types.js';
import { listenOn } from './listen.js';
import { SessionListener } from './listener-base.js';
import { ClientDeadlines } from './client-deadlines.js';
import { guardConnections } from './overflow.js';
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
  const deadlines = new ClientDeadlines(cfg);
  const env: FrontendEnv = { cfg, ctx, listener, override: compileOverride(cfg.params), scripts: new ScriptGate(undefined), deadlines };
  server.on('connection', (socket: Socket) => {
    makeSession(env, socket);
  });
  await bindListener(listener, ctx);
  return listener;
}

/**
 * Puts the one admission path (allowed_clients, then max_conns and open files:
 * overflow.ts) in front of the connection listeners added so far, binds, then rebinds
 * the logger to the real address (port 0 → the port we got).
 */
export async function bindListener(listener: SessionListener, ctx: FrontendContext): Promise<void> {
  const cfg = listener.config;
  guardConnections(listener, ctx.fds);
  listener.address = await (ctx.listen ?? listenOn)(listener.server, cfg.address, { mode: cfg.mode, owner: cfg.owner?.id, group: cfg.group?.id, backlog: cfg.backlog });
  listener.log = ctx.logger.child({ listener: listener.address, protocol: cfg.protocol });
  listener.server.on('error', (err) => listener.log.error({ code: ErrorCodes.ACCEPT_FAILED, err }, 'listener error'));
  listener.log.info('listening');
}
