/**
 * A spawned pool's record of one worker (the process, its endpoint, the request it
 * runs, its timers and its memory samples), and small pure helpers over slots that the
 * pool and its memory part share. Moved out of spawned-pool.ts to keep that file about
 * the pool's decisions.
 */
import type { Logger } from '../log/log.js';
import type { Exchange } from '../protocol/exchange.js';
import type { Endpoint, UpstreamOutcome } from '../upstream/types.js';
import type { ManagedWorker, WorkerExit, WorkerSpawnFailure } from '../worker/types.js';
import type { WorkerMemory } from './pool-memory.js';
import { RequestNodes } from './request-timer.js';
import type { WorkerCounts } from './scaling.js';
import type { WorkerSnapshot } from './types.js';

export type FailedOutcome = Extract<UpstreamOutcome, { kind: 'failed' }>;

export class Slot {
  readonly worker: ManagedWorker;
  /** Monotonic ms it was spawned. */
  readonly spawnedAt: number;
  readonly maxRequests: number;
  readonly timerNodes: RequestNodes<Slot>;
  /** The endpoint's callback, made once per worker rather than per request. */
  readonly done: (o: UpstreamOutcome) => void;
  log: Logger;
  endpoint: Endpoint | undefined;
  ready = false;
  /** Tried while the pool is failing: its readiness ends the failing state. */
  probe = false;
  inIdle = false;
  idleSince = 0;
  current: Exchange | undefined;
  busySince = 0;
  /** A failure waiting for the exit event (EXIT_GRACE_MS). */
  held: FailedOutcome | undefined;
  heldTimer: unknown;
  exit: WorkerExit | undefined;
  /** Waits for the endpoint's report after the worker exited under a request. */
  exitTimer: unknown;
  spawnFailure: WorkerSpawnFailure | undefined;
  /** Resolves start()'s wait for this worker (ready or gone). */
  settle: (() => void) | undefined;
  /** Samples and the memory governor's state (pools with a governor only). */
  mem: WorkerMemory | undefined;

  constructor(onOutcome: (slot: Slot, o: UpstreamOutcome) => void, worker: ManagedWorker, now: number, maxRequests: number, log: Logger) {
    this.worker = worker;
    this.spawnedAt = now;
    this.maxRequests = maxRequests;
    this.log = log;
    this.timerNodes = new RequestNodes<Slot>(this);
    this.done = (o) => onOutcome(this, o);
  }

  get pid(): number | undefined {
    return this.worker.pid;
  }
}

export function scriptOf(ex: Exchange): string {
  return ex.params.get('SCRIPT_FILENAME') ?? ex.params.get('SCRIPT_NAME') ?? ex.params.get('REQUEST_URI') ?? '';
}

export function exitText(exit: WorkerExit): string {
  if (exit.signal !== null) return `was killed by ${exit.signal}`;
  if (exit.code !== null) return `exited with code ${exit.code}`;
  return 'could not be started';
}

/** Live workers by state, and the queue length, for the scaling policy. */
export function countWorkers(slots: Iterable<Slot>, queued: number): WorkerCounts {
  const c: WorkerCounts = { idle: 0, busy: 0, spawning: 0, retiring: 0, queued };
  for (const s of slots) {
    switch (s.worker.state) {
      case 'spawning':
        c.spawning++;
        break;
      case 'idle':
        c.idle++;
        break;
      case 'busy':
        c.busy++;
        break;
      case 'draining':
      case 'stopping':
        c.retiring++;
        break;
      case 'exited':
        break;
    }
  }
  return c;
}

export function workerSnapshot(slot: Slot): WorkerSnapshot {
  const w = slot.worker;
  const s: WorkerSnapshot = { pid: w.pid ?? 0, state: w.state, requests: w.requests, startedAt: w.startedAt, lastUsedAt: w.lastUsedAt, current: w.current };
  const m = slot.mem?.figures();
  if (m !== undefined) s.memory = m;
  return s;
}
