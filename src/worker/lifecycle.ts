/**
 * A worker's lifecycle as one table: (state × event) → next state. Pure.
 *
 * What is true (`state`) is kept apart from what was asked (`reason`, s6's "want"):
 * a busy worker retired for max_requests stays busy-but-draining until its request ends.
 *
 *   spawning --ready--> idle --assign--> busy --release--> idle
 *   idle --retire--> stopping            busy --retire--> draining --release--> stopping
 *   spawning --spawn_timeout|retire|stop--> stopping
 *   any live state --stop--> stopping     any live state --exit--> exited
 *
 * `release` after stopping/exited is legal and changes nothing: a request may end (its
 * connection closed by the dying process) just before or after the exit is seen.
 * `retire`/`stop` once stopping or exited change nothing either (stop is idempotent).
 */
import type { RetireReason, WorkerState } from './types.js';

export type LifecycleEvent = 'ready' | 'assign' | 'release' | 'retire' | 'stop' | 'spawn_timeout' | 'exit';

export const LIFECYCLE_EVENTS: readonly LifecycleEvent[] = ['ready', 'assign', 'release', 'retire', 'stop', 'spawn_timeout', 'exit'];
export const WORKER_STATES: readonly WorkerState[] = ['spawning', 'idle', 'busy', 'draining', 'stopping', 'exited'];

type Row = Partial<Record<LifecycleEvent, WorkerState>>;

/** The table. A missing cell is an illegal transition. */
export const TRANSITIONS: Readonly<Record<WorkerState, Readonly<Row>>> = {
  spawning: { ready: 'idle', retire: 'stopping', stop: 'stopping', spawn_timeout: 'stopping', exit: 'exited' },
  idle: { assign: 'busy', retire: 'stopping', stop: 'stopping', exit: 'exited' },
  busy: { release: 'idle', retire: 'draining', stop: 'stopping', exit: 'exited' },
  draining: { release: 'stopping', retire: 'draining', stop: 'stopping', exit: 'exited' },
  stopping: { release: 'stopping', retire: 'stopping', stop: 'stopping', exit: 'exited' },
  exited: { release: 'exited', retire: 'exited', stop: 'exited' },
};

/** Illegal transitions are bugs in the caller; they throw outside production. */
export const LIFECYCLE_STRICT = process.env['NODE_ENV'] !== 'production';

export class LifecycleError extends Error {
  readonly state: WorkerState;
  readonly event: LifecycleEvent;
  constructor(state: WorkerState, event: LifecycleEvent) {
    const legal = Object.keys(TRANSITIONS[state]).join(', ') || 'none';
    super(`illegal worker transition: "${event}" in state "${state}" (legal there: ${legal})`);
    this.name = 'LifecycleError';
    this.state = state;
    this.event = event;
  }
}

export interface Lifecycle {
  readonly state: WorkerState;
  readonly reason: RetireReason | undefined;
}

/** The next state, or undefined when the event is illegal in that state. */
export function nextState(state: WorkerState, event: LifecycleEvent): WorkerState | undefined {
  return TRANSITIONS[state][event];
}

/**
 * Applies one event. `reason` is for retire/stop. Throws LifecycleError when illegal.
 * Reason rule: the first reason asked is kept, except that `stop` on a draining worker
 * replaces it (a forced stop, e.g. request_timeout, is what actually ends the process).
 */
export function transition(cur: Lifecycle, event: LifecycleEvent, reason?: RetireReason): Lifecycle {
  const state = TRANSITIONS[cur.state][event];
  if (state === undefined) throw new LifecycleError(cur.state, event);
  let r = cur.reason;
  if (event === 'spawn_timeout') r = 'spawn_timeout';
  else if ((event === 'retire' || event === 'stop') && cur.state !== 'stopping' && cur.state !== 'exited') {
    if (r === undefined || (event === 'stop' && cur.state === 'draining')) r = reason ?? r;
  }
  return state === cur.state && r === cur.reason ? cur : { state, reason: r };
}

/** Every legal transition as [from, event, to], for tests and docs. */
export function listTransitions(): Array<[WorkerState, LifecycleEvent, WorkerState]> {
  const out: Array<[WorkerState, LifecycleEvent, WorkerState]> = [];
  for (const s of WORKER_STATES) {
    for (const e of LIFECYCLE_EVENTS) {
      const to = TRANSITIONS[s][e];
      if (to !== undefined) out.push([s, e, to]);
    }
  }
  return out;
}
