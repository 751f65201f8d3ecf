/**
 * Cleanup that runs even when a test fails. Helpers take a `Scope`: a node:test
 * TestContext (t.after) or a `Cleanup` a suite closes in its after() hook.
 *
 * Every process a helper starts is also registered here; if the test process exits
 * without cleaning up (a crash, an uncaught error), the exit hook SIGKILLs whatever is
 * left, by pid, so no nginx/php-cgi/daemon outlives its test file.
 */
export interface Scope {
  after(fn: () => unknown): void;
}

export class Cleanup implements Scope {
  private readonly fns: Array<() => unknown> = [];

  after(fn: () => unknown): void {
    this.fns.push(fn);
  }

  /** Runs cleanups last-registered first; errors are collected, not thrown early. */
  async run(): Promise<void> {
    const errors: unknown[] = [];
    while (this.fns.length > 0) {
      const fn = this.fns.pop()!;
      try {
        await fn();
      } catch (err) {
        errors.push(err);
      }
    }
    if (errors.length > 0) throw errors[0];
  }
}

const livePids = new Map<number, NodeJS.Signals>();

/** `signal`: what the exit hook sends (nginx wants SIGTERM so its master stops its workers). */
export function trackPid(pid: number, signal: NodeJS.Signals = 'SIGKILL'): void {
  livePids.set(pid, signal);
}

export function untrackPid(pid: number): void {
  livePids.delete(pid);
}

process.on('exit', () => {
  for (const [pid, signal] of livePids) {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
});
