/**
 * A worker's state in its pool, as one table, s6-supervise style:
 * `SUPERVISOR_TABLE[state][event]` names the next state AND the action the supervisor
 * takes. Pure; supervisor.ts carries the actions out. It is the one place a worker's
 * state is kept: the process handle (src/worker/worker.ts) has none, and whether it is
 * busy is its seats' business (a seat runs a request or not), never a second state.
 *
 * What is true (`state`) is kept apart from what was asked (`Slot.reason`, s6's "want"):
 * a worker retired while it serves is `retiring` and goes once its last request ends
 * (`idle`: drained); a worker stopped is `stopping`.
 *
 *   starting --ready--> up --retire--> retiring --idle--> retiring (drained) --exit--> gone
 *   starting --exit--> gone (start_failed)        up|retiring --stop|kill--> stopping
 *   starting|up|retiring|stopping --killed--> gone (bury: replaced at once)
 *   up|retiring|stopping --suspect--> (same): hold; --grace--> (same): unhold
 *   starting|up|retiring|stopping --shutdown--> stopping (shut: the pool stops)
 *   up --handover--> gone (hand_on: an exec in place of the daemon; the new code adopts it)
 *
 * What operators see of it (`workerState`: spawning, idle, busy, draining, stopping,
 * exited) is read from the state and the seats, never stored.
 */
import type { RetireReason } from '../../worker/types.js';

/**
 * A failure that may mean the worker is dying waits this long for the exit event, and a
 * request whose worker exited this long for the endpoint's report. The exit usually
 * comes within milliseconds.
 */
export const EXIT_GRACE_MS = 250;

export type SlotState = 'starting' | 'up' | 'retiring' | 'stopping' | 'gone';
/**
 * `exit` is the process ending by itself or as asked; `killed` is its end by a signal
 * fcgi-pm did not send (exit-policy.ts `outside`): not a start failure even before ready.
 */
export type SlotEvent = 'ready' | 'retire' | 'stop' | 'kill' | 'idle' | 'exit' | 'killed' | 'suspect' | 'grace' | 'shutdown' | 'handover';

/**
 * offer        ready: count its spawn time, end the crash back-off, hand its slots to the dispatcher
 * retire       withdraw its idle seats, close idle connections; SIGTERM now when no seat
 *              runs a request (an idle php-cgi: SIGKILL, WorkerSpec.killIdle), else it
 *              finishes them first (`idle`: drained)
 * stop         answer the requests it runs, withdraw its slots, SIGTERM (SIGKILL after kill_timeout)
 * kill         as stop, then SIGKILL now (max_memory_hard: the kernel frees memory only when it is gone)
 * drained      the last request of a retired worker ended (`idle`): close its kept-alive
 *              connections (a php-cgi waiting on one would sit out SIGTERM), SIGTERM it
 *              (SIGKILL after kill_timeout; an idle php-cgi: SIGKILL at once)
 * start_failed it exited before ready: count an early crash, log SPAWN_FAILED once, maybe refuse the queue
 * bury         it exited after ready, or was killed from outside at any time: count the exit
 *              (early ones only back off), hand its requests to failure handling, respawn
 *              what the mode wants
 * hold         a request of it failed in a way that may mean it is dying (`suspect`): wait
 *              EXIT_GRACE_MS for its exit (one timer per worker), so the client learns how it went
 * unhold       that wait is over and it did not exit (`grace`): its held failures are answered,
 *              or, when it is alive but unreachable, their requests go to another worker
 * shut         the pool stops (shutdown, or a reload that replaced it): close its idle
 *              connections and SIGTERM it (SIGKILL after kill_timeout; an idle php-cgi:
 *              SIGKILL at once); its requests were
 *              answered by the dispatcher, nothing is counted as a recycle, nothing respawned
 * hand_on      the pool stops for an exec in place of the daemon and the idle worker goes on
 *              in the new code (its process handle gave its record: Worker.handOver): its
 *              seats withdrawn, its idle connections closed, out of the live set and the
 *              memory part, not signalled; only an idle worker that is up is handed on
 *              (the others get `shutdown`), so in any other state it changes nothing
 * none         nothing (the event changes nothing in this state)
 */
export type SlotAction = 'offer' | 'retire' | 'stop' | 'kill' | 'drained' | 'start_failed' | 'bury' | 'hold' | 'unhold' | 'shut' | 'hand_on' | 'none';

