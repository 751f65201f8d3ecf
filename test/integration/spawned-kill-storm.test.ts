/**
 * Fault tests: workers killed from outside under load, with real php-cgi. Every 100 ms
 * for 10 s one random worker gets SIGKILL while 20 clients, each on a fresh connection
 * per request, keep asking for a ~20 ms page. A kill from outside (the OOM killer, an
 * operator's kill -9) is not the application crashing: each request is answered, 200 or
 * 502 only when it was on a killed worker (at most one per kill); no 503 (the kills do
 * not open the crash breaker nor back restarts off); and the pool is whole soon after.
 *
 * The static pool's victims have served (killed mid-life); the ondemand pool's are any
 * live worker, fresh ones before their first request or before they were ready included.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { controlRequest } from '../../src/control/client.js';
import type { PoolStatus, StatusSnapshot } from '../../src/control/types.js';
import { startDaemon, type LogLine } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { phpCommand, workerPids } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { sleep, waitFor } from '../helpers/wait.js';

const CLIENTS = 20;
const STORM_MS = 10_000;
const KILL_EVERY_MS = 100;
/** A request still unanswered after this is taken as hung. */
const REQUEST_TIMEOUT_MS = 10_000;
const MARKER = 'storm-worker';

interface Storm {
  pool: Record<string, unknown>;
  /** Which live workers of ours (pids) may be killed at a tick. */
  victims(p: PoolStatus, ours: Set<number>): number[];
  /** The pool after the storm, once whole. */
  whole(p: PoolStatus, ours: number[]): boolean;
}

