/**
 * A direct pool's process side: the Supervisor and its table run workers that accept
 * themselves, and accept-watch.ts reports what sampling /proc sees (a fake /proc here,
 * a fake clock, fake workers). Each of the direct workers' events is driven and checked
 * by what the pool does: sampled busy and idle, an exit after serving (recycling is no
 * crash), a kill from outside, the retire of a busy worker, and the measured scale-down
 * under a trickle.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { PoolConfig } from '../../src/config/types.js';
import { PoolStats } from '../../src/pool/stats.js';
import { buildWorkerSpec } from '../../src/pool/worker-spec.js';
import { AcceptWatch, SAMPLE_MS } from '../../src/pool/direct/accept-watch.js';
import { Supervisor, type SupervisorHooks } from '../../src/pool/workers/supervisor.js';
import { planMeasuredStops, type ScalingConfig } from '../../src/pool/workers/scaling.js';
import type { AcceptSample } from '../../src/worker/accept-state.js';
import { FakeClock } from './fake-clock.js';
import { FakeWorkerFactory } from './fake-worker.js';
import { poolConfig, recordingLogger } from './helpers.js';

/** What a fake /proc says of each pid: in accept(), or holding connection `conn`; cpu moves when it works. */
class FakeProc {
  private readonly state = new Map<number, AcceptSample>();
  accepting(pid: number): void {
    const s = this.get(pid);
    this.state.set(pid, { ...s, accepting: true, conn: undefined });
  }
  serving(pid: number, conn: number): void {
    const s = this.get(pid);
    this.state.set(pid, { ...s, accepting: false, conn, cpuNs: s.cpuNs + 1000 });
  }
  /** Served a request between two samples: CPU moved, back in accept(). */
  servedBetween(pid: number): void {
    const s = this.get(pid);
    this.state.set(pid, { ...s, accepting: true, conn: undefined, cpuNs: s.cpuNs + 1000 });
  }
  /** On its way to its first accept(): CPU moves, no connection. */
  startingUp(pid: number): void {
    const s = this.get(pid);
    this.state.set(pid, { ...s, accepting: false, conn: undefined, cpuNs: s.cpuNs + 1000 });
  }
  read = (pid: number): AcceptSample => this.get(pid);
  private get(pid: number): AcceptSample {
    return this.state.get(pid) ?? { gone: false, accepting: false, cpuNs: 0, conn: undefined };
  }
}

function setup(over: Partial<PoolConfig> = {}) {
  const cfg = poolConfig({ command: ['/usr/bin/php-cgi'], accept: 'direct', pm: 'ondemand', maxChildren: 4, idleTimeout: 2000, maxRequests: 500, ...over });
  const clock = new FakeClock();
  const wf = new FakeWorkerFactory(clock);
  wf.plan = { readyAfter: 0, exitAfterStop: 5 };
  const { logger, lines } = recordingLogger();
  const proc = new FakeProc();
  let waiting = 0;
  const slow: Array<{ pid: number; elapsedMs: number }> = [];
  const scaling: ScalingConfig = { pm: cfg.pm, maxChildren: cfg.maxChildren, startChildren: cfg.startChildren, minSpare: cfg.minSpare, maxSpare: cfg.maxSpare, maxSpawnRate: cfg.maxSpawnRate, idleTimeout: cfg.idleTimeout };
  const watch = new AcceptWatch({ clock, log: logger, scaling, requestTimeout: cfg.requestTimeout, slowRequest: cfg.slowRequest, onSlow: (_slot, pid, elapsedMs) => slow.push({ pid, elapsedMs }), waiting: () => waiting, read: proc.read });
  const hooks: SupervisorHooks = {
    waiting: () => waiting,
    poolState: () => 'running',
    seats: (slot) => [watch.seatFor(slot)],
    connect: () => undefined,
    offer: () => undefined,
    withdraw: () => undefined,
    cut: () => undefined,
    lost: () => undefined,
    unhold: () => true,
    refuseQueued: () => undefined,
    idleWorkers: () => [],
    pump: () => undefined,
    checkDrained: () => undefined,
  };
  const stats = new PoolStats();
  const sup = new Supervisor(cfg, {
    logger, clock, spec: buildWorkerSpec(cfg, '/tmp'), workerFactory: wf.create, workerLogger: logger, random: () => 0,
    counting: { served: 'sampled', selfRecycles: true }, acceptsItself: true,
  }, hooks, stats);
  watch.attach(sup, 1);
  /** One sampling round SAMPLE_MS later, as the pool's tick does. */
  const tick = (): void => {
    clock.advance(SAMPLE_MS);
    watch.look(true);
  };
  return { cfg, clock, wf, sup, watch, proc, stats, lines, slow, tick, setWaiting: (n: number) => (waiting = n) };
}

