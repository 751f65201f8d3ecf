/**
 * A supervisor's record of one worker process as one table, s6-supervise style:
 * `SUPERVISOR_TABLE[state][event]` names the next state AND the action the supervisor
 * takes. Pure; supervisor.ts carries the actions out.
 *
 * What is true (`state`) is kept apart from what was asked: a worker retired while it
 * serves is `retiring` (its requests end first); a worker stopped is `stopping`.
 *
 *   starting --ready--> up --retire--> retiring --exit--> gone
 *   starting --exit--> gone (start_failed)        up|retiring --stop|kill--> stopping
 *   starting|up|retiring|stopping --killed--> gone (bury: replaced at once)
 *   up|retiring|stopping --suspect--> (same): hold; --grace--> (same): unhold
 *   starting|up|retiring|stopping --shutdown--> stopping (shut: the pool stops)
 *
 * The worker's own lifecycle (src/worker/lifecycle.ts: idle ⇄ busy, draining) is the
 * process side of the same story; this table is the pool's side: which actions it owes
 * the dispatcher, the crash guard and the scaling policy at each step.
 */

export type SlotState = 'starting' | 'up' | 'retiring' | 'stopping' | 'gone';
/**
 * `exit` is the process ending by itself or as asked; `killed` is its end by a signal
 * fcgi-pm did not send (exit-policy.ts `outside`): not a start failure even before ready.
 */
export type SlotEvent = 'ready' | 'retire' | 'stop' | 'kill' | 'exit' | 'killed' | 'suspect' | 'grace' | 'shutdown';

/**
 * offer        ready: count its spawn time, end the crash back-off, hand its slots to the dispatcher
 * retire       withdraw its idle slots, close idle connections, ask the process to retire
 *              (it finishes the requests it runs, then stops)
 * stop         answer the requests it runs, withdraw its slots, SIGTERM (SIGKILL after kill_timeout)
 * kill         as stop, then SIGKILL now (max_memory_hard: the kernel frees memory only when it is gone)
 * start_failed it exited before ready: count an early crash, log SPAWN_FAILED once, maybe refuse the queue
 * bury         it exited after ready, or was killed from outside at any time: count the exit
 *              (early ones only back off), hand its requests to failure handling, respawn
 *              what the mode wants
 * hold         a request of it failed in a way that may mean it is dying (`suspect`): wait
 *              EXIT_GRACE_MS for its exit (one timer per worker), so the client learns how it went
 * unhold       that wait is over and it did not exit (`grace`): its held failures are answered,
 *              or, when it is alive but unreachable, their requests go to another worker
 * shut         the pool stops (shutdown, or a reload that replaced it): close its idle
 *              connections and SIGTERM it (SIGKILL after kill_timeout); its requests were
 *              answered by the dispatcher, nothing is counted as a recycle, nothing respawned
 * none         nothing (the event changes nothing in this state)
 */
export type SlotAction = 'offer' | 'retire' | 'stop' | 'kill' | 'start_failed' | 'bury' | 'hold' | 'unhold' | 'shut' | 'none';

export interface Cell {
  readonly next: SlotState;
  readonly action: SlotAction;
}

export const SLOT_STATES: readonly SlotState[] = ['starting', 'up', 'retiring', 'stopping', 'gone'];
export const SLOT_EVENTS: readonly SlotEvent[] = ['ready', 'retire', 'stop', 'kill', 'exit', 'killed', 'suspect', 'grace', 'shutdown'];

const cell = (next: SlotState, action: SlotAction): Cell => Object.freeze({ next, action });
const same = (s: SlotState): Cell => cell(s, 'none');

export const SUPERVISOR_TABLE: Readonly<Record<SlotState, Readonly<Record<SlotEvent, Cell>>>> = {
  starting: { ready: cell('up', 'offer'), retire: cell('stopping', 'retire'), stop: cell('stopping', 'stop'), kill: cell('stopping', 'kill'), exit: cell('gone', 'start_failed'), killed: cell('gone', 'bury'), suspect: same('starting'), grace: same('starting'), shutdown: cell('stopping', 'shut') },
  up: { ready: same('up'), retire: cell('retiring', 'retire'), stop: cell('stopping', 'stop'), kill: cell('stopping', 'kill'), exit: cell('gone', 'bury'), killed: cell('gone', 'bury'), suspect: cell('up', 'hold'), grace: cell('up', 'unhold'), shutdown: cell('stopping', 'shut') },
  retiring: { ready: same('retiring'), retire: same('retiring'), stop: cell('stopping', 'stop'), kill: cell('stopping', 'kill'), exit: cell('gone', 'bury'), killed: cell('gone', 'bury'), suspect: cell('retiring', 'hold'), grace: cell('retiring', 'unhold'), shutdown: cell('stopping', 'shut') },
  stopping: { ready: same('stopping'), retire: same('stopping'), stop: same('stopping'), kill: cell('stopping', 'kill'), exit: cell('gone', 'bury'), killed: cell('gone', 'bury'), suspect: cell('stopping', 'hold'), grace: cell('stopping', 'unhold'), shutdown: cell('stopping', 'shut') },
  gone: { ready: same('gone'), retire: same('gone'), stop: same('gone'), kill: same('gone'), exit: same('gone'), killed: same('gone'), suspect: same('gone'), grace: same('gone'), shutdown: same('gone') },
};

/** A retiring or stopping worker still holds its place under max_children. */
export function isLive(s: SlotState): boolean {
  return s !== 'gone';
}
