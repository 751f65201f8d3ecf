/**
 * `fcgi-pm tune -c FILE --pool NAME TARGET`: runs the pool from that config at growing
 * sizes (each in its own `fcgi-pm run` child, pm static, listening where TARGET points),
 * measures each with the bench engine and recommends a max_children (src/bench/tune.ts).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command } from 'commander';
import type { DaemonChild } from '../bench/daemon-child.js';
import { memAvailable } from '../bench/proc-info.js';
import type { TuneResult } from '../bench/tune.js';
import { doublingSizes } from '../bench/tune-plan.js';
import type { BenchTarget } from '../bench/target.js';
import type { KeySpec } from '../config/key-spec.js';
import { LIMITS_KEYS, LISTENER_KEYS, POOL_KEYS, TOP_KEYS } from '../config/keys.js';
import { loadConfig } from '../config/load.js';
import type { Config, ListenerConfig, PoolConfig } from '../config/types.js';
import { parseDuration, parseSize } from '../config/units.js';
import { BenchUsageError, benchOptionsFrom, type BenchCliOptions } from './bench.js';
import { EXIT_FAILURE, EXIT_USAGE, reportError } from './report.js';

interface TuneCliOptions extends BenchCliOptions {
  config: string;
  pool?: string;
  max: string;
  sizes?: string;
  step: string;
  runs: string;
  maxRuns: string;
  spread: string;
  memoryBudget?: string;
  tolerance: string;
  allowRoot?: boolean;
}

const collect = (value: string, previous: string[]): string[] => [...previous, value];

/** A validated value back in file form (durations as "Nms", addresses as text). */
function fileValue(spec: KeySpec, v: unknown): unknown {
  switch (spec.type.kind) {
    case 'duration':
      return `${v as number}ms`;
    case 'address':
      return (v as { text: string }).text;
    case 'addresses':
      return (v as Array<{ text: string }>).map((a) => a.text);
    case 'mode':
      return `0${(v as number).toString(8)}`;
    default:
      return v;
  }
}

function section(specs: readonly KeySpec[], obj: object, skip: (spec: KeySpec) => boolean = () => false): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const rec = obj as Record<string, unknown>;
  for (const spec of specs) {
    const v = rec[spec.field];
    if (v === undefined || skip(spec)) continue;
    out[spec.key] = fileValue(spec, v);
  }
  return out;
}

/**
 * The config a tune step runs: only the pool under test, pm static at `size` workers,
 * one listener where the target points (taking document_root, index and params from a
 * listener of that pool with the same protocol, if the file has one), quiet logs.
 * Built from the validated config, so relative paths are already absolute.
 */
export function tuneConfigObject(cfg: Config, pool: PoolConfig, target: BenchTarget, size: number): Record<string, unknown> {
  const p = section(POOL_KEYS, pool, (s) => s.scope === 'external' || ['pm', 'max_children', 'start_children', 'min_spare', 'max_spare'].includes(s.key));
  p.pm = 'static';
  p.max_children = size;
  const model: ListenerConfig | undefined = cfg.listen.find((l) => l.pool === pool.name && l.protocol === target.protocol);
  const listener: Record<string, unknown> = model === undefined ? {} : section(LISTENER_KEYS, model, (s) => s.key === 'mode' || (s.scope === 'http' && target.protocol !== 'http'));
  listener.protocol = target.protocol;
  listener.address = target.address.text;
  listener.pool = pool.name;
  const obj: Record<string, unknown> = {
    listen: [listener],
    pools: { [pool.name]: p },
    limits: section(LIMITS_KEYS, cfg.limits),
    log: { level: 'warn', access: false },
    shutdown_timeout: '5s',
  };
  const top = section(TOP_KEYS, cfg, (s) => s.key !== 'runtime_dir');
  Object.assign(obj, top);
  return obj;
}

function positiveInt(name: string, v: string): number {
  if (!/^\d+$/.test(v) || Number(v) < 1) throw new BenchUsageError(`${name} must be a whole number ≥ 1, got ${JSON.stringify(v)}`);
  return Number(v);
}

function intList(name: string, v: string): number[] {
  const out = v.split(',').map((x) => positiveInt(name, x.trim()));
  return [...new Set(out)].sort((a, b) => a - b);
}

const BIN = fileURLToPath(new URL('../../../bin/fcgi-pm', import.meta.url));

