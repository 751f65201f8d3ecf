/**
 * Start-up lines: one per listener and one per pool, so the first screen of the log
 * says what this daemon serves and how.
 */
import type { ListenerConfig, PoolConfig } from '../config/types.js';
import type { Logger } from './log.js';

/** `bound` is where it really listens (the port chosen when the config said 0). */
export function logListener(logger: Logger, l: ListenerConfig, bound?: string): void {
  const address = bound ?? l.address.text;
  logger.info(
    { kind: 'listener', protocol: l.protocol, address, pool: l.pool, ...(l.documentRoot ? { document_root: l.documentRoot } : {}) },
    `listening for ${l.protocol} on ${address} → pool ${l.pool}`,
  );
}

export function logPool(logger: Logger, p: PoolConfig): void {
  if (p.command === undefined) {
    const backends = p.backends.map((b) => b.text);
    logger.info(
      { kind: 'pool', pool: p.name, type: 'external', backend: p.backend, backends },
      `pool ${p.name}: ${p.backend} backends ${backends.join(', ')}`,
    );
    return;
  }
  logger.info(
    { kind: 'pool', pool: p.name, type: 'spawned', backend: p.backend, command: p.command, pm: p.pm, max_children: p.maxChildren },
    `pool ${p.name}: spawns ${p.command.join(' ')} (${p.backend}, pm ${p.pm}, max_children ${p.maxChildren})`,
  );
}
