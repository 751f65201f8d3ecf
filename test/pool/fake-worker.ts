/**
 * A ManagedWorker without a process, driven by the test through a FakeClock: it
 * becomes ready after `readyAfter` ms (unless told otherwise) and exits `exitAfter` ms
 * after it was asked to stop. Exits are classified by the real exit policy.
 */
import { EventEmitter } from 'node:events';
import type { Logger } from '../../src/log/log.js';
import { ErrorCodes } from '../../src/errors.js';
import { classifyExit } from '../../src/worker/exit-policy.js';
import type { ManagedWorker, RetireReason, WorkerEventMap, WorkerExit, WorkerSpec, WorkerState } from '../../src/worker/types.js';
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
  state: WorkerState = 'spawning';
  retireReason: RetireReason | undefined;
  requests = 0;
  readonly startedAt = Date.now();
  lastUsedAt = Date.now();
  current: { uri: string; startedAt: number } | undefined;
  stopCalls: RetireReason[] = [];
  private readonly clock: FakeClock;
  private readonly plan: FakeWorkerPlan;
  private exitResolve!: (e: WorkerExit) => void;
  private readonly exitPromise = new Promise<WorkerExit>((r) => (this.exitResolve = r));
  private readonly born: number;
  private exiting = false;
  private wasReady = false;

  constructor(clock: FakeClock, id: number, plan: FakeWorkerPlan) {
    super();
    this.clock = clock;
    this.id = id;
    this.plan = plan;
    this.pid = plan.spawnFailAfter !== undefined && plan.spawnErrno === 'ENOENT' ? undefined : nextPid++;
    this.address = { kind: 'unix', path: `/fake/w${id}.sock`, text: `unix:/fake/w${id}.sock` };
    this.born = clock.now();
    if (plan.spawnFailAfter !== undefined) {
      clock.setTimer(() => {
        if (this.state !== 'spawning') return;
        this.emit('spawnFailed', Object.assign(new Error(`cannot execute /nope: ${plan.spawnErrno ?? 'EXITED'}`), { code: ErrorCodes.SPAWN_FAILED, errno: plan.spawnErrno ?? 'EXITED' }));
        this.exit(plan.spawnErrno === 'ENOENT' ? null : 1, null);
      }, plan.spawnFailAfter);
    } else if (plan.readyAfter !== undefined) {
      clock.setTimer(() => this.becomeReady(), plan.readyAfter);
    }
  }

  get retiring(): boolean {
    return this.state === 'draining' || this.state === 'stopping';
  }

  becomeReady(): void {
    if (this.state !== 'spawning') return;
    this.state = 'idle';
    this.wasReady = true;
    this.emit('ready');
  }

  assign(uri = ''): void {
    if (this.state !== 'idle') throw new Error(`assign in ${this.state}`);
    this.state = 'busy';
    this.requests++;
    this.current = { uri, startedAt: Date.now() };
  }

  release(): void {
    if (this.state === 'busy') {
      this.state = 'idle';
      this.current = undefined;
    } else if (this.state === 'draining') {
      this.state = 'stopping';
      this.current = undefined;
      this.scheduleExit();
    } else if (this.state !== 'stopping' && this.state !== 'exited') throw new Error(`release in ${this.state}`);
  }

  retire(reason: RetireReason): void {
    if (this.state === 'exited' || this.state === 'stopping') return;
    this.retireReason ??= reason;
    if (this.state === 'busy') this.state = 'draining';
    else if (this.state === 'idle' || this.state === 'spawning') {
      this.state = 'stopping';
      this.scheduleExit();
    }
  }

  stop(reason: RetireReason): Promise<WorkerExit> {
    this.stopCalls.push(reason);
    if (this.state !== 'exited') {
      if (this.state !== 'stopping' || this.retireReason === undefined) this.retireReason = reason;
      this.state = 'stopping';
      this.scheduleExit();
    }
    return this.exitPromise;
  }

  /** The process dies (crash when no reason was given). */
  exit(code: number | null, signal: NodeJS.Signals | null): void {
    if (this.state === 'exited') return;
    const wasBusy = this.state === 'busy' || this.state === 'draining';
    this.state = 'exited';
    const exit: WorkerExit = {
      code,
      signal,
      reason: this.retireReason,
      uptime: this.clock.now() - this.born,
      ready: this.wasReady,
      served: this.requests - (wasBusy ? 1 : 0),
    };
    this.emit('exit', exit, classifyExit(exit, wasBusy));
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

  readonly create = (_spec: WorkerSpec, _logger: Logger, id: number): FakeWorker => {
    const w = new FakeWorker(this.clock, id, { ...this.plan });
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