export function tuneCommand(): Command {
  return new Command('tune')
    .description('find a pool size: run the pool at 1, 2, 4... workers, measure throughput, p99 and memory, recommend max_children')
    .argument('<target>', 'where to send the load, e.g. fcgi://127.0.0.1:9000/index.php (the tuned pool listens there)')
    .requiredOption('-c, --config <file>', 'config file holding the pool')
    .option('--pool <name>', 'pool to tune (default: the only pool)')
    .option('--max <n>', 'largest pool size tried', String(Math.max(4, 2 * availableParallelism())))
    .option('--sizes <list>', 'pool sizes to try instead of 1, 2, 4... up to --max, e.g. 2,3,4,6')
    .option('--concurrency <list>', 'concurrency levels at every size (default: size, 2×size, 4×size)')
    .option('--step <duration>', 'how long each measurement runs', '5s')
    .option('--runs <n>', 'run each step at least this many times (req/s is their median)', '3')
    .option('--max-runs <n>', 'and again while the runs spread more than --spread, up to this many', '8')
    .option('--spread <percent>', 'spread of req/s ((max − min) / median) that is good enough', '10')
    .option('--warmup <duration>', 'load before measuring each size, not counted', '1s')
    .option('--memory-budget <size>', 'memory all workers may use together, e.g. 2GiB (default: MemAvailable now)')
    .option('--tolerance <percent>', 'a size within this much of the best throughput is at the knee', '5')
    .option('--method <method>', 'request method (default GET, or POST with --body-file)')
    .option('--body-file <file>', 'send this file as the request body')
    .option('--param <name=value>', 'FastCGI/SCGI request variable; repeatable', collect, [])
    .option('-H, --header <header>', '"Name: value" request header; repeatable', collect, [])
    .option('--no-keep-alive', 'a new connection per request (default: keep-alive, as nginx with fastcgi_keep_conn)')
    .option('--timeout <duration>', 'per-request timeout', '30s')
    .option('--json', 'print the measurements and the recommendation as JSON')
    .option('-R, --allow-root', 'passed to run: as root, a pool without "user" may run its workers as root')
    .addHelpText(
      'after',
      `
Each size runs "fcgi-pm run" with a generated config: only this pool, pm static,
max_children = size, and one listener at TARGET's address (so TARGET must be free).
Memory per worker is PSS (/proc/PID/smaps_rollup; RSS where that is missing), sampled
in the middle of each step. See docs/bench.md for how to read the table.

Example:
  fcgi-pm tune -c /etc/fcgi-pm/fcgi-pm.yaml --pool php --max 16 \\
    --param DOCUMENT_ROOT=/var/www/html fcgi://127.0.0.1:9900/index.php
`,
    )
    .action(async (targetUrl: string, o: TuneCliOptions) => {
      let cfg: Config;
      try {
        cfg = loadConfig(o.config);
      } catch (err) {
        process.exitCode = reportError(err);
        return;
      }
      let setup;
      try {
        setup = tuneSetup(targetUrl, o, cfg);
      } catch (err) {
        if (!(err instanceof BenchUsageError)) throw err;
        process.stderr.write(`fcgi-pm tune: ${err.message}\n(see fcgi-pm tune --help)\n`);
        process.exitCode = EXIT_USAGE;
        return;
      }
      // Loaded here so that `fcgi-pm run` (the daemon) never loads them.
      const { stringify: stringifyYaml } = await import('yaml');
      const { startDaemonChild } = await import('../bench/daemon-child.js');
      const { renderTune, runTune } = await import('../bench/tune.js');
      const dir = mkdtempSync(join(tmpdir(), 'fcgi-pm-tune-'));
      const live = new Set<DaemonChild>();
      const onSignal = (): void => {
        void Promise.all([...live].map((d) => d.stop(3000))).then(() => process.exit(130));
      };
      process.once('SIGINT', onSignal);
      process.once('SIGTERM', onSignal);
      const log = (s: string): void => {
        if (o.json !== true) process.stderr.write(s);
      };
      try {
        const result: TuneResult = await runTune({
          ...setup.tune,
          startPool: async (size) => {
            const file = join(dir, `size-${size}.yaml`);
            writeFileSync(file, stringifyYaml(tuneConfigObject(cfg, setup.pool, setup.bench.target, size)));
            log(`pool "${setup.pool.name}" at ${size} worker${size === 1 ? '' : 's'}...\n`);
            const d = await startDaemonChild([process.execPath, BIN, 'run', '-c', file, ...(o.allowRoot === true ? ['--allow-root'] : [])], setup.bench.target.address);
            live.add(d);
            return {
              pid: d.pid,
              stop: async () => {
                await d.stop();
                live.delete(d);
              },
            };
          },
          onStep: (s) => log(`  c=${s.concurrency}: ${s.rps.toFixed(0)} req/s, p99 ${s.p99Ms.toFixed(2)} ms, ${s.errors} errors\n`),
        });
        if (o.json === true) process.stdout.write(`${JSON.stringify({ schema: 'fcgi-pm-tune/1', pool: setup.pool.name, target: targetUrl, ...result }, null, 2)}\n`);
        else process.stdout.write(`\n${renderTune(result, setup.pool.name)}`);
        process.exitCode = result.recommendation === undefined ? EXIT_FAILURE : 0;
      } catch (err) {
        process.stderr.write(`fcgi-pm tune: ${(err as Error).message}\n`);
        process.exitCode = EXIT_FAILURE;
      } finally {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
        rmSync(dir, { recursive: true, force: true });
      }
    });
}

