/**
 * A spawned pool's record of one worker process (`Slot`: the process, its endpoint, its
 * supervisor state, its memory samples), and what others read of the request places it
 * offers (`SeatView`; the seats are the Dispatcher's, seats.ts). A plain worker offers
 * one seat; a php-cgi group (group_size k) offers k on one socket.
 * Small pure helpers over slots that the pool and its memory part share live here too.
 */
import type { Logger } from '../../log/log.js';
import type { Exchange } from '../../protocol/exchange.js';
import type { Endpoint } from '../../upstream/types.js';
import type { ManagedWorker, WorkerExit, WorkerSpawnFailure } from '../../worker/types.js';
import type { WorkerMemory } from './worker-memory.js';
import type { SeatState } from './seat-table.js';
import type { SlotState } from './supervisor-table.js';
import type { WorkerSnapshot } from '../types.js';

/** What the supervisor, the memory part and the snapshot read of a seat (seats.ts; the Dispatcher writes it). */
export interface SeatView {
  /** Its cell in seat-table.ts. */
  readonly state: SeatState;
  /** On the idle stack (state free). */
  readonly inIdle: boolean;
  /** When it last went idle. */
  readonly idleSince: number;
  /** The request it runs. */
  readonly current: Exchange | undefined;
  readonly busySince: number;
}

export class Slot {
  readonly worker: ManagedWorker;
  /** Monotonic ms it was spawned. */
  readonly spawnedAt: number;
  readonly maxRequests: number;
  readonly seats: readonly SeatView[];
  log: Logger;
  endpoint: Endpoint | undefined;
  /** The supervisor's state (supervisor-table.ts). */
  state: SlotState = 'starting';
  /** Tried while the pool is failing: its readiness ends the failing state. */
  probe = false;
  /** Seats running a request. */
  busy = 0;
  /** Requests assigned to it (all seats). */
  requests = 0;
  exit: WorkerExit | undefined;
  spawnFailure: WorkerSpawnFailure | undefined;
  /** Resolves start()'s wait for this worker (ready or gone). */
  settle: (() => void) | undefined;
  /** The supervisor's hold: held failures wait this timer for the exit event. */
  graceTimer: unknown;
  /** Samples and the memory governor's state (pools with a governor only). */
  mem: WorkerMemory | undefined;
  /** A group's children by pid (groups.ts), with their samples. */
  children: Map<number, WorkerMemory> | undefined;

  /** `seats` makes its request places (the Dispatcher's). */
  constructor(worker: ManagedWorker, now: number, maxRequests: number, log: Logger, seats: (slot: Slot) => readonly SeatView[]) {
    this.worker = worker;
    this.spawnedAt = now;
    this.maxRequests = maxRequests;
    this.log = log;
    this.seats = seats(this);
  }

  get pid(): number | undefined {
    return this.worker.pid;
  }

  get ready(): boolean {
    return this.state !== 'starting';
  }

  /** The first request it runs (the one a memory line names). */
  get current(): Exchange | undefined {
    for (const s of this.seats) if (s.current !== undefined) return s.current;
    return undefined;
  }

  get busySince(): number {
    let t = Infinity;
    for (const s of this.seats) if (s.current !== undefined && s.busySince < t) t = s.busySince;
    return t === Infinity ? 0 : t;
  }

  /** Every seat is on the idle stack. */
  get inIdle(): boolean {
    for (const s of this.seats) if (!s.inIdle) return false;
    return true;
  }

  /** When its last seat went idle. */
  get idleSince(): number {
    let t = 0;
    for (const s of this.seats) if (s.idleSince > t) t = s.idleSince;
    return t;
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

export function workerSnapshot(slot: Slot): WorkerSnapshot {
  const w = slot.worker;
  const s: WorkerSnapshot = { pid: w.pid ?? 0, state: w.state, requests: slot.requests, startedAt: w.startedAt, lastUsedAt: w.lastUsedAt, current: w.current };
  if (slot.seats.length > 1) {
    s.slots = slot.seats.length;
    s.busySlots = slot.busy;
    s.children = [];
    for (const [pid, m] of slot.children ?? []) {
      const f = m.figures();
      s.children.push(f === undefined ? { pid } : { pid, memory: f });
    }
  }
  const m = slot.mem?.figures();
  if (m !== undefined) s.memory = m;
  return s;
}
