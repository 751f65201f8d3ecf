/**
 * request_timeout and slow_request for a spawned pool's running requests: two
 * DeadlineLists (all requests share each timeout, so the oldest expires first), one
 * timer each, O(1) start and stop per request. The holder keeps its nodes and reuses
 * them for every request (a worker runs one at a time).
 */
import type { Clock } from '../../util/clock.js';
import { DeadlineList, DeadlineNode } from '../../util/deadline-list.js';

export class RequestNodes<T> {
  readonly timeout: DeadlineNode<T>;
  readonly slow: DeadlineNode<T>;
  constructor(holder: T) {
    this.timeout = new DeadlineNode(holder);
    this.slow = new DeadlineNode(holder);
  }
}

export class RequestTimer<T> {
  private readonly timeout: DeadlineList<T> | undefined;
  private readonly slow: DeadlineList<T> | undefined;

  /** A duration of 0 turns that check off. */
  constructor(clock: Clock, timeoutMs: number, slowMs: number, onTimeout: (holder: T) => void, onSlow: (holder: T) => void) {
    this.timeout = timeoutMs > 0 ? new DeadlineList(clock, timeoutMs, onTimeout) : undefined;
    this.slow = slowMs > 0 ? new DeadlineList(clock, slowMs, onSlow) : undefined;
  }

  start(n: RequestNodes<T>): void {
    this.timeout?.push(n.timeout);
    this.slow?.push(n.slow);
  }

  stop(n: RequestNodes<T>): void {
    this.timeout?.remove(n.timeout);
    this.slow?.remove(n.slow);
  }

  dispose(): void {
    this.timeout?.dispose();
    this.slow?.dispose();
  }
}
