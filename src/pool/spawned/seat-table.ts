/**
 * A dispatcher's record of one seat (one request place on a worker) as one table, in the
 * style of supervisor-table.ts: `SEAT_TABLE[state][event]` names the next state AND the
 * action the dispatcher takes. Pure; dispatcher.ts carries the actions out.
 *
 *   closed --free--> free --assign--> running --outcome--> closed
 *   closed --assign--> running                  free --withdraw--> closed
 *   running --suspect--> held --exit--> closed (the held failure, told how the worker went)
 *                        held --grace--> closed (it lives: answered, or replaced if unreachable)
 *   running --exit--> ending --outcome|suspect--> closed (the endpoint's own report)
 *                     ending --exit_grace--> ending (its endpoint is closed, which reports)
 *   running|held|ending --cut--> closed
 *
 * The failure report and the worker's exit race: whichever comes first waits up to
 * EXIT_GRACE_MS for the other, so the request is answered knowing how the worker went.
 * A held failure waits on the supervisor's one timer per worker (its table's `suspect` →
 * hold, `grace` → unhold, which fires `grace` here); a request whose worker exited under
 * it waits on the seat's own timer (`ending` → `exit_grace`).
 */

/**
 * closed   no request and not on the idle stack: its worker is starting, retiring,
 *          stopping or gone, or the request just ended
 * free     on the idle stack, waiting for a request
 * running  its request is on the worker's endpoint
 * held     the endpoint failed in a way that may mean the worker is dying: the failure
 *          waits for the worker's exit (or the supervisor's grace)
 * ending   the worker exited under its request: waits for the endpoint's report
 */
export type SeatState = 'closed' | 'free' | 'running' | 'held' | 'ending';

/**
 * free        no request waits for it and its worker takes requests
 * assign      a request is given to it
 * withdraw    its worker takes no more requests (retire, stop, exit)
 * outcome     the endpoint reports its request's end (done, aborted, or a failure that
 *             says nothing about the worker)
 * suspect     the endpoint reports a failure that may mean the worker is dying (connect
 *             refused, closed before the response: retryable or BACKEND_CLOSED)
 * exit        its worker exited
 * grace       the supervisor's wait for the worker's exit is over and the worker lives
 * exit_grace  its own wait for the endpoint's report after the exit is over
 * cut         its request is answered with an error now (the worker is being stopped,
 *             or the pool shuts down)
 */
export type SeatEvent = 'free' | 'assign' | 'withdraw' | 'outcome' | 'suspect' | 'exit' | 'grace' | 'exit_grace' | 'cut';

/**
 * list          onto the idle stack (its top: used first), the idle timer told
 * unlist        off the idle stack
 * take          off the idle stack, then run
 * run           count it on the worker, start its timers, hand the request to the endpoint
 * end           the request is over: answer by the outcome (after an exit: a request that
 *               never reached the application goes to another worker, else WORKER_CRASHED
 *               or WORKER_OOM_KILLED), then the seat takes the next request, or its
 *               worker is recycled
 * hold          keep the failure, ask the supervisor to wait EXIT_GRACE_MS for the exit
 * answer_held   end with the held failure, now that the exit is known
 * give_up       the worker lives: a plain failure is answered; a worker alive but
 *               unreachable (retryable) is replaced and the request goes to another worker
 * await_report  wait EXIT_GRACE_MS for the endpoint's report (it says best whether the
 *               request reached the application; a dead process's sockets close at once)
 * close         close the worker's endpoint, which reports; no report: end as closed
 * cut           answer the request with the error
 * none          nothing (the event changes nothing in this state)
 */
export type SeatAction = 'list' | 'unlist' | 'take' | 'run' | 'end' | 'hold' | 'answer_held' | 'give_up' | 'await_report' | 'close' | 'cut' | 'none';

export interface SeatCell {
  readonly next: SeatState;
  readonly action: SeatAction;
}

export const SEAT_STATES: readonly SeatState[] = ['closed', 'free', 'running', 'held', 'ending'];
export const SEAT_EVENTS: readonly SeatEvent[] = ['free', 'assign', 'withdraw', 'outcome', 'suspect', 'exit', 'grace', 'exit_grace', 'cut'];

export { EXIT_GRACE_MS } from '../workers/supervisor-table.js';

const cell = (next: SeatState, action: SeatAction): SeatCell => Object.freeze({ next, action });
const same = (s: SeatState): SeatCell => cell(s, 'none');

export const SEAT_TABLE: Readonly<Record<SeatState, Readonly<Record<SeatEvent, SeatCell>>>> = {
  closed: { free: cell('free', 'list'), assign: cell('running', 'run'), withdraw: same('closed'), outcome: same('closed'), suspect: same('closed'), exit: same('closed'), grace: same('closed'), exit_grace: same('closed'), cut: same('closed') },
  free: { free: same('free'), assign: cell('running', 'take'), withdraw: cell('closed', 'unlist'), outcome: same('free'), suspect: same('free'), exit: same('free'), grace: same('free'), exit_grace: same('free'), cut: same('free') },
  running: { free: same('running'), assign: same('running'), withdraw: same('running'), outcome: cell('closed', 'end'), suspect: cell('held', 'hold'), exit: cell('ending', 'await_report'), grace: same('running'), exit_grace: same('running'), cut: cell('closed', 'cut') },
  held: { free: same('held'), assign: same('held'), withdraw: same('held'), outcome: same('held'), suspect: same('held'), exit: cell('closed', 'answer_held'), grace: cell('closed', 'give_up'), exit_grace: same('held'), cut: cell('closed', 'cut') },
  ending: { free: same('ending'), assign: same('ending'), withdraw: same('ending'), outcome: cell('closed', 'end'), suspect: cell('closed', 'end'), exit: same('ending'), grace: same('ending'), exit_grace: cell('ending', 'close'), cut: cell('closed', 'cut') },
};
