/**
 * Open descriptors against RLIMIT_NOFILE, shared by every listener: a front-end
 * connection is not taken into the last `reserve` descriptors, which stay for workers,
 * backend connections, log files and the control socket. Past the limit the kernel
 * would refuse accept() and libuv resets the connection instead.
 *
 * Counting /proc/self/fd costs a directory read, so it is done only when the estimate
 * (last count plus connections opened since, minus those closed) comes near the limit,
 * and then at most every RECOUNT_MS.
 */
import { readdirSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

const RECOUNT_MS = 100;
/** Far below the limit the estimate is trusted this long (backend sockets are not counted in it). */
const RECOUNT_FAR_MS = 1000;

export type FdRoom = 'ok' | 'overflow' | 'exhausted';

export class FdGuard {
  readonly limit: number;
  readonly reserve: number;
  private counted = 0;
  private countedAt = -Infinity;
  private delta = 0;
  private readonly count: () => number;

  constructor(limit: number, count: () => number = countOpenFds) {
    this.limit = limit;
    // 1/16 of the limit, at least 32 and at most 1024: room for a pool's workers and its
    // backend connections at any size.
    this.reserve = Math.max(32, Math.min(1024, Math.floor(limit / 16)));
    this.count = count;
  }

  opened(): void {
    this.delta++;
  }

  closed(): void {
    this.delta--;
  }

  /**
   * ok: take the connection. overflow: answer it "overloaded" (its descriptor is already
   * open; the answer needs no more). exhausted: within half the reserve, close it at once.
   */
  room(): FdRoom {
    const now = performance.now();
    const near = this.counted + this.delta >= this.limit - 2 * this.reserve;
    if (now - this.countedAt >= (near ? RECOUNT_MS : RECOUNT_FAR_MS)) {
      this.counted = this.count();
      this.countedAt = now;
      this.delta = 0;
    }
    const inUse = this.counted + this.delta;
    if (inUse < this.limit - this.reserve) return 'ok';
    return inUse < this.limit - this.reserve / 2 ? 'overflow' : 'exhausted';
  }
}

/** Descriptors open in this process (Linux); 0 where /proc is missing (the guard then never acts). */
export function countOpenFds(): number {
  try {
    return readdirSync('/proc/self/fd').length;
  } catch {
    return 0;
  }
}
