/**
 * The largest value recorded within the last `spanMs` (a monotonic deque: each record
 * drops the older values it outranks, so a read is O(1) and a record amortised O(1)).
 * Times are the caller's clock.
 */
export class WindowMax {
  private readonly spanMs: number;
  private readonly times: number[] = [];
  private readonly values: number[] = [];
  private head = 0;
  /** When the first value was recorded (the window covers the whole span only after spanMs). */
  private since: number | undefined;

  constructor(spanMs: number) {
    this.spanMs = spanMs;
  }

  record(now: number, value: number): void {
    this.since ??= now;
    while (this.values.length > this.head && this.values[this.values.length - 1]! <= value) {
      this.values.pop();
      this.times.pop();
    }
    this.values.push(value);
    this.times.push(now);
    this.expire(now);
  }

  /** The largest value within the span ending at `now` (0 when none). */
  max(now: number): number {
    this.expire(now);
    return this.head < this.values.length ? this.values[this.head]! : 0;
  }

  /** Values were recorded for at least the whole span. */
  covers(now: number): boolean {
    return this.since !== undefined && now - this.since >= this.spanMs;
  }

  /** Forget everything (the window starts again at the next record). */
  reset(): void {
    this.times.length = 0;
    this.values.length = 0;
    this.head = 0;
    this.since = undefined;
  }

  private expire(now: number): void {
    const cutoff = now - this.spanMs;
    while (this.head < this.times.length && this.times[this.head]! < cutoff) this.head++;
    if (this.head > 64 && this.head * 2 > this.times.length) {
      this.times.splice(0, this.head);
      this.values.splice(0, this.head);
      this.head = 0;
    }
  }
}
