/**
 * Work held to the end of the socket callback that is running (a "turn"): the request
 * path's socket listeners open a turn around their handler, and what asks for the
 * turn's end inside it runs once the handler returns, as a process.nextTick would, but
 * without the tick queue (a tick object, Node's tick loop and its microtask and promise
 * rejection checks: about 1 µs a request on the proxied path). Asked outside a turn
 * (a timer, a promise), it is a process.nextTick.
 *
 * A turn ends before ticks its handler queued run: nothing held here may wait for them.
 * It also reads the clock once (turnNow).
 */

// Imported: in an ES module the global `performance` is an accessor, a call on every read.
import { performance } from 'node:perf_hooks';
import { clearArray } from './clear-array.js';

/** What runs at the end of the turn; asked for once until it ran (its owner keeps the flag). */
export interface TurnEnd {
  endOfTurn(): void;
}

let depth = 0;
const due: TurnEnd[] = [];
/** The turn's time (performance.now()), read on first use in it; -1 until then. */
let stamp = -1;

function runOne(t: TurnEnd): void {
  t.endOfTurn();
}

/** `t.endOfTurn()` runs at the end of this turn, or on the next tick outside one. */
export function atTurnEnd(t: TurnEnd): void {
  if (depth > 0) due.push(t);
  else process.nextTick(runOne, t);
}

/** Opens a turn (a socket listener, before its handler); every open has its close. */
export function openTurn(): void {
  depth++;
}

/** Closes the turn opened last; the outermost close runs what is due, in the order it was asked. */
export function closeTurn(): void {
  if (--depth > 0) return;
  stamp = -1;
  if (due.length === 0) return;
  depth++; // what runs now and asks again is held for this loop, not a tick
  let i = 0;
  try {
    for (; i < due.length; i++) due[i]!.endOfTurn();
  } finally {
    // One that threw: the rest still run, on the next tick.
    for (let j = i + 1; j < due.length; j++) process.nextTick(runOne, due[j]!);
    clearArray(due);
    depth--;
    stamp = -1;
  }
}

/**
 * performance.now(), read once a turn: the request path reads the time a dozen times
 * while it handles one chunk (the exchange's start, the queue, the seat, the timers, the
 * counters), each a call into the runtime; within one socket callback they all get the
 * time it was first read. Outside a turn, the time now.
 */
export function turnNow(): number {
  if (depth === 0) return performance.now();
  if (stamp < 0) stamp = performance.now();
  return stamp;
}
