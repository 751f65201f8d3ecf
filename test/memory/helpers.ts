/**
 * Memory tests without processes: a sampler whose readings the test sets per pid, and
 * spawned pools on fake workers and fake endpoints sharing one fake clock and one
 * HostGovernor (reusing test/pool's fakes).
 */
import type { PoolConfig } from '../../src/config/types.js';
import { HostGovernor } from '../../src/memory/host-governor.js';
import type { MemorySampler } from '../../src/memory/sampler.js';
import type { MemorySample } from '../../src/memory/types.js';
import { SpawnedPool } from '../../src/pool/spawned/dispatcher.js';
import { buildWorkerSpec } from '../../src/pool/worker-spec.js';
import { FakeClock } from '../pool/fake-clock.js';
import { FakeWorkerFactory, type FakeWorker } from '../pool/fake-worker.js';
import { FakeEndpoint, makeRequest, poolConfig, recordingLogger, type LogLine, type TestRequest } from '../pool/helpers.js';

export const MiB = 1024 * 1024;

/** Readings set by the test: value (PSS) per pid; RSS is reported 1.5× that. */
export class FakeSampler implements MemorySampler {
  readonly kind = 'proc' as const;
  readonly sync = true;
  readonly syncRounds = true;
  readonly measure = 'pss' as const;
  readonly values = new Map<number, number>();
  selfValue = 10 * MiB;
  /** Value for a pid the test did not set. */
  fallback: number | undefined = undefined;
  reads = 0;
  freshReads = 0;
  forgotten: number[] = [];

  readNow(pid: number, now: number, fresh = false): MemorySample | undefined {
    this.reads++;
    if (fresh) this.freshReads++;
    const v = this.values.get(pid) ?? this.fallback;
    if (v === undefined) return undefined;
    return { pid, at: now, rss: Math.round(v * 1.5), pss: v, anon: undefined, cpu: 1.5, value: v, measure: 'pss' };
  }

  read(pids: readonly number[], now: number): Promise<Map<number, MemorySample>> {
    const m = new Map<number, MemorySample>();
    for (const p of pids) {
      const s = this.readNow(p, now);
      if (s) m.set(p, s);
    }
    return Promise.resolve(m);
  }

  self(now: number): MemorySample {
    const v = this.selfValue;
    return { pid: process.pid, at: now, rss: v, pss: v, anon: undefined, cpu: 0, value: v, measure: 'pss' };
  }

  selfAsync(now: number): Promise<MemorySample> {
    return Promise.resolve(this.self(now));
  }

  forget(pid: number): void {
    this.forgotten.push(pid);
  }

  close(): void {}
}

export interface World {
  clock: FakeClock;
  sampler: FakeSampler;
  governor: HostGovernor;
  lines: LogLine[];
  wf: FakeWorkerFactory;
  eps: Map<string, FakeEndpoint>;
  pool(name: string, over?: Partial<PoolConfig>): TestPool;
}

export interface TestPool {
  pool: SpawnedPool;
  workers(): FakeWorker[];
  live(): FakeWorker[];
  ep(w: FakeWorker): FakeEndpoint;
  send(n: number): TestRequest[];
  /** Sets the sampled value of every live worker of this pool. */
  setAll(bytes: number): void;
  /** Finishes every running request with 200. */
  finishAll(): void;
}

/** `budget`: host memory_budget in bytes (undefined: none). Sample interval 1 s. */
export function world(budget?: number): World {
  const clock = new FakeClock();
  const sampler = new FakeSampler();
  const { logger, lines } = recordingLogger();
  const governor = new HostGovernor({
    logger,
    sampleInterval: 1000,
    sampler,
    clock,
    budget: budget === undefined ? undefined : { bytes: budget, setting: `${budget}`, derivation: 'configured' },
  });
  const wf = new FakeWorkerFactory(clock);
  const eps = new Map<string, FakeEndpoint>();
  const owner = new Map<FakeWorker, string>();
  const w: World = {
    clock,
    sampler,
    governor,
    lines,
    wf,
    eps,
    pool(name, over = {}) {
      const cfg = poolConfig({ name, command: ['/fake/app'], idleTimeout: 600_000, expectedWorkerMemory: 30 * MiB, ...over });
      const create = wf.create;
      const pool = new SpawnedPool(cfg, {
        logger: logger.child({ pool: name }),
        clock,
        spec: buildWorkerSpec(cfg, '/tmp'),
        workerFactory: (spec, log, id, workerOwner) => {
          const fw = create(spec, log, id, workerOwner);
          owner.set(fw, name);
          return fw;
        },
        workerLogger: logger,
        endpointFactory: (a, o) => {
          const e = new FakeEndpoint(a, o);
          eps.set(a.text, e);
          return e;
        },
        random: () => 0.5,
        memory: governor,
      });
      const workers = (): FakeWorker[] => wf.workers.filter((x) => owner.get(x) === name);
      const ep = (fw: FakeWorker): FakeEndpoint => eps.get(fw.address.text)!;
      return {
        pool,
        workers,
        live: () => workers().filter((x) => x.state !== 'exited'),
        ep,
        send(n) {
          const out: TestRequest[] = [];
          for (let i = 0; i < n; i++) {
            const r = makeRequest({ SCRIPT_FILENAME: `/srv/${name}/index.php`, REQUEST_URI: `/${name}/${i}` });
            pool.dispatch(r.ex);
            out.push(r);
          }
          return out;
        },
        setAll(bytes) {
          for (const fw of workers()) if (fw.state !== 'exited' && fw.pid !== undefined) sampler.values.set(fw.pid, bytes);
        },
        finishAll() {
          for (const fw of workers()) {
            const e = eps.get(fw.address.text);
            while (e && e.active > 0) e.finish();
          }
        },
      };
    },
  };
  return w;
}

/** Log lines whose message matches. */
export function linesMatching(lines: readonly LogLine[], re: RegExp): LogLine[] {
  return lines.filter((l) => re.test(l.msg));
}