export interface Cell {
  readonly next: SlotState;
  readonly action: SlotAction;
}

export const SLOT_STATES: readonly SlotState[] = ['starting', 'up', 'retiring', 'stopping', 'gone'];
export const SLOT_EVENTS: readonly SlotEvent[] = ['ready', 'retire', 'stop', 'kill', 'idle', 'exit', 'killed', 'suspect', 'grace', 'shutdown', 'handover'];

const cell = (next: SlotState, action: SlotAction): Cell => Object.freeze({ next, action });
const same = (s: SlotState): Cell => cell(s, 'none');

export const SUPERVISOR_TABLE: Readonly<Record<SlotState, Readonly<Record<SlotEvent, Cell>>>> = {
  starting: { ready: cell('up', 'offer'), retire: cell('stopping', 'retire'), stop: cell('stopping', 'stop'), kill: cell('stopping', 'kill'), idle: same('starting'), exit: cell('gone', 'start_failed'), killed: cell('gone', 'bury'), suspect: same('starting'), grace: same('starting'), shutdown: cell('stopping', 'shut'), handover: same('starting') },
  up: { ready: same('up'), retire: cell('retiring', 'retire'), stop: cell('stopping', 'stop'), kill: cell('stopping', 'kill'), idle: same('up'), exit: cell('gone', 'bury'), killed: cell('gone', 'bury'), suspect: cell('up', 'hold'), grace: cell('up', 'unhold'), shutdown: cell('stopping', 'shut'), handover: cell('gone', 'hand_on') },
  retiring: { ready: same('retiring'), retire: same('retiring'), stop: cell('stopping', 'stop'), kill: cell('stopping', 'kill'), idle: cell('retiring', 'drained'), exit: cell('gone', 'bury'), killed: cell('gone', 'bury'), suspect: cell('retiring', 'hold'), grace: cell('retiring', 'unhold'), shutdown: cell('stopping', 'shut'), handover: same('retiring') },
  stopping: { ready: same('stopping'), retire: same('stopping'), stop: same('stopping'), kill: cell('stopping', 'kill'), idle: same('stopping'), exit: cell('gone', 'bury'), killed: cell('gone', 'bury'), suspect: cell('stopping', 'hold'), grace: cell('stopping', 'unhold'), shutdown: cell('stopping', 'shut'), handover: same('stopping') },
  gone: { ready: same('gone'), retire: same('gone'), stop: same('gone'), kill: same('gone'), idle: same('gone'), exit: same('gone'), killed: same('gone'), suspect: same('gone'), grace: same('gone'), shutdown: same('gone'), handover: same('gone') },
};

/** A retiring or stopping worker still holds its place under max_children. */
export function isLive(s: SlotState): boolean {
  return s !== 'gone';
}

/**
 * A worker's state as status shows it, read from its table state and its seats:
 * spawning → idle ⇄ busy → draining (retired, still serving) → stopping → exited.
 * `failedToStart`: it timed out or exited before ready (it is stopping meanwhile).
 */
export type WorkerState = 'spawning' | 'idle' | 'busy' | 'draining' | 'stopping' | 'exited';

export function workerState(state: SlotState, busySeats: number, failedToStart: boolean): WorkerState {
  switch (state) {
    case 'starting':
      return failedToStart ? 'stopping' : 'spawning';
    case 'up':
      return busySeats > 0 ? 'busy' : 'idle';
    case 'retiring':
      return busySeats > 0 ? 'draining' : 'stopping';
    case 'stopping':
      return 'stopping';
    case 'gone':
      return 'exited';
  }
}

/**
 * Whether `event` with `reason` replaces the reason a worker is wanted gone for. The
 * first reason asked is kept, except that a stop of a worker still serving after its
 * retire (a forced stop: request_timeout, memory_hard, shutdown) is what ends it.
 */
export function replacesReason(state: SlotState, current: RetireReason | undefined, event: SlotEvent, busySeats: number): boolean {
  if (state === 'gone' || state === 'stopping') return false;
  if (event !== 'retire' && event !== 'stop' && event !== 'kill' && event !== 'shutdown') return false;
  if (current === undefined) return true;
  return state === 'retiring' && busySeats > 0 && (event === 'stop' || event === 'kill' || event === 'shutdown');
}
