/**
 * What the daemon sees of the front ends. STUB signatures; the frontend owner implements.
 */
import type { Logger } from '../log/log.js';
import type { ListenerConfig } from '../config/types.js';
import type { Exchange } from '../protocol/exchange.js';
import type { ParamsLimits } from '../protocol/params.js';
import type { Pool } from '../pool/types.js';

export interface FrontendContext {
  /** Looked up per request, so a reload can swap pools under a running listener. */
  getPool(name: string): Pool | undefined;
  limits: ParamsLimits;
  logger: Logger;
  /** Called for every new exchange before dispatch (the daemon sets ex.onFinish for the access log). */
  onExchange(ex: Exchange): void;
}

export interface Listener {
  readonly config: ListenerConfig;
  /** Where it listens, as text (the bound port when the config said port 0). */
  readonly address: string;
  /** Open front-end connections. */
  readonly connections: number;
  /** Stops accepting; resolves once open connections have finished their requests or timeoutMs passed (then they are closed). */
  close(timeoutMs: number): Promise<void>;
}

export declare function startListener(cfg: ListenerConfig, ctx: FrontendContext): Promise<Listener>;
