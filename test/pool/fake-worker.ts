/**
 * A ManagedWorker without a process, driven by the test through a FakeClock: it
 * becomes ready after `readyAfter` ms (unless told otherwise) and exits `exitAfter` ms
 * after it was asked to stop. Exits are classified by the real exit policy, with what its
 * owner (the pool's slot) says of its requests, as a real worker's are.
 *
 * `state`, `requests` and `retireReason` are what status would show of it: its process
 * facts (ready, signalled, exited) read together with its owner's (busy, why wanted gone).
 */
import { EventEmitter } from 'node:events';
import type { Logger } from '../../src/log/log.js';
import { ErrorCodes } from '../../src/errors.js';
import type { HandedWorker, ManagedWorker, RetireReason, WorkerEventMap, WorkerExit, WorkerOwner, WorkerSpec } from '../../src/worker/types.js';
import type { WorkerState } from '../../src/pool/workers/supervisor-table.js';
import type { SocketAddress } from '../../src/protocol/address.js';
import type { FakeClock } from './fake-clock.js';

let nextPid = 50_000;

export interface FakeWorkerPlan {
  /** ms until ready; undefined = never by itself. */
  readyAfter?: number | undefined;
  /** Fail to start: spawnFailed + exit after this many ms. */
  spawnFailAfter?: number;
  spawnErrno?: string;
  exitAfterStop?: number;
}

export class FakeWorker extends EventEmitter<WorkerEventMap> implements ManagedWorker {
  readonly id: number;
  readonly pid: number | undefined;
  readonly address: SocketAddress;
  /** The owner's reason at each stop() (undefined: stopped without one). */
  stopCalls: Array<RetireReason | undefined> = [];
  private readonly clock: FakeClock;
  private readonly plan: FakeWorkerPlan;
  private readonly owner: WorkerOwner;
  private exited = false;
  private signalled = false;
  private exitResolve!: (e: WorkerExit) => void;
  private readonly exitPromise = new Promise<WorkerExit>((r) => (this.exitResolve = r));
  private readonly born: number;
  private exiting = false;
  private wasReady = false;

  constructor(clock: FakeClock, id: number, plan: FakeWorkerPlan, owner: WorkerOwner) {
    super();
    this.clock = clock;
    this.owner = owner;
    this.id = id;
    this.plan = plan;
    this.pid = plan.spawnFailAfter !== undefined && plan.spawnErrno === 'ENOENT' ? undefined : nextPid++;
    this.address = { kind: 'unix', path: `/fake/w${id}.sock`, text: `unix:/fake/w${id}.sock` };
    this.born = clock.now();
    if (plan.spawnFailAfter !== undefined) {
      clock.setTimer(() => {
        if (this.wasReady || this.signalled || this.exited) return;
        this.emit('spawnFailed', Object.assign(new Error(`cannot execute /nope: ${plan.spawnErrno ?? 'EXITED'}`), { code: ErrorCodes.SPAWN_FAILED, errno: plan.spawnErrno ?? 'EXITED' }));
        this.exit(plan.spawnErrno === 'ENOENT' ? null : 1, null);
      }, plan.spawnFailAfter);
    } else if (plan.readyAfter !== undefined) {
      clock.setTimer(() => this.becomeReady(), plan.readyAfter);
    }
  }

  get state(): WorkerState {
    if (this.exited) return 'exited';
    if (this.signalled) return 'stopping';
    if (!this.wasReady) return 'spawning';
    if (this.owner.busy()) return this.owner.reason() !== undefined ? 'draining' : 'busy';
    return this.owner.reason() !== undefined ? 'stopping' : 'idle';
  }

  get requests(): number {
    return this.owner.requests();
  }

  get retireReason(): RetireReason | undefined {
    return this.owner.reason();
  }

  becomeReady(): void {
    if (this.wasReady || this.signalled || this.exited) return;
    this.wasReady = true;
    this.emit('ready');
  }

  stop(): Promise<WorkerExit> {
    this.stopCalls.push(this.owner.reason());
    if (!this.exited) {
      this.signalled = true;
      this.scheduleExit();
    }
    return this.exitPromise;
  }

  /** Handed on by an exec in place (Worker.handOver): only a ready worker never signalled; from then on it reports nothing. */
  handOver(): HandedWorker | undefined {
    if (!this.wasReady || this.signalled || this.exited || this.pid === undefined) return undefined;
    this.handedOver = true;
    this.exited = true;
    return { pid: this.pid, socket: this.address.text.slice('unix:'.length), out: -1, err: -1, requests: 0, startedAt: 0, readyAt: 0 };
  }

  /** Handed on: handOver() gave its record. */
  handedOver = false;

  /** The process dies (crash when no reason was given). */
  exit(code: number | null, signal: NodeJS.Signals | null): void {
    if (this.exited) return;
    const wasBusy = this.owner.busy();
    this.exited = true;
    const exit: WorkerExit = {
      code,
      signal,
      reason: this.owner.reason(),
      uptime: this.clock.now() - this.born,
      ready: this.wasReady,
      served: this.owner.requests() - (wasBusy ? 1 : 0),
      busy: wasBusy,
    };
    this.emit('exit', exit);
    this.exitResolve(exit);
  }

  private scheduleExit(): void {
    if (this.exiting) return;
    this.exiting = true;
    this.clock.setTimer(() => this.exit(0, null), this.plan.exitAfterStop ?? 5);
  }
}

/** A WorkerFactory making FakeWorkers; `plan` may be changed between spawns. */
export class FakeWorkerFactory {
  readonly workers: FakeWorker[] = [];
  plan: FakeWorkerPlan = { readyAfter: 10 };
  private readonly clock: FakeClock;

  constructor(clock: FakeClock) {
    this.clock = clock;
  }

  readonly create = (_spec: WorkerSpec, _logger: Logger, id: number, owner: WorkerOwner): FakeWorker => {
    const w = new FakeWorker(this.clock, id, { ...this.plan }, owner);
    this.workers.push(w);
    return w;
  };

  get live(): FakeWorker[] {
    return this.workers.filter((w) => w.state !== 'exited');
  }

  count(state: WorkerState): number {
    return this.workers.filter((w) => w.state === state).length;
  }
}