test('connections waiting beyond idle workers spawn workers; a sampled connection counts as a request, its end releases the worker', async () => {
  const e = setup();
  e.setWaiting(2);
  e.watch.look(false);
  assert.equal(e.sup.slots.size, 2, 'one worker per waiting connection');
  e.clock.advance(0);
  const [a, b] = [...e.sup.slots];
  e.setWaiting(0);
  e.proc.serving(a!.pid!, 101);
  e.proc.accepting(b!.pid!);
  e.tick();
  assert.deepEqual([a!.workerState, a!.requests, b!.workerState, b!.requests], ['busy', 1, 'idle', 0]);
  e.proc.serving(a!.pid!, 102);
  e.tick();
  assert.equal(a!.requests, 2, 'a new connection inode is a new request');
  e.proc.accepting(a!.pid!);
  e.tick();
  assert.equal(a!.workerState, 'idle');
});

test('a new worker still starting up (CPU moving, not yet in accept()) will take the waiting connection: no second spawn for it', () => {
  const e = setup();
  e.setWaiting(1);
  e.watch.look(false);
  e.clock.advance(0);
  const [a] = [...e.sup.slots];
  for (let i = 0; i < 3; i++) {
    e.proc.startingUp(a!.pid!);
    e.tick();
  }
  assert.equal(e.sup.slots.size, 1);
  assert.equal(a!.workerState, 'idle');
});

test('an exit 0 after PHP_FCGI_MAX_REQUESTS, with no request sampled, is a recycle: no crash, no back-off, replaced at once (static)', () => {
  const e = setup({ pm: 'static', maxChildren: 2 });
  void e.sup.start();
  e.clock.advance(0);
  assert.equal(e.sup.slots.size, 2);
  const first = [...e.sup.slots][0]!;
  // Seen once in accept(), then it served its 500 requests between two samples and exits by itself.
  for (const s of e.sup.slots) e.proc.accepting(s.pid!);
  e.tick();
  e.clock.advance(80);
  e.wf.workers[0]!.exit(0, null);
  assert.equal(e.stats.crashes, 0);
  assert.equal(e.sup.failing, false);
  assert.equal(e.sup.slots.size, 2, 'replaced in the same tick');
  assert.ok(!e.sup.slots.has(first));
  assert.equal(e.stats.recycles['max_requests'], 1);
  // Ten more in a row: still no crash, never fewer than two workers.
  for (let i = 0; i < 10; i++) {
    const w = e.wf.live[0]!;
    e.proc.accepting(w.pid!);
    e.watch.look(false);
    e.clock.advance(50);
    w.exit(0, null);
    assert.equal(e.sup.slots.size, 2);
  }
  assert.equal(e.stats.crashes, 0);
  assert.equal(e.sup.cannotServe(), false);
});

test('a kill from outside of a direct worker is replaced at once and counted, not as an early crash', () => {
  const e = setup({ pm: 'static', maxChildren: 1 });
  void e.sup.start();
  e.clock.advance(0);
  e.clock.advance(100);
  e.wf.workers[0]!.exit(null, 'SIGKILL');
  assert.equal(e.stats.crashes, 1);
  assert.equal(e.sup.slots.size, 1, 'replaced at once');
  assert.equal(e.sup.failing, false);
});

test('crashing workers with connections waiting: no worker alive, the pool cannot serve (status says failing)', () => {
  const e = setup({ pm: 'static', maxChildren: 1, crashLimit: 3 });
  void e.sup.start();
  e.setWaiting(3);
  e.clock.advance(0);
  e.wf.workers[0]!.exit(3, null);
  assert.equal(e.sup.slots.size, 0, 'backing off');
  assert.equal(e.sup.cannotServe(), true);
  e.setWaiting(0);
  assert.equal(e.sup.cannotServe(), false, 'nothing waits: an idle back-off is no outage');
});

test('a retired direct worker that is busy gets its SIGTERM at once (it cannot be withdrawn from the socket)', () => {
  const e = setup({ pm: 'static', maxChildren: 1 });
  void e.sup.start();
  e.clock.advance(0);
  const slot = [...e.sup.slots][0]!;
  e.proc.serving(slot.pid!, 7);
  e.tick();
  assert.equal(slot.workerState, 'busy');
  e.sup.retire(slot, 'max_lifetime');
  assert.deepEqual(e.wf.workers[0]!.stopCalls, ['max_lifetime']);
});

/** A static pool of one worker, started, on connection 9. */
function oneWorkerServing(over: Partial<PoolConfig>) {
  const e = setup({ pm: 'static', maxChildren: 1, ...over });
  void e.sup.start();
  e.clock.advance(0);
  const slot = [...e.sup.slots][0]!;
  e.proc.serving(slot.pid!, 9);
  return { e, slot };
}

test('request_timeout: a worker holding one connection too long is killed', () => {
  const { e, slot } = oneWorkerServing({ requestTimeout: 1000 });
  for (let i = 0; i < 7; i++) e.tick();
  assert.equal(slot.state, 'stopping');
  assert.equal(slot.reason, 'request_timeout');
  assert.ok(e.lines.some((l) => l['code'] === 'ERR_REQUEST_TIMEOUT'));
});

