/**
 * A spawned pool's record of one worker process (`Slot`: the process handle, its endpoint,
 * its state in the supervisor's table and why it is wanted gone, the requests it was
 * given, its memory samples), and what others read of the request places it
 * offers (`SeatView`; the seats are the Dispatcher's, seats.ts). A plain worker offers
 * one seat; a php-cgi group (group_size k) offers k on one socket.
 * The Slot is the Supervisor's: it (and children.ts through it) alone writes one.
 * The Dispatcher, the memory part and the snapshot get a `SlotView`, read-only; what
 * they change goes through the Supervisor (a request counted: `assigned`, its end:
 * `released`).
 * Small pure helpers over slots that the pool and its memory part share live here too.
 */
import type { Logger } from '../../log/log.js';
import type { Exchange } from '../../protocol/exchange.js';
import type { Endpoint } from '../../upstream/types.js';
import type { ManagedWorker, RetireReason, WorkerExit, WorkerOwner, WorkerSpawnFailure } from '../../worker/types.js';
import type { Clock, WallClock } from '../../util/clock.js';
import type { WorkerMemory } from './worker-memory.js';
import { workerState, type SlotState, type WorkerState } from './supervisor-table.js';
import type { WorkerSnapshot } from '../types.js';

/** What the supervisor, the memory part and the snapshot read of a seat (seats.ts; the Dispatcher writes it). */
export interface SeatView {
  /** On the idle stack (state free). */
  readonly inIdle: boolean;
  /** When it last went idle. */
  readonly idleSince: number;
  /** It runs a request (the request side knows how: a request handed to it, or a connection sampled). */
  readonly busy: boolean;
  /** The request it runs, when the request side handed it over. */
  readonly current: Exchange | undefined;
  readonly busySince: number;
}

/** What the Dispatcher, the memory part and the snapshot read of a worker's record. */
export interface SlotView {
  /** The process's facts; signalling it is the Supervisor's (children.ts). */
  readonly worker: Pick<ManagedWorker, 'id' | 'pid' | 'address'>;
  readonly pid: number | undefined;
  /** Monotonic ms it was spawned, and became ready (0 before). */
  readonly spawnedAt: number;
  readonly readyAt: number;
  readonly maxRequests: number;
  readonly seats: readonly SeatView[];
  readonly log: Logger;
  /** Made when it is offered (SupervisorHooks.connect). */
  readonly endpoint: Endpoint | undefined;
  /** Its cell of the supervisor's table. */
  readonly state: SlotState;
  /** Why it is wanted gone; undefined while wanted. */
  readonly reason: RetireReason | undefined;
  /** What status shows of it (supervisor-table.ts workerState). */
  readonly workerState: WorkerState;
  /** Past starting. */
  readonly ready: boolean;
  /** Requests it was given (all seats): the one count (max_requests, status, its exit line). */
  readonly requests: number;
  /** Seats running a request. */
  readonly busy: number;
  /** The first request it runs (the one a memory line names), and since when any seat is busy. */
  readonly current: Exchange | undefined;
  readonly busySince: number;
  /** Every seat is on the idle stack, and when the last went idle. */
  readonly inIdle: boolean;
  readonly idleSince: number;
  readonly lastUsedAt: number;
  /** Set by its exit. */
  readonly exit: WorkerExit | undefined;
  readonly spawnFailure: WorkerSpawnFailure | undefined;
  /** The memory part's samples of it, and of a group's children (its objects: the memory part writes in them). */
  readonly mem: WorkerMemory | undefined;
  readonly children: Map<number, WorkerMemory> | undefined;
}

export class Slot implements SlotView {
  readonly worker: ManagedWorker;
  /** Monotonic ms it was spawned. */
  readonly spawnedAt: number;
  readonly maxRequests: number;
  readonly seats: readonly SeatView[];
  log: Logger;
  endpoint: Endpoint | undefined;
  /** The supervisor's state (supervisor-table.ts). */
  state: SlotState = 'starting';
  /** Why it is wanted gone (supervisor-table.ts replacesReason); undefined while wanted. */
  reason: RetireReason | undefined;
  /** Tried while the pool is failing: its readiness ends the failing state. */
  probe = false;
  /** Requests assigned to it (all seats). */
  requests = 0;
  /** Monotonic ms it became ready (0 before). */
  readyAt = 0;
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

  /**
   * `seats` makes its request places (the Dispatcher's); `spawn` its process, which reads
   * what it needs at its exit through the owner it is given.
   */
  /** Adopted from the code before an exec in place of the daemon (Worker.adopt), not spawned. */
  adopted = false;

  constructor(spawn: (owner: WorkerOwner) => ManagedWorker, clock: Clock, maxRequests: number, log: Logger, seats: (slot: Slot) => readonly SeatView[], age = 0) {
    this.spawnedAt = clock.now() - age;
    this.maxRequests = maxRequests;
    this.log = log;
    this.seats = seats(this);
    this.worker = spawn({ clock, busy: () => this.busy > 0, requests: () => this.requests, reason: () => this.reason });
  }

  /** Seats running a request. */
  get busy(): number {
    let n = 0;
    for (const s of this.seats) if (s.busy) n++;
    return n;
  }

  /** Its state as status shows it (supervisor-table.ts workerState). */
  get workerState(): WorkerState {
    return workerState(this.state, this.busy, this.spawnFailure !== undefined);
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
    for (const s of this.seats) if (s.busy && s.busySince < t) t = s.busySince;
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

  /** When it last started or finished a request (or became ready, or was spawned). */
  get lastUsedAt(): number {
    let t = Math.max(this.spawnedAt, this.readyAt);
    for (const s of this.seats) t = Math.max(t, s.idleSince, s.busySince);
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

/** The URI status shows for a request a worker runs. */
function uriOf(ex: Exchange): string {
  return ex.params.get('REQUEST_URI') ?? ex.params.get('SCRIPT_NAME') ?? '';
}

export function workerSnapshot(slot: SlotView, wall: WallClock): WorkerSnapshot {
  let oldest: SeatView | undefined;
  for (const seat of slot.seats) if (seat.busy && (oldest === undefined || seat.busySince < oldest.busySince)) oldest = seat;
  // A sampled connection has no URI the pool could know.
  const current = oldest === undefined ? undefined : { uri: oldest.current === undefined ? '' : uriOf(oldest.current), startedAt: wall.at(oldest.busySince) };
  const s: WorkerSnapshot = { pid: slot.pid ?? 0, state: slot.workerState, requests: slot.requests, startedAt: wall.at(slot.spawnedAt), lastUsedAt: wall.at(slot.lastUsedAt), current };
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
