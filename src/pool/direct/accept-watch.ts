/**
 * The request side of an `accept: direct` pool: its workers accept on the pool's socket
 * themselves, so what they do is read from /proc (worker/accept-state.ts) and reported
 * to the process side (workers/supervisor.ts) through `LoadReport`, the same calls a
 * dispatcher makes when it hands a worker a request:
 *
 *   working    a worker seen at work for the first time (in accept() or on a connection):
 *              only then has a failing pool recovered
 *   assigned   a new connection seen on a worker (the one request count: a lower bound,
 *              a request that starts and ends between two samples is not seen)
 *   released   a worker seen back in accept() after a connection (a retired one may go)
 *   retire     idle workers beyond what the measured concurrency needs
 *              (planMeasuredStops: the scale-down rule that works under a trickle)
 *   kill       a worker holding one connection for longer than request_timeout
 *   slow       a worker holding one connection for longer than slow_request (once a connection)
 *   scale      after each look: spawn for connections waiting beyond idle workers
 *
 * Each worker has one `DirectSeat` (a SeatView): busy while it holds a connection (or
 * runs without being in accept()), idle while it is blocked in accept().
 */
import { ErrorCodes, ProxyError } from '../../errors.js';
import type { Logger } from '../../log/log.js';
import { readAcceptState, type AcceptSample } from '../../worker/accept-state.js';
import type { RetireReason } from '../../worker/types.js';
import type { Clock } from '../../util/clock.js';
import { WindowMax } from '../../util/window-max.js';
import { planMeasuredStops, type ScalingConfig } from '../workers/scaling.js';
import type { SeatView, SlotView } from '../workers/slot.js';

/** How often each worker's /proc state is read: stops land within this of their due time. */
export const SAMPLE_MS = 200;

/** What the request side tells the process side (the Supervisor implements it). */
export interface LoadReport {
  working(slot: SlotView): void;
  assigned(slot: SlotView): void;
  released(slot: SlotView): void;
  wentIdle(now: number): void;
  retire(slot: SlotView, reason: RetireReason): void;
  kill(slot: SlotView, reason: RetireReason, err: ProxyError): void;
  scale(): void;
  readonly slots: ReadonlySet<SlotView>;
}

/** One worker's only seat, as sampling sees it. */
export class DirectSeat implements SeatView {
  busy = false;
  busySince = 0;
  inIdle = false;
  idleSince = 0;
  readonly current = undefined;
  /** /proc/PID/syscall could not be read (not root, another user's worker). */
  unknown = false;
  cpuNs = -1;
  /** The connection it serves (socket inode), since connSince. */
  conn: number | undefined;
  connSince = 0;
  /** The connection already logged as slow. */
  slowConn: number | undefined;
}

export interface AcceptWatchDeps {
  clock: Clock;
  log: Logger;
  scaling: ScalingConfig;
  requestTimeout: number;
  /** slow_request (0 = off) and what logs one: a connection held longer, once each. */
  slowRequest: number;
  onSlow: (slot: SlotView, pid: number, elapsedMs: number) => void;
  /** Connections waiting in the socket's accept queue. */
  waiting: () => number;
  /** Reads a worker's state (tests may read a fake /proc). */
  read?: (pid: number, listenIno: number) => AcceptSample;
}

export class AcceptWatch {
  private readonly d: AcceptWatchDeps;
  private readonly read: (pid: number, listenIno: number) => AcceptSample;
  private readonly seats = new WeakMap<SlotView, DirectSeat>();
  private readonly peak: WindowMax;
  private report: LoadReport | undefined;
  private listenIno = 0;

  constructor(deps: AcceptWatchDeps) {
    this.d = deps;
    this.read = deps.read ?? readAcceptState;
    this.peak = new WindowMax(Math.max(0, deps.scaling.idleTimeout));
  }

  /** The process side it reports to, and the socket's inode the workers accept on. */
  attach(report: LoadReport, listenIno: number): void {
    this.report = report;
    this.listenIno = listenIno;
  }

  /** A new worker's seat (SupervisorHooks.seats). */
  seatFor(slot: SlotView): DirectSeat {
    const seat = new DirectSeat();
    this.seats.set(slot, seat);
    return seat;
  }

  seat(slot: SlotView): DirectSeat | undefined {
    return this.seats.get(slot);
  }

