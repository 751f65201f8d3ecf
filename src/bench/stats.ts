/** Counters and latency histograms of one bench run. */
import { emptyErrorCounts, type ErrorCounts } from './error-kinds.js';
import { Histogram } from './histogram.js';

export class BenchStats {
  /** Requests the run started (sent, or dropped under --rate). */
  issued = 0;
  /** Replies read to the end, whatever their status. */
  replies = 0;
  /** Index 1..5: 1xx..5xx replies. */
  readonly statusClasses = [0, 0, 0, 0, 0, 0];
  readonly statusCodes = new Map<number, number>();
  readonly errors: ErrorCounts = emptyErrorCounts();
  /** Connections opened. */
  connections = 0;
  bytesIn = 0;
  bytesOut = 0;
  /** Reply body bytes (after the head). */
  bodyBytes = 0;
  /** Connect time of each new connection. */
  readonly connect = new Histogram();
  /** From sending a request to the first reply byte. */
  readonly firstByte = new Histogram();
  /** From sending a request to the last reply byte (a new connection's connect included). */
  readonly reply = new Histogram();
  /** Replies in each second of the run, from its start: where throughput stalled. */
  readonly repliesBySecond: number[] = [];

  countSecond(second: number): void {
    while (this.repliesBySecond.length <= second) this.repliesBySecond.push(0);
    this.repliesBySecond[second]!++;
  }

  countStatus(status: number): void {
    const cls = Math.floor(status / 100);
    if (cls >= 1 && cls <= 5) this.statusClasses[cls]!++;
    this.statusCodes.set(status, (this.statusCodes.get(status) ?? 0) + 1);
  }

  get errorCount(): number {
    let n = 0;
    for (const v of Object.values(this.errors)) n += v;
    return n;
  }
}
