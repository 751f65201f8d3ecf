/**
 * ArrivalTrend on simulated time: a queue that grows (open loop past capacity) is told
 * from one that stands (a closed loop) or was filled at once (a burst).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ArrivalTrend } from '../../src/pool/arrival-trend.js';

/** A pool of `seats` serving `serviceMs` pages; the simulation steps one service time at a time. */
interface Sim {
  trend: ArrivalTrend;
  now: number;
  /** Verdicts read at every step (true = growing). */
  verdicts: boolean[];
}

function sim(): Sim {
  return { trend: new ArrivalTrend(), now: 0, verdicts: [] };
}

/** One step of `serviceMs`: `arrive` requests offered, `complete` requests ended (spread over the step); `waiting`: requests queued at each. */
function step(s: Sim, serviceMs: number, arrive: number, complete: number, waiting = false): void {
  const n = Math.max(arrive, complete, 1);
  for (let i = 0; i < n; i++) {
    s.now += serviceMs / n;
    if (i < arrive) s.trend.arrival();
    if (i < complete) s.trend.completion(s.now, serviceMs, waiting);
  }
  s.verdicts.push(s.trend.growing(s.now, serviceMs));
}

test('a closed loop keeps its queue standing: 20 clients on 4 seats of 100 ms are never growing', () => {
  const s = sim();
  // All 20 clients at once (wrk, ab): the burst fills the queue...
  for (let i = 0; i < 20; i++) s.trend.arrival();
  // ...then each answer brings its client back, in batches as the 4 seats finish together.
  for (let t = 0; t < 200; t++) step(s, 100, 4, 4, true);
  assert.deepEqual(s.verdicts.filter(Boolean), []);
});

test('a closed loop whose clients come back late (in the next step) is never growing either', () => {
  const s = sim();
  for (let i = 0; i < 12; i++) s.trend.arrival();
  let pending = 4;
  for (let t = 0; t < 200; t++) {
    // Answers of this step come back as requests in the next; jitter in how many finish.
    const done = t % 3 === 0 ? 2 : t % 3 === 1 ? 4 : 6;
    step(s, 20, pending, done);
    pending = done;
  }
  assert.deepEqual(s.verdicts.filter(Boolean), []);
});

test('a burst that reaches the pool over several sub-windows while it starts workers does not begin a verdict, but a replacement does not end one', () => {
  // A loaded machine: 40 requests reach an ondemand pool of 2 running workers over 200 ms
  // (four sub-windows of 50 ms) while 6 more start; the 2 finish one every 20 ms each.
  const burst = (scaling: boolean): boolean[] => {
    const s = sim();
    for (let t = 0; t < 20; t++) step(s, 10, 1, 1);
    for (let t = 0; t < 20; t++) {
      for (let i = 0; i < 2; i++) s.trend.arrival(scaling);
      step(s, 10, 0, 1);
    }
    return s.verdicts.slice(20);
  };
  assert.ok(burst(false).some(Boolean), 'the same arrivals with every seat up read as growth');
  assert.deepEqual(burst(true).filter(Boolean), [], 'not while workers start');
  // An open loop at 2x, seen; then one worker is replaced while it lasts: still growing.
  const s = sim();
  for (let t = 0; t < 40; t++) step(s, 10, 8, 4);
  assert.equal(s.verdicts.at(-1), true);
  for (let t = 0; t < 20; t++) {
    for (let i = 0; i < 8; i++) s.trend.arrival(true);
    step(s, 10, 0, 4);
  }
  assert.deepEqual(s.verdicts.slice(-20).filter((v) => !v), [], 'a replacement under an overload does not end it');
});

test('a burst is queued whole: many requests at once, then arrivals no faster than completions, or none at all while it drains', () => {
  const s = sim();
  for (let t = 0; t < 20; t++) step(s, 25, 2, 2);
  for (let i = 0; i < 500; i++) s.trend.arrival();
  for (let t = 0; t < 40; t++) step(s, 25, 1, 2, true);
  assert.deepEqual(s.verdicts.filter(Boolean), []);
  // Bursts with silence between them, each drained before the next: never growing.
  const q = sim();
  for (let b = 0; b < 10; b++) {
    for (let i = 0; i < 60; i++) q.trend.arrival();
    for (let t = 0; t < 29; t++) step(q, 25, 0, 2, true);
    step(q, 25, 0, 2, false);
    for (let t = 0; t < 10; t++) step(q, 25, 0, 0);
  }
  assert.deepEqual(q.verdicts.filter(Boolean), []);
});

test('sub-windows without an arrival while requests wait (a stalled front end) count neither way: lumps that outrun completions are growth', () => {
  const s = sim();
  for (let t = 0; t < 20; t++) step(s, 20, 4, 4);
  // 2× on 4 seats of 20 ms, arriving as 120 at once every 300 ms (3 sub-windows).
  for (let t = 0; t < 75; t++) {
    if (t % 15 === 0) for (let i = 0; i < 120; i++) s.trend.arrival();
    step(s, 20, 0, 4, true);
  }
  assert.equal(s.verdicts.at(-1), true);
});

