/**
 * The SCGI listener: a net.Server whose every connection is one ScgiSession.
 */
import { createServer } from 'node:net';
import type { ListenerConfig } from '../config/types.js';
import type { FrontendContext, Listener } from './types.js';
import { scgiLimits } from '../protocol/scgi.js';
import { ScgiSession } from './scgi-session.js';
import { startSessionListener } from './stream-listener.js';

export function startScgiListener(cfg: ListenerConfig, ctx: FrontendContext): Promise<Listener> {
  const server = createServer({ noDelay: true, allowHalfOpen: false });
  const limits = scgiLimits(ctx.limits);
  return startSessionListener(cfg, ctx, server, (env, socket) => new ScgiSession(env, socket, limits));
}