  /**
   * Reads every worker's state now. `full`: a sampling round (CPU, request_timeout, the
   * stops of the measured concurrency); otherwise only idle or busy and the concurrency,
   * before a spawn decision.
   */
  look(full: boolean): void {
    const r = this.report;
    if (r === undefined) return;
    const now = this.d.clock.now();
    let active = 0;
    let idleLive = 0;
    let live = 0;
    const idle: Array<{ slot: SlotView; seat: DirectSeat }> = [];
    for (const slot of r.slots) {
      const seat = this.seats.get(slot);
      const pid = slot.pid;
      if (seat === undefined || pid === undefined || slot.state === 'starting' || slot.state === 'gone') continue;
      const s = this.read(pid, this.listenIno);
      if (s.gone) continue;
      const worked = seat.cpuNs >= 0 && s.cpuNs !== seat.cpuNs;
      seat.cpuNs = s.cpuNs;
      seat.unknown = s.accepting === undefined;
      if (s.accepting === true) this.idle(slot, seat, now);
      else if (s.conn !== undefined) this.busy(slot, seat, s.conn, now);
      // Running outside accept() without a connection: busy if it served before; a new
      // worker on its way to its first accept() is still one that will take a connection.
      else if (s.accepting === false && worked && seat.idleSince > 0) this.busy(slot, seat, undefined, now);
      if (seat.busy || worked) active++;
      if (slot.state !== 'up') continue;
      live++;
      if (seat.inIdle) {
        idleLive++;
        idle.push({ slot, seat });
      }
      if (full && this.d.requestTimeout > 0 && seat.conn !== undefined && now - seat.connSince > this.d.requestTimeout) {
        slot.log.warn({ code: ErrorCodes.REQUEST_TIMEOUT, wpid: pid, requestTimeout: this.d.requestTimeout }, `worker ${pid} ran one request for over request_timeout (${this.d.requestTimeout} ms): killed`);
        r.kill(slot, 'request_timeout', new ProxyError(ErrorCodes.REQUEST_TIMEOUT, 504, `request_timeout (${this.d.requestTimeout} ms)`));
      } else if (full && this.d.slowRequest > 0 && seat.conn !== undefined && seat.slowConn !== seat.conn && now - seat.connSince > this.d.slowRequest) {
        seat.slowConn = seat.conn;
        this.d.onSlow(slot, pid, now - seat.connSince);
      }
    }
    // Every look, not only the rounds: the look before a spawn decision may be the one
    // moment a connection waited beside the busy workers, and the worker started for it
    // must not go at the next round as surplus.
    this.peak.record(now, active + this.d.waiting());
    if (full) this.stopSurplus(idle, live, idleLive, now);
    r.scale();
  }

  private idle(slot: SlotView, seat: DirectSeat, now: number): void {
    seat.conn = undefined;
    if (seat.inIdle) return;
    if (seat.idleSince === 0) this.report!.working(slot);
    const wasBusy = seat.busy;
    seat.busy = false;
    seat.inIdle = true;
    seat.idleSince = now;
    if (wasBusy) this.report!.released(slot);
    this.report!.wentIdle(now);
  }

  private busy(slot: SlotView, seat: DirectSeat, conn: number | undefined, now: number): void {
    if (!seat.busy) {
      seat.busy = true;
      seat.busySince = now;
    }
    seat.inIdle = false;
    if (conn !== undefined && conn !== seat.conn) {
      if (slot.requests === 0) this.report!.working(slot);
      seat.conn = conn;
      seat.connSince = now;
      this.report!.assigned(slot);
    }
  }

  /** The measured scale-down (planMeasuredStops): idle workers beyond the peak go, the longest idle first. */
  private stopSurplus(idle: Array<{ slot: SlotView; seat: DirectSeat }>, live: number, idleLive: number, now: number): void {
    const stop = planMeasuredStops(this.d.scaling, { live, idle: idleLive, peak: this.peak.max(now), covered: this.peak.covers(now) });
    if (stop <= 0) return;
    idle.sort((a, b) => a.seat.idleSince - b.seat.idleSince);
    // Nothing at all for idle_timeout is an idle stop; less work than workers, a scale-down.
    const reason = this.peak.max(now) === 0 ? 'idle_timeout' : 'scale_down';
    for (const { slot, seat } of idle.slice(0, stop)) {
      // Read again right before the stop: a worker that took a connection since would get
      // the SIGTERM mid-request (php-cgi finishes it, but a sleep in the script is cut short).
      const s = this.read(slot.pid!, this.listenIno);
      if (s.accepting !== true || s.cpuNs !== seat.cpuNs) continue;
      this.report!.retire(slot, reason);
    }
  }
}
