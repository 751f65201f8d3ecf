/** The live progress line on a terminal: rewritten in place once a second, erased at the end. */
import type { BenchProgress } from './runner.js';

export class ProgressLine {
  private readonly out: NodeJS.WriteStream;
  private lastReplies = 0;
  private lastMs = 0;
  private shown = false;

  constructor(out: NodeJS.WriteStream) {
    this.out = out;
  }

  update(p: BenchProgress): void {
    const dt = p.elapsedMs - this.lastMs;
    const rate = dt > 0 ? ((p.replies - this.lastReplies) * 1000) / dt : 0;
    this.lastMs = p.elapsedMs;
    this.lastReplies = p.replies;
    const line = `${(p.elapsedMs / 1000).toFixed(1)} s  ${p.replies} replies  ${p.errors} errors  ${p.inFlight} in flight  ${rate.toFixed(0)} req/s`;
    this.out.write(`\r\x1b[K${line}`);
    this.shown = true;
  }

  clear(): void {
    if (this.shown) this.out.write('\r\x1b[K');
    this.shown = false;
  }
}
