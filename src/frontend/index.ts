/**
 * What the daemon sees of the front ends: startListener() binds one configured listener
 * (FastCGI, SCGI or HTTP on TCP or a Unix socket) and serves it until close().
 */
import type { ListenerConfig } from '../config/types.js';
import { startFastcgiListener } from './fastcgi-server.js';
import { startHttpListener } from './http-server.js';
import { startScgiListener } from './scgi-server.js';
import type { FrontendContext, Listener } from './types.js';

export { ListenError } from './listen.js';
export type { FrontendContext, Listener, RoutedSite, SiteView } from './types.js';

/** Binds and starts serving; rejects with ListenError (code ERR_LISTEN_FAILED) when it cannot bind. */
export function startListener(cfg: ListenerConfig, ctx: FrontendContext): Promise<Listener> {
  switch (cfg.protocol) {
    case 'fastcgi':
      return startFastcgiListener(cfg, ctx);
    case 'scgi':
      return startScgiListener(cfg, ctx);
    case 'http':
      return startHttpListener(cfg, ctx);
  }
}
