/**
 * One request every 20 ms beside a load generator, each timed from its start: where the
 * slow requests of a reload or an upgrade wait (bench/reload-under-load.ts,
 * bench/upgrade-under-load.ts put each in the phase it started in).
 */
import { setTimeout as sleep } from 'node:timers/promises';

export interface ProbeSample {
  /** Wall-clock start, ms (to match the daemon's log times). */
  at: number;
  ms: number;
}

/** Starts probing `url` into `into`; the returned function stops it once the request under way ended. */
export function startProbe(url: string, into: ProbeSample[]): () => Promise<void> {
  let probing = true;
  const loop = (async () => {
    while (probing) {
      const at = Date.now();
      const t0 = performance.now();
      try {
        await (await fetch(url)).arrayBuffer();
      } catch {
        // counted by the load generator's errors
      }
      into.push({ at, ms: performance.now() - t0 });
      await sleep(20);
    }
  })();
  return () => {
    probing = false;
    return loop;
  };
}
