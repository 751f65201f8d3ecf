/**
 * How long a worker's spawn holds the daemon's main thread, for docs/BENCHMARKS.md: the
 * time around the call, Node's child_process.spawn (libuv forks: the page tables of the
 * whole process are copied, then it waits for the exec) beside the addon's spawnUnforked
 * (a vfork-style clone: no copy, the wait for the exec only), alternated in one run, from
 * the process as it starts and again after it touched --grow MiB more (a daemon with many
 * pools). Each spawn runs the death guard's wrap of /bin/true with daemon-made pipes, as a
 * worker's spawn does. Prints figures, asserts nothing.
 *
 *   npx tsc -p . && node scripts/build-native.mjs && node dist/bench/spawn-block.js [--spawns 40] [--grow 200]
 */
import { closeSync } from 'node:fs';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { defaultDeathGuard } from '../src/worker/death-guard.js';
import { handOverAddon } from '../src/worker/exec-addon.js';
import { spawnUnforked, startProcess, type StartOptions } from '../src/worker/spawn.js';
import type { WorkerSpec } from '../src/worker/types.js';
import { watchChild } from '../src/worker/reaper.js';

const arg = (name: string, def: number): number => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
};
const SPAWNS = arg('--spawns', 40);
const GROW = arg('--grow', 200);
const addon = handOverAddon();
if (addon === undefined || typeof addon.spawn !== 'function') throw new Error('the addon is not built: node scripts/build-native.mjs');
const guard = defaultDeathGuard();
const spec = { env: { PATH: '/usr/bin:/bin' }, cwd: undefined, uid: undefined, gid: undefined } as unknown as WorkerSpec;

async function once(way: 'fork' | 'unforked'): Promise<number> {
  const out = addon!.pipeForChild();
  const o: StartOptions & { output: [number, number] } = { spec, file: '/bin/true', args: [], fd0: undefined, guard, output: [out[1], out[1]] };
  let exited!: () => void;
  const done = new Promise<void>((r) => (exited = r));
  const t0 = performance.now();
  if (way === 'fork') startProcess(o).on('exit', () => exited());
  else watchChild(spawnUnforked(o)!, () => exited());
  const ms = performance.now() - t0;
  closeSync(out[1]);
  closeSync(out[0]);
  await done;
  return ms;
}

const pct = (xs: number[], p: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;
const fmt = (xs: number[]): string => `p50 ${pct(xs, 0.5).toFixed(2)} ms, p90 ${pct(xs, 0.9).toFixed(2)} ms, max ${Math.max(...xs).toFixed(2)} ms`;

async function round(label: string): Promise<void> {
  const t: Record<'fork' | 'unforked', number[]> = { fork: [], unforked: [] };
  for (let i = 0; i < SPAWNS; i++) for (const way of i % 2 === 0 ? (['fork', 'unforked'] as const) : (['unforked', 'fork'] as const)) t[way].push(await once(way));
  const rss = Math.round(process.memoryUsage().rss / 2 ** 20);
  console.log(`${label} (RSS ${rss} MiB, load ${loadavg()[0]!.toFixed(2)}, ${SPAWNS} spawns each, guard ${guard.mode}):`);
  console.log(`  child_process.spawn (fork)   ${fmt(t.fork)}`);
  console.log(`  addon spawn (vfork clone)    ${fmt(t.unforked)}`);
}

await round('as started');
const hold: Buffer[] = [];
for (let i = 0; i < GROW; i++) hold.push(Buffer.alloc(2 ** 20, 1));
await round(`after ${GROW} MiB more`);
void hold;
