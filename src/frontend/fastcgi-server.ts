/**
 * The FastCGI listener: a net.Server whose every connection becomes an FcgiSession.
 */
import { createServer } from 'node:net';
import type { ListenerConfig } from '../config/types.js';
import type { FrontendContext, Listener } from './types.js';
import { FcgiSession } from './fastcgi-session.js';
import { startSessionListener } from './stream-listener.js';

export function startFastcgiListener(cfg: ListenerConfig, ctx: FrontendContext): Promise<Listener> {
  // Half-open FastCGI connections are not a thing clients do; a FIN means "gone".
  const server = createServer({ noDelay: true, allowHalfOpen: false });
  return startSessionListener(cfg, ctx, server, (env, socket) => new FcgiSession(env, socket));
}