for (const factor of [1.5, 2, 10]) {
  test(`an open loop at ${factor}× capacity is growing within four sub-windows, and stays so`, () => {
    const s = sim();
    for (let t = 0; t < 10; t++) step(s, 25, 4, 4);
    // Arrivals come whatever happens to them; the seats still finish 4 per step.
    for (let t = 0; t < 100; t++) step(s, 25, Math.round(4 * factor), 4);
    const first = s.verdicts.indexOf(true);
    assert.ok(first >= 10, 'not growing before the overload');
    // Sub-windows of 5 service times: growth seen in 3 of them, plus the one in progress.
    assert.ok(first - 10 <= 4 * 5, `growing after ${first - 10} steps`);
    assert.deepEqual(s.verdicts.slice(first).filter((v) => !v), [], 'growing as long as the overload lasts');
  });
}

test('the verdict ends with the overload: three whole quiet sub-windows and it is standing again, two are not enough', () => {
  const s = sim();
  for (let t = 0; t < 40; t++) step(s, 25, 8, 4);
  assert.equal(s.verdicts.at(-1), true);
  // Sub-windows of 125 ms. Two quiet ones (a front end that stalled on a loaded machine,
  // the queue drained) and the overload again: held, not seen again only 3 sub-windows later.
  for (let t = 0; t < 10; t++) step(s, 25, 4, 4);
  for (let t = 0; t < 10; t++) step(s, 25, 8, 4);
  assert.deepEqual(s.verdicts.slice(-20).filter((v) => !v), [], 'held across two quiet sub-windows');
  // Three whole ones lie within four of them, 20 steps of 25 ms.
  for (let t = 0; t < 20; t++) step(s, 25, 4, 4);
  assert.equal(s.verdicts.at(-1), false);
});

test('an overload of 1.1× is left to queue_timeout: it is not told from noise', () => {
  const s = sim();
  for (let t = 0; t < 200; t++) step(s, 10, t % 10 === 0 ? 11 : 10, 10);
  assert.deepEqual(s.verdicts.filter(Boolean), []);
});

test('an idle spell counts as sub-windows without growth', () => {
  const s = sim();
  for (let t = 0; t < 40; t++) step(s, 25, 8, 4);
  assert.equal(s.verdicts.at(-1), true);
  s.now += 10_000;
  assert.equal(s.trend.growing(s.now, 25), false);
});

test('the drain rate is the completions over the last sub-windows, and 0 while too few are counted to judge', () => {
  const s = sim();
  // 4 seats of 20 ms, saturated: 4 completions per step, for 1 s.
  for (let t = 0; t < 50; t++) step(s, 20, 6, 4);
  const rate = s.trend.drainRate(s.now, 20, 4);
  assert.ok(Math.abs(rate - 4 / 20) < 0.02, `0.2 a ms: ${rate}`);
  // Half the completions from now on: the rate follows within the history (4 × 100 ms).
  for (let t = 0; t < 25; t++) step(s, 20, 6, 2);
  const halved = s.trend.drainRate(s.now, 20, 4);
  assert.ok(Math.abs(halved - 2 / 20) < 0.015, `0.1 a ms: ${halved}`);
  // A pool that has just started: too few completions to judge.
  const fresh = sim();
  step(fresh, 20, 1, 1);
  assert.equal(fresh.trend.drainRate(fresh.now, 20, 4), 0);
});

test('a growth once seen holds while arrivals still outrun completions (1.1×), and ends when they no longer do', () => {
  const s = sim();
  // 2× on 4 seats of 20 ms: seen.
  for (let t = 0; t < 25; t++) step(s, 20, 8, 4);
  assert.equal(s.verdicts.at(-1), true);
  // 1.1×: 11 arrivals for 10 completions, never a fifth more, always more.
  s.verdicts.length = 0;
  for (let t = 0; t < 50; t++) step(s, 20, t % 2 === 0 ? 5 : 6, 5);
  assert.deepEqual(s.verdicts.filter((v) => !v), [], 'held throughout');
  // Arrivals below completions: the queue drains, the verdict ends within the history.
  s.verdicts.length = 0;
  for (let t = 0; t < 25; t++) step(s, 20, 3, 4);
  assert.equal(s.verdicts.at(-1), false);
});

test('a growth once seen also holds while the queue is long, even with arrivals no faster than completions; a short queue lets it end', () => {
  const run = (long: boolean): boolean[] => {
    const s = sim();
    for (let t = 0; t < 25; t++) step(s, 20, 8, 4);
    assert.equal(s.verdicts.at(-1), true);
    // Arrivals meet completions (as at the bound of a loaded machine, where the excess
    // that reaches the daemon swings): the queue stands where it was.
    const verdicts: boolean[] = [];
    for (let t = 0; t < 25; t++) {
      for (let i = 0; i < 4; i++) s.trend.arrival();
      for (let i = 0; i < 4; i++) s.trend.completion((s.now += 5), 20);
      verdicts.push(s.trend.growing(s.now, 20, long));
    }
    return verdicts;
  };
  assert.deepEqual(run(true).filter((v) => !v), [], 'held while the queue is long');
  assert.equal(run(false).at(-1), false, 'ended once arrivals no longer outrun completions');
});

