/**
 * A SpawnedPool on fake workers, fake endpoints and a fake clock, for the spawned pool's
 * unit tests, and the endpoint outcomes those tests report.
 */
import { closedEarly, connectFailed } from '../../src/upstream/failures.js';
import { SpawnedPool } from '../../src/pool/spawned/dispatcher.js';
import { buildWorkerSpec } from '../../src/pool/worker-spec.js';
import type { PoolConfig } from '../../src/config/types.js';
import type { UpstreamOutcome } from '../../src/upstream/types.js';
import { FakeClock } from './fake-clock.js';
import { FakeWorkerFactory, type FakeWorker } from './fake-worker.js';
import { FakeEndpoint, makeRequest, poolConfig, recordingLogger, type TestRequest } from './helpers.js';

export function setup(over: Partial<PoolConfig> = {}) {
  const clock = new FakeClock();
  const wf = new FakeWorkerFactory(clock);
  const eps = new Map<string, FakeEndpoint>();
  /** Every endpoint made per address: a php-cgi group's seats each have one. */
  const all = new Map<string, FakeEndpoint[]>();
  const { logger, lines } = recordingLogger();
  const cfg = poolConfig({ command: ['/fake/app'], ...over });
  const pool = new SpawnedPool(cfg, {
    logger,
    clock,
    spec: buildWorkerSpec(cfg, '/tmp'),
    workerFactory: wf.create,
    workerLogger: logger,
    endpointFactory: (a, o) => {
      const e = new FakeEndpoint(a, o);
      eps.set(a.text, e);
      all.set(a.text, [...(all.get(a.text) ?? []), e]);
      return e;
    },
    random: () => 0.999,
  });
  const ep = (w: FakeWorker): FakeEndpoint => eps.get(w.address.text)!;
  const seatEps = (w: FakeWorker): FakeEndpoint[] => all.get(w.address.text) ?? [];
  const send = (n: number, params: Record<string, string> = {}): TestRequest[] => {
    const out: TestRequest[] = [];
    for (let i = 0; i < n; i++) {
      const r = makeRequest({ SCRIPT_FILENAME: '/srv/app/index.php', REQUEST_URI: `/r${i}`, ...params });
      pool.dispatch(r.ex);
      out.push(r);
    }
    return out;
  };
  return { pool, clock, wf, ep, seatEps, lines, send, cfg };
}

/** The worker closed the connection before responding (it may be dying). */
export const closed: UpstreamOutcome = closedEarly('unix:/fake/w.sock', undefined, false, {
  failure: 'closed',
  headSent: true,
  responseBytes: false,
  reused: false,
  reset: false,
  idempotent: false,
});

/** The worker's socket refused the connection. */
export const refused: UpstreamOutcome = connectFailed('unix:/fake/w.sock', Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }));
