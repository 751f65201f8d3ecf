/**
 * Birth and burial of a pool's worker processes, as PHP-FPM's fpm_children.c beside the
 * policy of fpm_process_ctl.c (supervisor.ts): a worker is made through the
 * WorkerFactory with its Slot as the owner it reads at its exit, its exit is judged
 * (exit-verdict.ts) and logged once, its events become the supervisor's table events (ProcessEvents, handed in: this file never imports the
 * supervisor), it is signalled (SIGTERM with the worker's kill_timeout escalation, or
 * SIGKILL now), reaped from the live set, and waited for at shutdown.
 */
import type { Logger } from '../../log/log.js';
import type { Clock } from '../../util/clock.js';
import type { HandedWorker, ManagedWorker, WorkerAdopter, WorkerExit, WorkerFactory, WorkerSpec } from '../../worker/types.js';
import { judgeExit, type ExitFacts, type ExitVerdict } from './exit-verdict.js';
import { killChildNow } from './hard-kill.js';
import { Slot, type SeatView } from './slot.js';

/** What becomes of a worker's events: the supervisor fires its table. */
export interface ProcessEvents {
  ready(slot: Slot): void;
  exited(slot: Slot, exit: WorkerExit, verdict: ExitVerdict): void;
}

export interface ChildrenDeps {
  log: Logger;
  clock: Clock;
  /** With the memory part's hook that places each worker right after spawn. */
  spec: WorkerSpec;
  workerFactory: WorkerFactory;
  /** How a worker handed on by an exec in place of the daemon is adopted (Worker.adopt). */
  workerAdopter?: WorkerAdopter | undefined;
  /** Logger handed to workers (they bind pool and worker id themselves). */
  workerLogger: Logger;
  /** SIGKILL now; defaults to hard-kill.ts, which signals only our own children. */
  killNow?: ((pid: number) => void) | undefined;
  /** Makes a worker's request places (the request side's). */
  seats: (slot: Slot) => readonly SeatView[];
  /** How the pool knows what a worker served, and whether it recycles itself (exit-verdict.ts). */
  counting: Pick<ExitFacts, 'served' | 'selfRecycles'>;
}

export class Children {
  /** Live workers (not yet reaped). */
  readonly slots = new Set<Slot>();
  private readonly deps: ChildrenDeps;
  private readonly events: ProcessEvents;
  private nextId = 1;
  private allReaped: (() => void) | undefined;

  constructor(deps: ChildrenDeps, events: ProcessEvents) {
    this.deps = deps;
    this.events = events;
  }

  /** A new worker process and its record, in the live set. */
  birth(maxRequests: number): Slot {
    const d = this.deps;
    const id = this.nextId++;
    return this.track(new Slot((owner) => d.workerFactory(d.spec, d.workerLogger, id, owner), d.clock, maxRequests, d.log, d.seats));
  }

  /** A worker the code before an exec in place handed on (still our child), and its record, in the live set; undefined without an adopter. */
  adopt(h: HandedWorker, maxRequests: number): Slot | undefined {
    const d = this.deps;
    const adopter = d.workerAdopter;
    if (adopter === undefined) return undefined;
    const id = this.nextId++;
    const slot = new Slot((owner): ManagedWorker => adopter(h, d.spec, d.workerLogger, id, owner), d.clock, maxRequests, d.log, d.seats, Math.max(0, Date.now() - h.startedAt));
    slot.adopted = true;
    slot.requests = h.requests;
    return this.track(slot);
  }

  /** Handed on to the new code (hand_on): out of the live set, never signalled nor reaped here. */
  release(slot: Slot): void {
    this.slots.delete(slot);
    this.reapedAll();
  }

  private track(slot: Slot): Slot {
    this.slots.add(slot);
    const w = slot.worker;
    w.on('ready', () => this.events.ready(slot));
    w.on('spawnFailed', (f) => (slot.spawnFailure = f));
    w.on('exit', (exit) => this.events.exited(slot, exit, this.judge(slot, exit)));
    return slot;
  }

  /** The exit's verdict, and its one log line (after a spawn failure, whose line said it all, at debug). */
  private judge(slot: Slot, exit: WorkerExit): ExitVerdict {
    const seenWorking = slot.requests > 0 || slot.seats.some((s) => s.idleSince > 0);
    const verdict = judgeExit({ exit, ...this.deps.counting, seenWorking });
    // A worker that was ready logs through slot.log, which names its pid already (Supervisor.offer).
    const fields = { worker: slot.worker.id, ...(slot.readyAt === 0 ? { wpid: slot.pid } : {}), exitCode: exit.code, signal: exit.signal, reason: exit.reason, uptime: exit.uptime, requests: slot.requests, early: verdict.early };
    const msg = `worker ${verdict.message}`;
    if (slot.spawnFailure !== undefined) slot.log.debug(fields, msg);
    else if (verdict.code === undefined) slot.log[verdict.level](fields, msg);
    else slot.log[verdict.level]({ code: verdict.code, ...fields }, msg);
    return verdict;
  }

  /** SIGTERM now (a process not started yet is not started), SIGKILL after kill_timeout; SIGKILL now to an idle php-cgi (WorkerSpec.killIdle). */
  signal(slot: Slot, idle = false): void {
    void slot.worker.stop(idle);
  }

  /** SIGKILL now, after `signal` (max_memory_hard: the kernel frees memory only when it is gone). */
  killNow(slot: Slot): void {
    if (slot.pid !== undefined && slot.exit === undefined) (this.deps.killNow ?? killChildNow)(slot.pid);
  }

  /** Its exit is in: out of the live set; the shutdown wait may be over. */
  reap(slot: Slot, exit: WorkerExit): void {
    slot.exit = exit;
    this.slots.delete(slot);
    this.reapedAll();
  }

  private reapedAll(): void {
    if (this.allReaped !== undefined && this.slots.size === 0) {
      const r = this.allReaped;
      this.allReaped = undefined;
      r();
    }
  }

  /** Resolves once every live worker was reaped. */
  reaped(): Promise<void> {
    if (this.slots.size === 0) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const before = this.allReaped;
      this.allReaped = () => {
        before?.();
        resolve();
      };
    });
  }
}