test('a stall of the daemon\'s loop (nothing counted for 3 sub-windows, then all that waited) does not end a growth, and a long idle does', () => {
  const s = sim();
  // 2× on 2 seats of 25 ms (sub-windows of 125 ms).
  for (let t = 0; t < 40; t++) step(s, 25, 4, 2);
  assert.equal(s.verdicts.at(-1), true);
  // 400 ms without an event, then what arrived and finished meanwhile, counted at once.
  s.now += 400;
  step(s, 25, 64, 32);
  for (let t = 0; t < 3; t++) step(s, 25, 4, 2);
  assert.deepEqual(s.verdicts.slice(-4), [true, true, true, true], 'still growing after the stall');
  // 2 s with nothing: the pool was idle; a burst after it is not taken for the old growth.
  s.now += 2000;
  step(s, 25, 30, 2);
  assert.equal(s.verdicts.at(-1), false);
});

/**
 * Steps of `stepMs` in which `arrive` requests are offered and `complete` end, the pool
 * reporting `serviceMs` as its mean service time (which rises when its workers are short of
 * CPU, while the steps stay as long): the verdict at each step.
 */
function run(s: Sim, steps: number, stepMs: number, serviceMs: number, arrive: number, complete: number, waiting = true): boolean[] {
  const out: boolean[] = [];
  for (let t = 0; t < steps; t++) {
    const n = Math.max(arrive, complete, 1);
    for (let i = 0; i < n; i++) {
      s.now += stepMs / n;
      if (i < arrive) s.trend.arrival(false, s.now);
      if (i < complete) s.trend.completion(s.now, serviceMs, waiting);
    }
    out.push(s.trend.growing(s.now, serviceMs));
  }
  return out;
}

test('an overload that outruns the pool by far (the workers starved of CPU as it begins) is growing by the end of the next sub-window, not three', () => {
  const s = sim();
  // 4 seats of 10 ms (sub-windows of 50 ms), at capacity with room to spare.
  run(s, 20, 10, 10, 3, 3, false);
  // 2× what the seats served, and they now finish one page a step: the front end's and the
  // daemon's work for the overload took their CPU.
  const v = run(s, 40, 10, 10, 8, 1);
  const first = v.indexOf(true);
  // The sub-window it began in and one whole one of 5 steps (3 sub-windows before: 12 steps).
  assert.ok(first >= 0 && first < 10, `growing after ${first + 1} steps`);
  assert.deepEqual(v.slice(first).filter((x) => !x), [], 'and stays so');
});

test('while the pool is saturated its sub-windows do not lengthen: starved workers\' longer service times do not hold the verdict back', () => {
  const s = sim();
  run(s, 20, 10, 10, 3, 3, false);
  // 1.5× (not a surge), and the mean service time the pool reports climbs 5× (workers short
  // of CPU): sub-windows of 5 service times would grow from 50 to 250 ms.
  const v = run(s, 100, 10, 50, 6, 4);
  const first = v.indexOf(true);
  assert.ok(first >= 0 && first < 20, `growing after ${first + 1} steps of 10 ms`);
  // Once the pool is no longer saturated (a completion finds no one waiting), the span
  // follows the service time again: at 50 ms a page, a growth takes 3 sub-windows of 250 ms.
  const t = sim();
  run(t, 20, 10, 10, 3, 3, false);
  run(t, 60, 10, 50, 1, 1, false);
  const later = run(t, 100, 10, 50, 6, 4);
  assert.ok(later.indexOf(true) >= 50, `sub-windows of 250 ms again: growing after ${later.indexOf(true) + 1} steps`);
});

test('a closed loop whose workers slow down 4× under its standing queue is never growing (no surge: arrivals follow completions)', () => {
  const s = sim();
  for (let i = 0; i < 20; i++) s.trend.arrival();
  const v = [...run(s, 50, 10, 10, 4, 4), ...run(s, 100, 10, 40, 1, 1), ...run(s, 50, 10, 40, 0, 0, true), ...run(s, 50, 10, 10, 4, 4)];
  assert.deepEqual(v.filter(Boolean), []);
});

test('a burst that reaches the pool across the border of two sub-windows is not a surge, wherever the border falls', () => {
  for (let offset = 0; offset < 50; offset += 2) {
    const s = sim();
    run(s, 20, 10, 10, 3, 3, false);
    s.now += offset;
    // 200 requests within 4 ms, then the pool serves them as its clients come back.
    for (let i = 0; i < 200; i++) s.trend.arrival(false, (s.now += 0.02));
    const v = run(s, 60, 10, 10, 3, 3);
    assert.deepEqual(v.filter(Boolean), [], `the burst ${offset} ms after the warm-up`);
  }
});
