/**
 * A fixed-capacity ring of samples: pushing past capacity drops the oldest, so the
 * dashboard's history costs the same after a month as after fifteen minutes.
 */
export class SampleRing<T> {
  private readonly items: T[] = [];
  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`ring capacity must be a whole number ≥ 1, got ${capacity}`);
  }

  push(item: T): void {
    this.items.push(item);
    if (this.items.length > this.capacity) this.items.splice(0, this.items.length - this.capacity);
  }

  get length(): number {
    return this.items.length;
  }

  /** Oldest first. */
  toArray(): T[] {
    return [...this.items];
  }

  last(): T | undefined {
    return this.items[this.items.length - 1];
  }
}
