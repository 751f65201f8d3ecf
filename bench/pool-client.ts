/**
 * The in-process client the process benches drive pools with (bench/process-model.ts,
 * bench/cold-start.ts): a sink that keeps the status and the start of the body, and a
 * complete PoolConfig from a few settings, so every variant pays the same client cost.
 */
import type { PoolConfig } from '../src/config/types.js';
import type { ProxyError } from '../src/errors.js';
import type { ResponseSink } from '../src/protocol/exchange.js';

export class Sink implements ResponseSink {
  status = 0;
  /** The first 4 KiB of the body, for messages. */
  text = '';
  readonly done: Promise<void>;
  private resolve!: () => void;
  constructor() {
    this.done = new Promise((r) => (this.resolve = r));
  }
  head(h: { status: number }): void {
    this.status = h.status;
  }
  body(chunk: Buffer): boolean {
    if (this.text.length < 4096) this.text += chunk.toString('latin1');
    return true;
  }
  stderr(): void {}
  end(): void {
    this.resolve();
  }
  fail(err: ProxyError): number {
    this.status = err.status;
    this.resolve();
    return 0;
  }
}

/** The schema's defaults for the keys a bench does not set (ondemand, 4 children, long timeouts). */
export function benchPoolConfig(over: Partial<PoolConfig>): PoolConfig {
  return {
    name: 'bench', backend: 'fastcgi', backends: [], maxConnsPerBackend: 16, backendDownTime: 5000, connectTimeout: 5000, readTimeout: 60_000, keepAlive: true,
    command: undefined, socket: 'fd0', env: {}, inheritEnv: [], cwd: undefined, user: undefined, group: undefined,
    pm: 'ondemand', maxChildren: 4, startChildren: 0, minSpare: 1, maxSpare: 3, maxSpawnRate: 32, spawnTimeout: 30_000, idleTimeout: 600_000,
    maxRequests: 0, maxRequestsJitter: 0, maxLifetime: 0, requestTimeout: 0, slowRequest: 0, killTimeout: 2000, crashLimit: 5, crashWindow: 60_000,
    queueLimit: 1024, queueTimeout: 30_000, ...over,
  } as PoolConfig;
}
