/**
 * A set of objects kept as a dense array, for the sets the request path adds to and
 * deletes from on every request (requests in flight, busy backend connections, a
 * listener's sessions).
 *
 * Why not a Set: a Map or Set that has lived long enough to be in V8's old generation
 * allocates its new hash table in the old generation too whenever an insert follows
 * deletes, so a set and a delete per request fill the old generation with dead tables and
 * run a Mark-Compact every ~60,000 of them (docs/BENCHMARKS.md, "Sets without churn").
 * An array's push and pop reuse its store.
 *
 * Each member keeps its own index in a numeric field the set is told the name of
 * (declared by the member's class, -1 when in no set), so delete is O(1): the last member
 * moves into the hole. Order is not kept. A member is in at most one set per field name.
 */
export type SlotField<K extends string> = { [P in K]: number };

export class DenseSet<T extends SlotField<K>, K extends string> {
  private readonly items: T[] = [];

  constructor(private readonly field: K) {}

  get size(): number {
    return this.items.length;
  }

  has(x: T): boolean {
    const i = x[this.field];
    return i >= 0 && this.items[i] === x;
  }

  add(x: T): void {
    if (this.has(x)) return;
    (x as SlotField<K>)[this.field] = this.items.length;
    this.items.push(x);
  }

  /** False when `x` was not in the set. */
  delete(x: T): boolean {
    if (!this.has(x)) return false;
    const items = this.items;
    const i = x[this.field];
    const last = items.pop()!;
    if (last !== x) {
      items[i] = last;
      (last as SlotField<K>)[this.field] = i;
    }
    (x as SlotField<K>)[this.field] = -1;
    return true;
  }

  /** The members now, as a copy: safe to delete from the set while walking it. */
  snapshot(): T[] {
    return this.items.slice();
  }

  /** Walks the members in place; the callback must not add or delete. */
  forEach(fn: (x: T) => void): void {
    const items = this.items;
    for (let i = 0; i < items.length; i++) fn(items[i]!);
  }

  clear(): void {
    for (const x of this.items) (x as SlotField<K>)[this.field] = -1;
    this.items.length = 0;
  }
}
