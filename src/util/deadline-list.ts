/**
 * An intrusive FIFO whose entries all expire the same time after they were added, so
 * the head always expires first and one timer (armed for the head) serves the whole
 * list. Used for the request queue, request timeouts and slow-request warnings, and
 * (insertAt, idle-watch.ts) for the sockets' inactivity timeouts.
 * Add, remove and shift are O(1); nodes may be reused (a worker keeps one node).
 */
import { OneTimer, type Clock } from './clock.js';

export class DeadlineNode<T> {
  readonly item: T;
  /** Monotonic ms at which the entry expires. */
  deadline = 0;
  /** Monotonic ms at which it was added. */
  addedAt = 0;
  /** Its deadline was put later by the list's `extend` (it may expire after entries behind it). */
  extended = false;
  prev: DeadlineNode<T> | null = null;
  next: DeadlineNode<T> | null = null;
  list: DeadlineList<T> | null = null;

  constructor(item: T) {
    this.item = item;
  }
}

/** Asked before `node` expires; `ahead`: entries before it, every one kept by an extension. */
export type Extend<T> = (item: T, node: DeadlineNode<T>, ahead: number) => number | undefined;

export class DeadlineList<T> {
  private head: DeadlineNode<T> | null = null;
  private tail: DeadlineNode<T> | null = null;
  private count = 0;
  private readonly clock: Clock;
  private readonly timer: OneTimer;
  /** 0 = entries never expire. */
  readonly timeoutMs: number;
  private readonly onExpire: (item: T, node: DeadlineNode<T>) => void;
  private readonly extend: Extend<T> | undefined;

  /**
   * `extend`, when given, is asked before an entry expires: a later deadline keeps it where
   * it is (out of order: the entries behind it still expire on time), undefined lets it go.
   */
  constructor(clock: Clock, timeoutMs: number, onExpire: (item: T, node: DeadlineNode<T>) => void, extend?: Extend<T>) {
    this.clock = clock;
    this.timeoutMs = timeoutMs;
    this.onExpire = onExpire;
    this.extend = extend;
    this.timer = new OneTimer(clock, () => this.expire());
  }

  get length(): number {
    return this.count;
  }

  get first(): DeadlineNode<T> | null {
    return this.head;
  }

  get last(): DeadlineNode<T> | null {
    return this.tail;
  }

  /** Appends; the entry expires timeoutMs from now. */
  push(node: DeadlineNode<T>): void {
    if (node.list) node.list.remove(node);
    const now = this.clock.now();
    node.addedAt = now;
    node.extended = false;
    node.deadline = this.timeoutMs > 0 ? now + this.timeoutMs : Infinity;
    node.list = this;
    node.next = null;
    node.prev = this.tail;
    if (this.tail) this.tail.next = node;
    else this.head = node;
    this.tail = node;
    this.count++;
    if (this.count === 1 && this.timeoutMs > 0) this.timer.armAt(node.deadline);
  }

  /**
   * Puts an entry back at the head (a request whose backend failed before it was
   * reached). Its deadline is capped at the current head's so the order stays sorted.
   */
  unshift(node: DeadlineNode<T>): void {
    if (node.list) node.list.remove(node);
    const now = this.clock.now();
    node.addedAt = now;
    node.extended = false;
    let deadline = this.timeoutMs > 0 ? now + this.timeoutMs : Infinity;
    if (this.head && this.head.deadline < deadline) deadline = this.head.deadline;
    node.deadline = deadline;
    node.list = this;
    node.prev = null;
    node.next = this.head;
    if (this.head) this.head.prev = node;
    else this.tail = node;
    this.head = node;
    this.count++;
    if (this.timeoutMs > 0) this.timer.armAt(deadline);
  }

  /**
   * Inserts with its own deadline, in order: searched from the tail, so a deadline no
   * later than the newest entries' (a recent time plus timeoutMs) passes few of them.
   */
  insertAt(node: DeadlineNode<T>, deadline: number): void {
    if (node.list) node.list.remove(node);
    node.addedAt = this.clock.now();
    node.extended = false;
    node.deadline = deadline;
    node.list = this;
    let before = this.tail;
    while (before !== null && before.deadline > deadline) before = before.prev;
    node.prev = before;
    node.next = before === null ? this.head : before.next;
    if (node.next) node.next.prev = node;
    else this.tail = node;
    if (before) before.next = node;
    else this.head = node;
    this.count++;
    if (this.head === node && deadline !== Infinity) this.timer.armAt(deadline);
  }

  remove(node: DeadlineNode<T>): void {
    if (node.list !== this) return;
    if (node.prev) node.prev.next = node.next;
    else this.head = node.next;
    if (node.next) node.next.prev = node.prev;
    else this.tail = node.prev;
    node.prev = node.next = null;
    node.list = null;
    this.count--;
    // The timer stays armed: when it fires early it finds nothing due and re-arms.
  }

  shift(): DeadlineNode<T> | null {
    const n = this.head;
    if (n) this.remove(n);
    return n;
  }

  /** Removes every entry, oldest first, and stops the timer. */
  clear(): T[] {
    const out: T[] = [];
    for (let n = this.shift(); n; n = this.shift()) out.push(n.item);
    this.timer.cancel();
    return out;
  }

  dispose(): void {
    this.timer.cancel();
  }

  private expire(): void {
    const now = this.clock.now();
    let n = this.head;
    // Extended entries are a prefix (each was the head, or behind extended ones, when it
    // was due): skipped, and the timer armed for the earliest of them and the first other.
    let ahead = 0;
    let next = Infinity;
    while (n) {
      if (n.deadline <= now) {
        const later = this.extend?.(n.item, n, ahead);
        if (later !== undefined && later > now) {
          n.deadline = later;
          n.extended = true;
        } else {
          this.remove(n);
          this.onExpire(n.item, n);
          // The callback may have changed the list: from the head again.
          n = this.head;
          ahead = 0;
          next = Infinity;
          continue;
        }
      }
      if (n.deadline < next) next = n.deadline;
      if (!n.extended) break;
      ahead++;
      n = n.next;
    }
    if (next !== Infinity) this.timer.armAt(next);
  }
}
