/**
 * What the status path costs the daemon, in-process and independent of the machine's
 * load: `--pools` idle ondemand pools, each with the memory part the daemon gives it (the
 * host governor, a fake /proc sampler: test/memory/helpers.ts) and one worker that served
 * one request and was measured; `--budget` gives the governor a memory_budget. Then, each
 * averaged over `--rounds` calls, CPU and bytes allocated by
 *  - takeSnapshot (the status every scrape, `fcgi-pm status` and dashboard sample takes),
 *  - one dashboard sample of this daemon: the snapshot, the chart points and the page's
 *    table rows with the ones that changed (src/dashboard: points.ts, rows.ts).
 * Prints figures, asserts nothing.
 *
 *   npx tsc -p . && node dist/bench/status-cost.js [--pools 200] [--rounds 200] [--budget]
 *
 * Bytes are read from the heap's use between two points with no collection between them:
 * the script runs itself again with a young generation large enough for that. CPU is
 * process.cpuUsage, V8's compiler threads included.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { OutcomeCounter } from '../src/control/outcomes.js';
import { PoolGenerations } from '../src/control/generations.js';
import { RequestBoard } from '../src/control/request-board.js';
import { takeSnapshot, type SnapshotSources } from '../src/control/snapshot.js';
import { mergeCluster } from '../src/dashboard/merge.js';
import { poolPoint, type PoolPoint } from '../src/dashboard/points.js';
import { SentRows, tableOf } from '../src/dashboard/rows.js';
import type { Pool } from '../src/pool/types.js';
import type { PoolStatus } from '../src/control/types.js';
import { MiB, world } from '../test/memory/helpers.js';

const SEMI = ['--min-semi-space-size=512', '--max-semi-space-size=512'];
if (!process.execArgv.includes(SEMI[0]!)) {
  const r = spawnSync(process.execPath, [...SEMI, fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const arg = (name: string, def: number): number => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
};
const POOLS = arg('--pools', 200);
const ROUNDS = arg('--rounds', 200);

const W = world(process.argv.includes('--budget') ? 4000 * MiB : undefined);
const pools = new Map<string, Pool>();
const board = new RequestBoard();
const outcomes = new OutcomeCounter();
for (let i = 0; i < POOLS; i++) {
  const p = W.pool(`site${i}`, { pm: 'ondemand', maxChildren: 2 });
  const [r] = p.send(1);
  board.add(r!.ex);
  W.clock.advance(200);
  p.setAll(20 * MiB);
  p.finishAll();
  outcomes.finished(r!.ex);
  board.finished(r!.ex);
  pools.set(`site${i}`, p.pool);
}
W.clock.advance(3000); // sampled since
// The fake clock stands still between calls; the wall clock must too, or every worker's start time moves.
const wallNow = Date.now();
Date.now = () => wallNow;
const src: SnapshotSources = {
  version: 'bench',
  pid: process.pid,
  startedAt: wallNow,
  state: () => 'running',
  configSource: () => 'bench',
  controlSocket: () => undefined,
  reloads: () => ({ ok: 0, failed: 0 }),
  listeners: () => [],
  pools: () => pools,
  generations: new PoolGenerations(),
  board,
  outcomes,
  memory: () => W.governor.snapshot(),
};

const sent = new SentRows();
const prev = new Map<string, { t: number; pool: PoolStatus }>();
/** What the dashboard does with this daemon's snapshot at each sample (sampler.ts read, server.ts events). */
async function sample(): Promise<unknown> {
  const snap = await takeSnapshot(src);
  const cluster = mergeCluster([{ id: 'self', kind: 'self', up: true, snapshot: snap }], wallNow);
  const points: Record<string, PoolPoint> = {};
  for (const p of snap.pools) {
    const key = `self\u0000${p.name}`;
    points[key] = poolPoint(prev.get(key), snap.daemon.now, p);
    prev.set(key, { t: snap.daemon.now, pool: p });
  }
  return sent.next(tableOf(cluster, points).rows);
}

async function measure(what: string, f: () => Promise<unknown>): Promise<void> {
  for (let i = 0; i < 300; i++) await f();
  gc();
  const keep: unknown[] = [];
  const before = getHeapStatistics().used_heap_size;
  const c0 = process.cpuUsage();
  for (let i = 0; i < ROUNDS; i++) keep.push(await f());
  const cpu = process.cpuUsage(c0);
  const bytes = (getHeapStatistics().used_heap_size - before) / ROUNDS;
  console.log(`${what}: ${((cpu.user + cpu.system) / ROUNDS / 1000).toFixed(2)} ms CPU, ${(bytes / 1024).toFixed(0)} KiB allocated (${Math.round(bytes / POOLS)} B a pool)`);
}

console.log(`${POOLS} idle ondemand pools of one measured worker${process.argv.includes('--budget') ? ', memory_budget set' : ''}, averages of ${ROUNDS} calls (node ${process.version}):`);
await measure('takeSnapshot', () => takeSnapshot(src));
await measure('one dashboard sample (snapshot, chart points, table rows)', sample);
process.exit(0);
