/**
 * Pool-size tuning: for each pool size (1, 2, 4, ... workers) start the pool, sweep the
 * concurrency, measure throughput, latency and memory per worker under load, then
 * recommend the smallest size at the knee of the throughput curve that fits a memory
 * budget. How the pool is started is injected (the CLI runs `fcgi-pm run` with a
 * generated config); the recommendation is a pure function of the measurements.
 */
import { buildReport } from './report.js';
import { runBench, type BenchOptions } from './runner.js';
import { pollUntil } from './daemon-child.js';
import { childPids, rss, treeMemory } from './proc-info.js';
import { median, needsAnotherRun, recommend, relativeSpread, type Recommendation, type RepeatRule, type TuneSize, type TuneStep } from './tune-plan.js';

export { doublingSizes, recommend, type Recommendation, type RepeatRule, type TuneSize, type TuneStep } from './tune-plan.js';

export interface PoolUnderTest {
  /** The daemon's pid; its direct children are the workers. */
  pid: number;
  stop(): Promise<void>;
}

export interface TuneOptions {
  sizes: number[];
  /** Concurrency levels to run at a pool size. */
  concurrencyFor(size: number): number[];
  stepMs: number;
  /** How often each step runs: until its spread is known (default 3 to 8 runs, 10 %). */
  repeat?: RepeatRule;
  warmupMs: number;
  /** Target and request; concurrency and duration are set per step. */
  bench: Pick<BenchOptions, 'target' | 'request' | 'timeoutMs'>;
  startPool(size: number): Promise<PoolUnderTest>;
  /** Bytes the pool's workers may use in all. */
  memoryBudget: number;
  /** A size within this fraction of the best throughput counts as at the knee (0.05). */
  tolerance: number;
  /** How long to wait for all workers of a size to be up (default 30 s). */
  workerWaitMs?: number;
  onStep?(step: TuneStep): void;
  onSize?(size: TuneSize): void;
}

export interface TuneResult {
  sizes: TuneSize[];
  repeat: RepeatRule;
  recommendation: Recommendation | undefined;
  memoryBudget: number;
  tolerance: number;
}

export const DEFAULT_REPEAT: RepeatRule = { min: 3, max: 8, spread: 0.1 };

/** Mean memory per worker now, or undefined when no worker is found. */
function sampleWorkers(daemonPid: number): { perWorker: number; kind: 'pss' | 'rss'; workers: number } | undefined {
  const pids = childPids(daemonPid);
  let total = 0;
  let kind: 'pss' | 'rss' = 'pss';
  let n = 0;
  for (const pid of pids) {
    const m = treeMemory(pid);
    if (m === undefined) continue;
    total += m.bytes;
    n++;
    if (m.kind === 'rss') kind = 'rss';
  }
  return n === 0 ? undefined : { perWorker: total / n, kind, workers: n };
}

