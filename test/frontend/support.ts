/**
 * Front-end test support: a listener on a fake pool with its log lines captured, so a
 * test can assert on both the wire and the warnings an operator would see.
 */
import type { Logger } from '../../src/log/log.js';
import { lineLogger } from '../helpers/log.js';
import { join } from 'node:path';
import type { ListenerConfig, FrontProtocol } from '../../src/config/types.js';
import { parseAddress } from '../../src/protocol/address.js';
import type { ParamsLimits } from '../../src/protocol/params.js';
import type { Exchange } from '../../src/protocol/exchange.js';
import { DEFAULT_PARAMS_LIMITS } from '../../src/protocol/params.js';
import { startListener, type Listener } from '../../src/frontend/index.js';
import type { FdGuard } from '../../src/frontend/fd-guard.js';
import { FakePool } from '../helpers/fake-pool.js';
import type { Scope } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';
import { targetOf, waitFor, type ConnectTarget } from '../helpers/wait.js';

export interface LogLine {
  level: number;
  msg: string;
  [k: string]: unknown;
}

export const WARN = 40;
export const DEBUG = 20;

export function captureLogger(): { logger: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const logger = lineLogger('debug', (s) => void lines.push(JSON.parse(s) as LogLine));
  return { logger, lines };
}

export function listenerConfig(protocol: FrontProtocol, address: string, extra: Partial<ListenerConfig> = {}): ListenerConfig {
  const a = parseAddress(address);
  if (typeof a === 'string') throw new Error(a);
  return {
    protocol,
    address: a,
    pool: 'test',
    mode: undefined,
    documentRoot: undefined,
    index: 'index.php',
    bodyBufferSize: 64 * 1024,
    maxBodySize: 100 * 1024 * 1024,
    idleTimeout: 300,
    headerTimeout: 60_000,
    bodyTimeout: 60_000,
    maxConns: 100,
    params: {},
    ...extra,
  };
}

export interface Rig {
  listener: Listener;
  pool: FakePool;
  lines: LogLine[];
  target: ConnectTarget;
  /** Resolves with the first log line at `level` or above matching pred. */
  logged(pred: (l: LogLine) => boolean, level?: number): Promise<LogLine>;
}

export type Transport = 'tcp' | 'unix';

/** Address for a fresh listener on `transport` (a Unix socket in a fresh 0700 temp dir). */
export function addressFor(scope: Scope, transport: Transport): string {
  return transport === 'tcp' ? '127.0.0.1:0' : `unix:${join(makeTempDir(scope, 'fpm-fe-'), 'l.sock')}`;
}

export async function startRig(
  scope: Scope,
  protocol: FrontProtocol,
  address: string,
  opts: { cfg?: Partial<ListenerConfig>; limits?: ParamsLimits; pool?: FakePool; poolName?: string; fds?: FdGuard } = {},
): Promise<Rig> {
  const pool = opts.pool ?? new FakePool();
  const { logger, lines } = captureLogger();
  const listener = await startListener(listenerConfig(protocol, address, opts.cfg), {
    getPool: (name) => (name === (opts.poolName ?? 'test') ? pool : undefined),
    limits: opts.limits ?? DEFAULT_PARAMS_LIMITS,
    logger,
    onExchange: () => {},
    fds: opts.fds,
  });
  scope.after(() => listener.close(1000));
  const logged = (pred: (l: LogLine) => boolean, level = WARN): Promise<LogLine> =>
    waitFor(() => lines.find((l) => l.level >= level && pred(l)), { timeout: 5000, what: 'a log line' });
  return { listener, pool, lines, target: targetOf(listener.address), logged };
}

/** Request body bytes an exchange holds that no consumer took yet (white-box: proves the front end paused). */
export function pendingBody(ex: Exchange): number {
  return (ex as unknown as { pendingBytes: number }).pendingBytes;
}

/**
 * Watches what a front end pushes into `ex` while the exchange has asked it to pause
 * (white-box, like pendingBody): a listener that honours the pause pushes at most the rest
 * of the read it was decoding, one per pause; one that keeps reading pushes on.
 */
export function watchBodyPauses(ex: Exchange): { pauses: number; bytesWhilePaused: number; maxWhilePaused: number } {
  const seen = { pauses: 0, bytesWhilePaused: 0, maxWhilePaused: 0 };
  const paused = (): boolean => (ex as unknown as { frontendPaused: boolean }).frontendPaused;
  const push = ex.pushBody.bind(ex);
  let episode = 0;
  ex.pushBody = (chunk: Buffer): boolean => {
    if (paused()) {
      episode += chunk.length;
      seen.bytesWhilePaused += chunk.length;
      seen.maxWhilePaused = Math.max(seen.maxWhilePaused, episode);
    }
    const wasPaused = paused();
    const more = push(chunk);
    if (!more && !wasPaused) {
      seen.pauses++;
      episode = 0;
    }
    return more;
  };
  return seen;
}

/** True once the exchange has asked its front end to stop sending body bytes (white-box). */
export function frontendPaused(ex: Exchange): boolean {
  return (ex as unknown as { frontendPaused: boolean }).frontendPaused;
}
