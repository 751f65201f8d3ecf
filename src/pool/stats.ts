/**
 * The counters a pool bumps on the hot path (counters.ts defines them), as plain fields,
 * and the one gauge beside them (requests running now). The queue keeps its own two
 * (maxQueued, queueWait); the snapshot joins them.
 */
import { ErrorCodes, type ProxyError } from '../errors.js';
import type { PoolCounters, Summary } from './counters.js';

export class PoolStats implements Omit<PoolCounters, 'maxQueued' | 'queueWait'> {
  accepted = 0;
  completed = 0;
  aborted = 0;
  active = 0;
  maxActive = 0;
  rejected: PoolCounters['rejected'] = { queueFull: 0, queueTimeout: 0, failing: 0, shuttingDown: 0 };
  errors: PoolCounters['errors'] = { unreachable: 0, timeout: 0, crashed: 0, other: 0 };
  maxChildrenReached = 0;
  crashes = 0;
  recycles: Record<string, number> = {};
  slowRequests = 0;
  /** Spawn-to-ready times of workers, once one was ready. */
  spawnLatency: Summary | undefined = undefined;

  started(): void {
    if (++this.active > this.maxActive) this.maxActive = this.active;
  }

  /** Counts an error the pool answered a request with (not a queue rejection). */
  error(err: ProxyError): void {
    switch (err.code) {
      case ErrorCodes.BACKEND_UNREACHABLE:
      case ErrorCodes.ALL_BACKENDS_DOWN:
        this.errors.unreachable++;
        break;
      case ErrorCodes.BACKEND_TIMEOUT:
      case ErrorCodes.REQUEST_TIMEOUT:
        this.errors.timeout++;
        break;
      case ErrorCodes.WORKER_CRASHED:
        this.errors.crashed++;
        break;
      default:
        this.errors.other++;
    }
  }

  spawned(ms: number): void {
    const s = (this.spawnLatency ??= { count: 0, totalMs: 0, maxMs: 0 });
    s.count++;
    s.totalMs += ms;
    if (ms > s.maxMs) s.maxMs = ms;
  }

  recycled(reason: string): void {
    this.recycles[reason] = (this.recycles[reason] ?? 0) + 1;
  }
}