async function storm(t: TestContext, s: Storm): Promise<void> {
  const dir = makeTempDir(t);
  const control = join(dir, 'control.sock');
  const port = await freePort();
  const daemon = await startDaemon(t, {
    control_socket: control,
    listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'app', document_root: PHP_FIXTURES }],
    // crash_limit / crash_window left at their defaults (5 in 60 s): the storm kills far more.
    pools: { app: { command: phpCommand(dir, MARKER), ...s.pool } },
    log: { level: 'info' },
  });
  const pool = async (): Promise<PoolStatus> => {
    const r = await controlRequest(control, { cmd: 'status' }, 5000);
    r.end();
    assert.ok(r.response.ok, JSON.stringify(r.response));
    return (r.response.result as StatusSnapshot).pools.find((p) => p.name === 'app')!;
  };
  const whole = async (): Promise<boolean> => s.whole(await pool(), workerPids(daemon, MARKER));
  await waitFor(whole, { timeout: 10_000, what: 'the pool ready' });

  const statuses = new Map<number, number>();
  const failures: string[] = [];
  let sent = 0;
  let storming = true;
  const client = async (): Promise<void> => {
    while (storming) {
      sent++;
      try {
        const r = await httpRequest(`http://127.0.0.1:${port}/sleep.php?ms=20`, { timeout: REQUEST_TIMEOUT_MS });
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      } catch (e) {
        failures.push((e as Error).message);
      }
    }
  };
  const clients = Array.from({ length: CLIENTS }, client);

  // The storm: each victim checked to be a live php-cgi below our daemon (carrying this
  // test's marker) right before the kill.
  const killed = new Set<number>();
  let idleTicks = 0;
  const start = Date.now();
  for (let tick = 1; tick <= STORM_MS / KILL_EVERY_MS; tick++) {
    await sleep(Math.max(0, start + tick * KILL_EVERY_MS - Date.now()));
    const p = await pool();
    const ours = new Set(workerPids(daemon, MARKER));
    const candidates = s.victims(p, ours).filter((pid) => ours.has(pid) && !killed.has(pid));
    const victim = candidates[Math.floor(Math.random() * candidates.length)];
    if (victim === undefined) {
      idleTicks++;
      continue;
    }
    process.kill(victim, 'SIGKILL');
    killed.add(victim);
  }
  storming = false;
  await Promise.all(clients);

  const ok = statuses.get(200) ?? 0;
  const bad = statuses.get(502) ?? 0;
  t.diagnostic(`requests ${sent}, kills ${killed.size}, 200: ${ok}, 502: ${bad}, ticks without a victim: ${idleTicks}, statuses ${JSON.stringify(Object.fromEntries(statuses))}`);
  assert.deepEqual(failures, [], 'every request answered in time');
  assert.equal(ok + bad, sent, `only 200 and 502: ${JSON.stringify(Object.fromEntries(statuses))}`);
  // A busy machine may skip ticks; a quarter of them is still a storm.
  assert.ok(killed.size >= STORM_MS / KILL_EVERY_MS / 4, `the storm killed ${killed.size} workers`);
  assert.ok(bad <= killed.size, `${bad} × 502 for ${killed.size} kills`);
  // Each 502 names the worker it ran on: one we killed, and no worker twice. The daemon's
  // access lines come through its stdout pipe and may trail the last answers: all of them first.
  const accessLines = (): number => daemon.logs.filter((l: LogLine) => l.kind === 'access').length;
  await waitFor(() => accessLines() >= sent, { timeout: 5000, interval: 20, what: `an access line for each of the ${sent} requests` });
  assert.equal(accessLines(), sent);
  const access502 = daemon.logs.filter((l: LogLine) => l.kind === 'access' && l.status === 502);
  assert.equal(access502.length, bad);
  const on = new Set<number>();
  for (const l of access502) {
    assert.ok(killed.has(l.worker as number), `502 from worker ${String(l.worker)}, not one we killed: ${JSON.stringify(l)}`);
    assert.ok(!on.has(l.worker as number), `two 502s for the kill of worker ${String(l.worker)}`);
    on.add(l.worker as number);
  }

  await waitFor(whole, { timeout: 2000, interval: 50, what: 'the pool whole again' });
  const after = await pool();
  assert.equal(after.rejected.failing, 0);
  assert.equal(after.rejected.queueTimeout + after.rejected.queueFull, 0);
  assert.equal(after.crashes, killed.size, 'every kill seen as a crash, none other');
  assert.equal(daemon.findLog((l) => l.code === 'ERR_POOL_FAILING' || l.code === 'ERR_SPAWN_FAILED'), undefined, 'no breaker, no start failure: the kills came from outside');
  assert.equal((await httpRequest(`http://127.0.0.1:${port}/sleep.php?ms=1`, { timeout: REQUEST_TIMEOUT_MS })).status, 200, 'the pool serves after the storm');
}

test('kill -9 of a serving worker every 100 ms under load: only requests on killed workers fail, no 503, the pool refills', { timeout: 90_000 }, async (t) => {
  const WORKERS = 5;
  await storm(t, {
    pool: { pm: 'static', max_children: WORKERS },
    // As the OOM killer or an operator would find them: workers that have served.
    victims: (p) => p.workers.filter((w) => (w.state === 'idle' && w.requests >= 1) || (w.state === 'busy' && w.requests >= 2)).map((w) => w.pid),
    whole: (p) => p.state === 'running' && p.processes.idle + p.processes.busy === WORKERS && p.processes.total === WORKERS,
  });
});

test('kill -9 of any ondemand worker, fresh ones too, every 100 ms under load: no 503, no back-off, the pool refills', { timeout: 90_000 }, async (t) => {
  await storm(t, {
    pool: { pm: 'ondemand', max_children: 8 },
    // Fresh workers first (still starting, or before their first request ended: the
    // replacements of earlier victims), else any live one.
    victims: (p, ours) => {
      const served = new Set(p.workers.filter((w) => w.requests >= 1).map((w) => w.pid));
      const fresh = [...ours].filter((pid) => !served.has(pid));
      return fresh.length > 0 ? fresh : [...ours];
    },
    // Every live php-cgi of ours is a ready worker of the pool, and none is still starting.
    whole: (p, ours) =>
      p.state === 'running' && p.processes.spawning === 0 && p.processes.total === ours.length && p.processes.idle + p.processes.busy === ours.length,
  });
});
