/**
 * What a beat of the pools' memory sampling rounds costs the daemon's JavaScript, with
 * memory_budget set: --pools spawned pools with one busy worker each (read every round),
 * on the memory tests' harness (fake workers and clock, a sampler whose reads cost
 * nothing, so the figure is the rounds' own work: timers, the caps, the host budget
 * check), --beats beats of 1 s. Prints the budget checks and the CPU (process.cpuUsage)
 * per beat, with rounds that read synchronously and with rounds whose reads resolve as
 * promises (as the /proc sampler's do). Prints figures, asserts nothing.
 *
 *   npx tsc -p . && node dist/bench/memory-rounds.js [--pools 200] [--beats 200] [--baseline DIR]
 *
 * --baseline DIR: another built checkout (its dist/test/memory/helpers.js), run in turn
 * with this one, twice, for a before/after in the same minutes.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1]! : def;
}

const POOLS = Number(arg('--pools', '200'));
const BEATS = Number(arg('--beats', '200'));
const BASELINE = process.argv.includes('--baseline') ? arg('--baseline', '') : undefined;
/** Set in the child that measures: the checkout whose harness it loads. */
const ROOT = process.env.MEMORY_ROUNDS_ROOT;

interface Harness {
  MiB: number;
  world(budget?: number): {
    clock: { advance(ms: number): void };
    sampler: object;
    governor: { checkBudget(): void };
    pool(name: string): { pool: { start(): Promise<void> }; send(n: number): unknown; setAll(bytes: number): void };
  };
}

async function measure(root: string, asyncReads: boolean): Promise<string> {
  const { world, MiB } = (await import(`${root}/dist/test/memory/helpers.js`)) as Harness;
  const W = world(100_000 * MiB);
  if (asyncReads) Object.defineProperty(W.sampler, 'syncRounds', { value: false });
  let checks = 0;
  const check = W.governor.checkBudget.bind(W.governor);
  W.governor.checkBudget = () => {
    checks++;
    check();
  };
  const pools = [];
  for (let i = 0; i < POOLS; i++) {
    const p = W.pool(`p${i}`);
    await p.pool.start();
    p.send(1);
    pools.push(p);
  }
  W.clock.advance(10);
  for (const p of pools) p.setAll(20 * MiB);
  const beat = async (): Promise<void> => {
    W.clock.advance(1000);
    await new Promise((r) => setImmediate(r)); // the reads' promises settle
  };
  for (let k = 0; k < 20; k++) await beat(); // warm-up: compiled and optimised
  checks = 0;
  const c0 = process.cpuUsage();
  for (let k = 0; k < BEATS; k++) await beat();
  const c = process.cpuUsage(c0);
  return `${(checks / BEATS).toFixed(1)} budget checks, ${((c.user + c.system) / 1000 / BEATS).toFixed(2)} ms CPU a beat`;
}

if (ROOT !== undefined) {
  const sync = await measure(ROOT, false);
  const promised = await measure(ROOT, true);
  console.log(`${ROOT}: synchronous reads ${sync}; reads as promises ${promised}`);
  process.exit(0);
} else {
  const here = fileURLToPath(new URL('../..', import.meta.url)).replace(/\/$/, '');
  console.log(`${POOLS} pools with one busy worker each, memory_budget set, ${BEATS} beats of 1 s`);
  const roots = BASELINE === undefined ? [here] : [BASELINE, here, BASELINE, here];
  // Each run in a fresh process: one build's optimised code does not carry into the other's.
  for (const root of roots) spawnSync(process.execPath, [fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: 'inherit', env: { ...process.env, MEMORY_ROUNDS_ROOT: root } });
}