export async function runTune(o: TuneOptions): Promise<TuneResult> {
  const sizes: TuneSize[] = [];
  for (const size of o.sizes) {
    const pool = await o.startPool(size);
    try {
      // pm static starts them all; wait so the first step does not measure spawning.
      await pollUntil(() => childPids(pool.pid).length >= size, o.workerWaitMs ?? 30_000);
      const steps: TuneStep[] = [];
      let mem: { perWorker: number; kind: 'pss' | 'rss'; workers: number } | undefined;
      const base = { ...o.bench, request: o.bench.request };
      if (o.warmupMs > 0) await runBench({ ...base, concurrency: size, durationMs: o.warmupMs });
      for (const c of o.concurrencyFor(size)) {
        const opts: BenchOptions = { ...base, concurrency: c, durationMs: o.stepMs };
        const runs: Array<ReturnType<typeof buildReport>> = [];
        const rpsRuns: number[] = [];
        while (needsAnotherRun(rpsRuns, o.repeat ?? DEFAULT_REPEAT)) {
          // Memory is sampled in the middle of each run, while the workers are busy.
          const sampler = setTimeout(() => {
            const m = sampleWorkers(pool.pid);
            if (m !== undefined && (mem === undefined || m.perWorker > mem.perWorker)) mem = m;
          }, o.stepMs / 2);
          const report = buildReport(opts, await runBench(opts));
          clearTimeout(sampler);
          runs.push(report);
          rpsRuns.push(report.rps);
        }
        const sum = (f: (r: (typeof runs)[number]) => number): number => runs.reduce((a, r) => a + f(r), 0);
        const step: TuneStep = {
          size,
          concurrency: c,
          rps: median(rpsRuns),
          p50Ms: median(runs.map((r) => r.latency_ms.reply.p50)),
          p99Ms: median(runs.map((r) => r.latency_ms.reply.p99)),
          replies: sum((r) => r.requests.replies),
          errors: sum((r) => r.requests.errors),
          failedStatus: sum((r) => r.status['1xx'] + r.status['4xx'] + r.status['5xx']),
          repeats: runs.length,
          rpsRuns,
          spread: relativeSpread(rpsRuns),
        };
        steps.push(step);
        o.onStep?.(step);
      }
      mem ??= sampleWorkers(pool.pid);
      const best = steps.reduce((a, b) => (b.rps > a.rps ? b : a));
      const result: TuneSize = {
        size,
        steps,
        best,
        workers: mem?.workers ?? 0,
        memPerWorker: mem?.perWorker ?? 0,
        memKind: mem?.kind ?? 'rss',
        daemonRss: rss(pool.pid) ?? 0,
      };
      sizes.push(result);
      o.onSize?.(result);
    } finally {
      await pool.stop();
    }
  }
  return { sizes, repeat: o.repeat ?? DEFAULT_REPEAT, recommendation: recommend(sizes, o.memoryBudget, o.tolerance), memoryBudget: o.memoryBudget, tolerance: o.tolerance };
}

/** The table and the recommendation as text. */
export function renderTune(r: TuneResult, poolName: string): string {
  const lines: string[] = [];
  const mib = (b: number): string => (b / 1048576).toFixed(1);
  const kind = r.sizes.some((s) => s.memKind === 'rss') ? 'RSS' : 'PSS';
  lines.push(`workers  conc     req/s  spread  runs   p50 ms   p99 ms  errors  non-2xx   ${kind} MiB/worker   workers MiB`);
  for (const s of r.sizes) {
    s.steps.forEach((st, i) => {
      const mark = st === s.best ? '*' : ' ';
      const first = i === 0;
      lines.push(
        `${(first ? String(s.size) : '').padStart(7)} ${String(st.concurrency).padStart(5)} ${st.rps.toFixed(0).padStart(9)}${mark} ${`${(st.spread * 100).toFixed(1)}%`.padStart(6)} ${String(st.repeats).padStart(5)} ${st.p50Ms.toFixed(2).padStart(7)} ${st.p99Ms.toFixed(2).padStart(8)} ${String(st.errors).padStart(7)} ${String(st.failedStatus).padStart(8)}` +
          (first ? `   ${mib(s.memPerWorker).padStart(15)} ${mib(s.memPerWorker * s.size).padStart(13)}` : ''),
      );
    });
  }
  lines.push('(* the best concurrency for that pool size; req/s is the median of the runs, spread (max − min) / median of their req/s)');
  const loose = r.sizes.flatMap((s) => s.steps).filter((st) => st.spread > r.repeat.spread);
  if (loose.length > 0) lines.push(`(${loose.length} step${loose.length === 1 ? '' : 's'} still spread more than ${(r.repeat.spread * 100).toFixed(0)}% after ${r.repeat.max} runs: a noisy machine; differences smaller than the spread mean nothing)`);
  lines.push('');
  const rec = r.recommendation;
  if (rec === undefined) {
    lines.push('No recommendation: every pool size failed most of its requests (see the errors and non-2xx columns).');
  } else {
    lines.push(`Recommendation for pool "${poolName}": max_children: ${rec.size}${rec.fits ? '' : '  (does NOT fit the memory budget)'}`);
    lines.push(`  ${rec.reason}`);
  }
  return `${lines.join('\n')}\n`;
}
