/** What a listener hands each of its sessions; built once per listener. */
import type { ListenerConfig } from '../config/types.js';
import type { ClientDeadlines } from './client-deadlines.js';
import type { FrontendContext } from './types.js';
import type { SessionListener } from './listener-base.js';
import type { ParamsOverride } from './params-override.js';
import type { ScriptGate } from './script-gate.js';

export interface FrontendEnv {
  readonly cfg: ListenerConfig;
  readonly ctx: FrontendContext;
  readonly listener: SessionListener;
  readonly override: ParamsOverride;
  /** Checks SCRIPT_FILENAME for pools with script rules (limit_extensions, script_roots). */
  readonly scripts: ScriptGate;
  /** header_timeout and body_timeout (FastCGI and SCGI listeners; HTTP has node's headersTimeout and its socket timer). */
  readonly deadlines?: ClientDeadlines | undefined;
}
