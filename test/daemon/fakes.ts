/**
 * A stand-in pool for daemon wiring tests: it answers every request itself and records
 * what the daemon asked of it, so start/stop order and the access log can be checked
 * exactly. Listeners in these tests are the real ones from src/frontend; the real pools
 * run in process.test.ts and test/cli/run.test.ts.
 */
import { Writable } from 'node:stream';
import type { PoolConfig } from '../../src/config/types.js';
import { createLogger, type Logger } from '../../src/log/log.js';
import type { PoolDeps } from '../../src/pool/index.js';
import type { Pool, PoolSnapshot } from '../../src/pool/types.js';
import type { Exchange } from '../../src/protocol/exchange.js';
import { parseCgiHead } from '../../src/protocol/cgi-response.js';

export type Event = string;

export class FakePool implements Pool {
  readonly name: string;
  readonly deps: PoolDeps;
  stopTimeout: number | undefined;
  dispatched = 0;

  constructor(
    cfg: PoolConfig,
    deps: PoolDeps,
    private readonly events: Event[],
  ) {
    this.name = cfg.name;
    this.deps = deps;
  }

  dispatch(ex: Exchange): void {
    this.dispatched++;
    ex.pool = this.name;
    ex.backend = 'fake';
    ex.workerPid = 4242;
    ex.respondHead(parseCgiHead(Buffer.from('Status: 201 Created\r\nContent-Type: text/plain\r\n\r\n')));
    ex.respondBody(Buffer.from(`hello from ${this.name}`));
    ex.respondEnd();
  }

  async start(): Promise<void> {
    this.events.push(`pool ${this.name} start`);
  }

  async stop(timeoutMs: number): Promise<void> {
    this.stopTimeout = timeoutMs;
    this.events.push(`pool ${this.name} stop`);
  }

  snapshot(): PoolSnapshot {
    throw new Error('not used');
  }
}

/** A logger whose JSON lines land in `lines`, parsed. */
export function captureLogger(level = 'info'): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString('utf8').split('\n')) if (l !== '') lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  return { logger: createLogger({ level, destination: sink }), lines };
}

/** Resolves once `pred` holds for some captured line (logs are written asynchronously). */
export async function waitForLine(lines: Array<Record<string, unknown>>, pred: (l: Record<string, unknown>) => boolean, timeoutMs = 5000): Promise<Record<string, unknown>> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const found = lines.find(pred);
    if (found) return found;
    if (Date.now() > until) throw new Error(`no such log line; got:\n${lines.map((l) => JSON.stringify(l)).join('\n')}`);
    await new Promise((r) => setImmediate(r));
  }
}
