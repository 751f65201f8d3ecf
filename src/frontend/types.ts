/**
 * What the front ends and the daemon share: the context a listener is started with
 * (FrontendContext: pools, limits, logger, the site routing of a vhosts listener) and
 * the Listener it returns. The files of src/frontend import these from here, below the
 * listeners index.ts starts.
 */
import type { Logger } from '../log/log.js';
import type { ListenerConfig, RewriteRule } from '../config/types.js';
import type { Exchange } from '../protocol/exchange.js';
import type { CgiParams, ParamsLimits } from '../protocol/params.js';
import type { Pool } from '../pool/types.js';
import type { FdGuard } from './fd-guard.js';
import type { BindSocket } from './listen.js';

export interface FrontendContext {
  /** Looked up per request, so a reload can swap pools under a running listener. */
  getPool(name: string): Pool | undefined;
  limits: ParamsLimits;
  logger: Logger;
  /** Called for every new exchange before dispatch (the daemon sets ex.onFinish for the access log). */
  onExchange(ex: Exchange): void;
  /**
   * Answers a listener's status_path / ping_path requests itself (src/control); true when
   * it took the exchange. Consulted only for listeners that set one of those paths.
   */
  localResponder?: { respond(cfg: ListenerConfig, ex: Exchange): boolean } | undefined;
  /** Private directory (0700) for request-body temp files; undefined: the OS temp dir. */
  tempDir?: () => string | undefined;
  /** Open descriptors against RLIMIT_NOFILE, shared by all listeners; none = max_conns alone. */
  fds?: FdGuard | undefined;
  /** Listeners with `vhosts`: the site a request's host names and its pool (created on first use); undefined = no site. */
  route?: ((params: CgiParams) => RoutedSite | undefined) | undefined;
  /** The HTTP listener: the site a Host names (or default_site), before a request is built. */
  site?: ((host: string) => SiteView | undefined) | undefined;
  /** Binds a listener's socket (the daemon's socket owner: adopted or bound); default listenOn. */
  listen?: BindSocket | undefined;
}

export interface SiteView {
  readonly id: string;
  /** SCRIPT_FILENAME and DOCUMENT_ROOT are set under it. */
  readonly documentRoot: string;
  /** Tried before the listener's rules (src/frontend/rewrite.ts). */
  readonly rewrite: readonly RewriteRule[];
}

export interface RoutedSite {
  pool: Pool;
  site: SiteView;
}

export interface Listener {
  readonly config: ListenerConfig;
  /** Where it listens, as text (the bound port when the config said port 0). */
  readonly address: string;
  /** Open front-end connections. */
  readonly connections: number;
  /** Front-end connections taken since it started. */
  readonly accepted: number;
  /** Connections refused by allowed_clients since it started. */
  readonly refused: number;
  /** Connections answered "overloaded" and closed at accept (max_conns, the open-files reserve) since it started. */
  readonly overflowed: number;
  /** Stops accepting; resolves once open connections have finished their requests or timeoutMs passed (then they are closed). */
  close(timeoutMs: number): Promise<void>;
}