test('slow_request: a worker holding one connection longer is logged once for that connection, again for a slow next one', () => {
  const { e, slot } = oneWorkerServing({ slowRequest: 500 });
  e.tick();
  e.tick();
  assert.equal(e.slow.length, 0, 'not yet slow after 400 ms');
  for (let i = 0; i < 5; i++) e.tick();
  assert.equal(e.slow.length, 1, 'one line for the connection, however long it runs');
  assert.equal(e.slow[0]!.pid, slot.pid);
  assert.ok(e.slow[0]!.elapsedMs > 500);
  e.proc.serving(slot.pid!, 10);
  for (let i = 0; i < 4; i++) e.tick();
  assert.equal(e.slow.length, 2, 'the next slow connection has its own line');
  assert.equal(slot.state, 'up', 'slow is logged, not killed');
});

test('after a burst, a trickle that every worker serves in turn still shrinks the pool to what it needs (measured concurrency)', () => {
  const e = setup({ maxChildren: 4, idleTimeout: 2000 });
  // A burst: four connections at once, four workers, all busy.
  e.setWaiting(4);
  e.watch.look(false);
  e.clock.advance(0);
  e.setWaiting(0);
  const slots = [...e.sup.slots];
  assert.equal(slots.length, 4);
  slots.forEach((s, i) => e.proc.serving(s.pid!, 100 + i));
  e.tick();
  // Then a trickle: one request per sample, taken by the workers in turn (first-in
  // first-out, as accept() wakes them), so each one's own idle time stays short.
  let turn = 0;
  let t = 0;
  for (; t < 2 * 2000; t += SAMPLE_MS) {
    const live = [...e.sup.slots].filter((s) => s.state === 'up');
    for (const s of live) e.proc.accepting(s.pid!);
    const next = live[turn++ % live.length];
    if (next !== undefined) e.proc.servedBetween(next.pid!);
    e.tick();
    e.clock.advance(10); // exits of the stopped ones
  }
  const up = [...e.sup.slots].filter((s) => s.state === 'up').length;
  assert.equal(up, 1, `workers left after 2 × idle_timeout: ${up}`);
  assert.ok((e.stats.recycles['scale_down'] ?? 0) >= 3);
});

test('a worker started for a connection that waited beside a busy one is not scaled down at the next round: that moment is part of the peak', () => {
  const e = setup({ maxChildren: 4, idleTimeout: 2000 });
  e.setWaiting(1);
  e.watch.look(false);
  e.clock.advance(0);
  e.setWaiting(0);
  const [a] = [...e.sup.slots];
  // One long request, past idle_timeout: the rounds' window covers the span, its peak 1.
  e.proc.serving(a!.pid!, 101);
  for (let t = 0; t <= 2000; t += SAMPLE_MS) e.tick();
  // A second connection waits while it runs: a second worker, decided between rounds.
  e.setWaiting(1);
  e.watch.look(false);
  e.clock.advance(0);
  assert.equal(e.sup.slots.size, 2);
  const b = [...e.sup.slots].find((s) => s !== a)!;
  // By the next round both ended their requests and wait in accept() again.
  e.setWaiting(0);
  e.proc.accepting(a!.pid!);
  e.proc.servedBetween(b.pid!);
  e.tick();
  e.tick();
  assert.deepEqual([a!.state, b.state], ['up', 'up'], 'both workers kept within idle_timeout of the moment two were wanted');
  assert.equal(e.stats.recycles['scale_down'], undefined);
});

test('planMeasuredStops: keep the peak of the last idle_timeout (plus min_spare, dynamic); static and a window not yet covered never stop', () => {
  const cfg = (pm: ScalingConfig['pm'], minSpare = 0): ScalingConfig => ({ pm, maxChildren: 8, startChildren: 2, minSpare, maxSpare: 4, maxSpawnRate: 8, idleTimeout: 10_000 });
  // [pm, min_spare, live, idle, peak, covered, stop]
  const rows: Array<[ScalingConfig['pm'], number, number, number, number, boolean, number]> = [
    ['ondemand', 0, 4, 4, 0, true, 4],
    ['ondemand', 0, 4, 3, 1, true, 3],
    ['ondemand', 0, 4, 4, 1, true, 3],
    ['ondemand', 0, 4, 1, 1, true, 1],
    ['ondemand', 0, 4, 2, 3, true, 1],
    ['ondemand', 0, 4, 4, 4, true, 0],
    ['ondemand', 0, 4, 4, 0, false, 0],
    ['dynamic', 2, 6, 5, 1, true, 3],
    ['dynamic', 2, 3, 3, 0, true, 1],
    ['static', 0, 4, 4, 0, true, 0],
  ];
  for (const [pm, minSpare, live, idle, peak, covered, stop] of rows) {
    assert.equal(planMeasuredStops(cfg(pm, minSpare), { live, idle, peak, covered }), stop, JSON.stringify({ pm, minSpare, live, idle, peak, covered }));
  }
  assert.equal(planMeasuredStops({ ...cfg('ondemand'), idleTimeout: 0 }, { live: 4, idle: 4, peak: 0, covered: true }), 0, 'idle_timeout 0: never');
});
