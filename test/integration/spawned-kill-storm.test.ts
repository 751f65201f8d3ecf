/**
 * Fault test: workers killed from outside under load, with real php-cgi. Every 100 ms for
 * 10 s one random worker that has served a request (as the OOM killer or an operator would
 * find it) gets SIGKILL while 20 clients keep requesting a ~20 ms page. Each request is
 * answered, 200 or 502 only when it was on a killed worker; no 503 (the kills do not open
 * the crash breaker); and the pool is whole again soon after.
 */
import { test } from 'node:test';
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

const WORKERS = 5;
const CLIENTS = 20;
const STORM_MS = 10_000;
const KILL_EVERY_MS = 100;
/** A request still unanswered after this is taken as hung. */
const REQUEST_TIMEOUT_MS = 10_000;

test('kill -9 of a serving worker every 100 ms under load: only requests on killed workers fail, no 503, the pool refills', { timeout: 90_000 }, async (t) => {
  const dir = makeTempDir(t);
  const control = join(dir, 'control.sock');
  const port = await freePort();
  const daemon = await startDaemon(t, {
    control_socket: control,
    listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'app', document_root: PHP_FIXTURES }],
    // crash_limit / crash_window left at their defaults (5 in 60 s): the storm kills far more.
    pools: { app: { command: phpCommand(dir, 'storm-worker'), pm: 'static', max_children: WORKERS } },
    log: { level: 'info' },
  });
  const pool = async (): Promise<PoolStatus> => {
    const s = await controlRequest(control, { cmd: 'status' }, 5000);
    s.end();
    assert.ok(s.response.ok, JSON.stringify(s.response));
    return (s.response.result as StatusSnapshot).pools.find((p) => p.name === 'app')!;
  };
  const whole = async (): Promise<boolean> => {
    const p = await pool();
    return p.state === 'running' && p.processes.idle + p.processes.busy === WORKERS && p.processes.total === WORKERS;
  };
  await waitFor(whole, { timeout: 10_000, what: `${WORKERS} ready workers` });

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

  // The storm: pids from the status snapshot, each checked to be a live php-cgi below our
  // daemon (carrying this test's marker) right before the kill.
  const killed = new Set<number>();
  let idleTicks = 0;
  const start = Date.now();
  for (let tick = 1; tick <= STORM_MS / KILL_EVERY_MS; tick++) {
    await sleep(Math.max(0, start + tick * KILL_EVERY_MS - Date.now()));
    const served = (await pool()).workers.filter((w) => (w.state === 'idle' && w.requests >= 1) || (w.state === 'busy' && w.requests >= 2));
    const ours = new Set(workerPids(daemon, 'storm-worker'));
    const candidates = served.filter((w) => ours.has(w.pid) && !killed.has(w.pid));
    const victim = candidates[Math.floor(Math.random() * candidates.length)];
    if (victim === undefined) {
      idleTicks++;
      continue;
    }
    process.kill(victim.pid, 'SIGKILL');
    killed.add(victim.pid);
  }
  storming = false;
  await Promise.all(clients);

  const ok = statuses.get(200) ?? 0;
  const bad = statuses.get(502) ?? 0;
  t.diagnostic(`requests ${sent}, kills ${killed.size}, 200: ${ok}, 502: ${bad}, ticks without a served worker: ${idleTicks}, statuses ${JSON.stringify(Object.fromEntries(statuses))}`);
  assert.deepEqual(failures, [], 'every request answered in time');
  assert.equal(ok + bad, sent, `only 200 and 502: ${JSON.stringify(Object.fromEntries(statuses))}`);
  // A busy machine may skip ticks; a quarter of them is still a storm.
  assert.ok(killed.size >= STORM_MS / KILL_EVERY_MS / 4, `the storm killed ${killed.size} workers`);
  assert.ok(bad <= killed.size, `${bad} × 502 for ${killed.size} kills`);
  // Each 502 names the worker it ran on: one we killed.
  const access502 = daemon.logs.filter((l: LogLine) => l.kind === 'access' && l.status === 502);
  assert.equal(access502.length, bad);
  for (const l of access502) assert.ok(killed.has(l.worker as number), `502 from worker ${String(l.worker)}, not one we killed: ${JSON.stringify(l)}`);

  await waitFor(whole, { timeout: 2000, interval: 50, what: `the pool back to ${WORKERS} ready workers` });
  const after = await pool();
  assert.equal(after.rejected.failing, 0);
  assert.equal(after.rejected.queueTimeout + after.rejected.queueFull, 0);
  assert.equal(after.crashes, killed.size, 'every kill seen as a crash, none other');
});