function tuneSetup(targetUrl: string, o: TuneCliOptions, cfg: Config) {
  const names = [...cfg.pools.keys()];
  const name = o.pool ?? (names.length === 1 ? names[0]! : undefined);
  if (name === undefined) throw new BenchUsageError(`--pool is required: the config has ${names.length} pools (${names.join(', ')})`);
  const pool = cfg.pools.get(name);
  if (pool === undefined) throw new BenchUsageError(`no pool named "${name}" in ${cfg.source} (pools: ${names.join(', ')})`);
  if (pool.command === undefined) throw new BenchUsageError(`pool "${name}" proxies to running backends; tune sizes pools that spawn workers ("command")`);
  // The bench options are parsed like `fcgi-pm bench`'s; duration and concurrency are per step.
  const benchCli: BenchCliOptions = { ...o, keepAlive: o.keepAlive !== false, requests: undefined, duration: '1s', rate: undefined };
  delete benchCli.concurrency;
  const bench = benchOptionsFrom(targetUrl, benchCli);
  const sizes = o.sizes !== undefined ? intList('--sizes', o.sizes) : doublingSizes(positiveInt('--max', o.max));
  const levels = o.concurrency !== undefined ? intList('--concurrency', o.concurrency) : undefined;
  const stepMs = parseDuration(o.step);
  if (typeof stepMs === 'string' || stepMs < 100) throw new BenchUsageError(`--step must be a duration of at least 100ms, got ${JSON.stringify(o.step)}`);
  const warmupMs = parseDuration(o.warmup ?? '1s');
  if (typeof warmupMs === 'string') throw new BenchUsageError(`--warmup ${warmupMs}`);
  let memoryBudget = memAvailable() ?? Number.MAX_SAFE_INTEGER;
  if (o.memoryBudget !== undefined) {
    const b = parseSize(o.memoryBudget);
    if (typeof b === 'string' || b <= 0) throw new BenchUsageError(`--memory-budget ${typeof b === 'string' ? b : 'must be more than 0'}`);
    memoryBudget = b;
  }
  const minRuns = positiveInt('--runs', o.runs);
  const maxRuns = Math.max(minRuns, positiveInt('--max-runs', o.maxRuns));
  const spread = Number(o.spread);
  if (!(spread >= 0 && spread < 100)) throw new BenchUsageError(`--spread must be a percentage from 0 to 100, got ${JSON.stringify(o.spread)}`);
  const tolerance = Number(o.tolerance);
  if (!(tolerance >= 0 && tolerance < 100)) throw new BenchUsageError(`--tolerance must be a percentage from 0 to 100, got ${JSON.stringify(o.tolerance)}`);
  return {
    pool,
    bench,
    tune: {
      sizes,
      concurrencyFor: (size: number) => levels ?? [size, 2 * size, 4 * size],
      stepMs,
      repeat: { min: minRuns, max: maxRuns, spread: spread / 100 },
      warmupMs,
      bench: { target: bench.target, request: bench.request, timeoutMs: bench.timeoutMs },
      memoryBudget,
      tolerance: tolerance / 100,
    },
  };
}
