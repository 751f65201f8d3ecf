/**
 * `fcgi-pm bench TARGET`: a load generator that speaks FastCGI, SCGI and HTTP itself
 * (engine in src/bench/). Prints an ab/httperf-style report, or JSON with --json.
 */
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { parseDuration } from '../config/units.js';
import type { BenchReport } from '../bench/report.js';
import type { ProgressLine } from '../bench/progress.js';
import type { BenchOptions } from '../bench/runner.js';
import { parseTarget, TargetError } from '../bench/target.js';
import { EXIT_FAILURE, EXIT_USAGE } from './report.js';

export interface BenchCliOptions {
  concurrency?: string;
  requests?: string;
  duration?: string;
  rate?: string;
  method?: string;
  bodyFile?: string;
  contentType?: string;
  param: string[];
  header: string[];
  keepAlive?: boolean;
  timeout: string;
  warmup?: string;
  json?: boolean;
  progress?: boolean;
}

export class BenchUsageError extends Error {
  override name = 'BenchUsageError';
}

const collect = (value: string, previous: string[]): string[] => [...previous, value];

/** Default -c with --rate: the cap on requests in flight, high enough that the server, not the bench, refuses. */
export const OPEN_LOOP_DEFAULT_CONCURRENCY = 4096;
const DEFAULT_DURATION_MS = 10_000;

function positiveInt(name: string, v: string): number {
  if (!/^\d+$/.test(v) || Number(v) < 1) throw new BenchUsageError(`${name} must be a whole number ≥ 1, got ${JSON.stringify(v)}`);
  return Number(v);
}

function duration(name: string, v: string, min = 1): number {
  const d = parseDuration(v);
  if (typeof d === 'string') throw new BenchUsageError(`${name} ${d}`);
  if (d < min) throw new BenchUsageError(`${name} must be at least ${min} ms, got ${JSON.stringify(v)}`);
  return d;
}

/** Turns command-line options into engine options; throws BenchUsageError. */
export function benchOptionsFrom(targetUrl: string, o: BenchCliOptions): BenchOptions {
  let target;
  try {
    target = parseTarget(targetUrl);
  } catch (err) {
    if (err instanceof TargetError) throw new BenchUsageError(err.message);
    throw err;
  }
  if (o.requests !== undefined && o.duration !== undefined) throw new BenchUsageError('give -n REQUESTS or -d DURATION, not both');
  const rate = o.rate === undefined ? undefined : Number(o.rate);
  if (rate !== undefined && !(Number.isFinite(rate) && rate > 0)) throw new BenchUsageError(`--rate must be a number of requests per second > 0, got ${JSON.stringify(o.rate)}`);
  const requests = o.requests === undefined ? undefined : positiveInt('-n', o.requests);
  const durationMs = o.duration !== undefined ? duration('-d', o.duration) : requests === undefined ? DEFAULT_DURATION_MS : undefined;
  const concurrency = o.concurrency !== undefined ? positiveInt('-c', o.concurrency) : rate !== undefined ? OPEN_LOOP_DEFAULT_CONCURRENCY : 10;

  const params: Array<[string, string]> = [];
  for (const p of o.param) {
    const eq = p.indexOf('=');
    if (eq <= 0) throw new BenchUsageError(`--param wants NAME=VALUE, got ${JSON.stringify(p)}`);
    params.push([p.slice(0, eq), p.slice(eq + 1)]);
  }
  if (params.length > 0 && target.protocol === 'http') throw new BenchUsageError('--param sets FastCGI/SCGI request variables; for http:// targets use --header');
  const headers: Array<[string, string]> = [];
  for (const h of o.header) {
    const colon = h.indexOf(':');
    if (colon <= 0 || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(h.slice(0, colon))) throw new BenchUsageError(`--header wants "Name: value", got ${JSON.stringify(h)}`);
    headers.push([h.slice(0, colon), h.slice(colon + 1).trim()]);
  }
  let body: Buffer | undefined;
  if (o.bodyFile !== undefined) {
    try {
      body = readFileSync(o.bodyFile);
    } catch (err) {
      throw new BenchUsageError(`--body-file ${o.bodyFile}: ${(err as Error).message}`);
    }
  }
  if (o.contentType !== undefined) {
    if (body === undefined) throw new BenchUsageError('--content-type is the type of the --body-file body; give --body-file too');
    if (headers.some(([n]) => n.toLowerCase() === 'content-type')) throw new BenchUsageError('give --content-type or a Content-Type header, not both');
    headers.push(['Content-Type', o.contentType]);
  }
  const method = (o.method ?? (body === undefined ? 'GET' : 'POST')).toUpperCase();
  if (!/^[A-Z]+$/.test(method)) throw new BenchUsageError(`--method must be a word like GET or POST, got ${JSON.stringify(o.method)}`);
  const opts: BenchOptions = {
    target,
    request: { method, body, headers, params, keepAlive: o.keepAlive === true },
    concurrency,
    timeoutMs: duration('--timeout', o.timeout),
  };
  if (requests !== undefined) opts.requests = requests;
  if (durationMs !== undefined) opts.durationMs = durationMs;
  if (rate !== undefined) opts.rate = rate;
  return opts;
}

/** Runs one bench (after an uncounted warm-up, when asked) and returns its report. */
export async function runBenchReport(opts: BenchOptions, warmupMs: number, progress: ProgressLine | undefined, signal?: AbortSignal): Promise<BenchReport> {
  // Loaded here so that `fcgi-pm run` (the daemon) never loads the load generator.
  const { runBench } = await import('../bench/runner.js');
  const { buildReport } = await import('../bench/report.js');
  if (warmupMs > 0) {
    const warm: BenchOptions = { ...opts, durationMs: warmupMs };
    delete warm.requests;
    delete warm.onProgress;
    if (signal !== undefined) warm.signal = signal;
    await runBench(warm);
  }
  const run: BenchOptions = { ...opts };
  if (progress !== undefined) run.onProgress = (p) => progress.update(p);
  if (signal !== undefined) run.signal = signal;
  const result = await runBench(run);
  progress?.clear();
  return buildReport(opts, result);
}

export function benchCommand(): Command {
  return new Command('bench')
    .description('load-test a FastCGI, SCGI or HTTP server (php-fpm, fcgi-pm, nginx...) and report rates and latencies')
    .argument('<target>', 'fcgi://HOST:PORT/PATH, fcgi://unix:/SOCKET/PATH, scgi://..., http://...')
    .option('-c, --concurrency <n>', `connections (closed loop, default 10); with --rate: most requests in flight (default ${OPEN_LOOP_DEFAULT_CONCURRENCY})`)
    .option('-n, --requests <n>', 'requests to send (default: run for -d)')
    .option('-d, --duration <duration>', 'how long to send requests, e.g. 10s (default 10s)')
    .option('--rate <r>', 'open loop: start R requests per second on schedule, whether earlier ones finished or not')
    .option('--method <method>', 'request method (default GET, or POST with --body-file)')
    .option('--body-file <file>', 'send this file as the request body')
    .option('--content-type <type>', 'the body\'s type (CONTENT_TYPE / Content-Type; default application/octet-stream)')
    .option('--param <name=value>', 'FastCGI/SCGI: set a request variable (SCRIPT_FILENAME, DOCUMENT_ROOT...); repeatable', collect, [])
    .option('-H, --header <header>', '"Name: value" request header (HTTP_* variable for FastCGI/SCGI); repeatable', collect, [])
    .option('-k, --keep-alive', 'reuse connections: FastCGI FCGI_KEEP_CONN, HTTP keep-alive (SCGI has none)')
    .option('--timeout <duration>', 'a request without a complete reply after this long counts as a timeout', '30s')
    .option('--warmup <duration>', 'run this long first without counting anything')
    .option('--json', 'print the report as JSON (schema fcgi-pm-bench/1)')
    .option('--no-progress', 'no live progress line (it is shown only when stderr is a terminal)')
    .addHelpText(
      'after',
      `
Unix sockets: the socket path ends at the first component that ends in ".sock" or is a
socket, else at the first ":" (fcgi://unix:/run/php.sock:/index.php); the request path
follows. A target that cannot be reached is an error (exit 1). SCRIPT_FILENAME defaults
to DOCUMENT_ROOT + path when --param DOCUMENT_ROOT is given; REQUEST_METHOD,
SCRIPT_NAME, REQUEST_URI, QUERY_STRING, SERVER_PROTOCOL, CONTENT_LENGTH... come from
the URL and options. The report warns when every reply was non-2xx or when whole
seconds passed without a reply.

Examples:
  fcgi-pm bench -c 10 -d 10s -k --param DOCUMENT_ROOT=/var/www/html fcgi://127.0.0.1:9000/index.php
  fcgi-pm bench -n 10000 -c 50 fcgi://unix:/run/php/php-fpm.sock/status.php?full
  fcgi-pm bench --rate 2000 -d 30s -k http://127.0.0.1:8080/
  fcgi-pm bench --json -n 1000 scgi://127.0.0.1:4000/app | jq .rps
`,
    )
    .action(async (targetUrl: string, o: BenchCliOptions) => {
      let opts: BenchOptions;
      let warmupMs = 0;
      try {
        opts = benchOptionsFrom(targetUrl, o);
        if (o.warmup !== undefined) warmupMs = duration('--warmup', o.warmup, 0);
      } catch (err) {
        if (!(err instanceof BenchUsageError)) throw err;
        process.stderr.write(`fcgi-pm bench: ${err.message}\n(see fcgi-pm bench --help)\n`);
        process.exitCode = EXIT_USAGE;
        return;
      }
      const { unreachableReason } = await import('../bench/reach.js');
      const why = await unreachableReason(opts.target.address, Math.min(opts.timeoutMs, 10_000));
      if (why !== undefined) {
        process.stderr.write(`fcgi-pm bench: cannot reach ${opts.target.url}: ${why}\n`);
        process.exitCode = EXIT_FAILURE;
        return;
      }
      const { ProgressLine } = await import('../bench/progress.js');
      const { renderReport } = await import('../bench/report.js');
      const progress = o.progress !== false && process.stderr.isTTY ? new ProgressLine(process.stderr) : undefined;
      // Ctrl-C ends the run early and still prints what was measured, like ab.
      const ac = new AbortController();
      const onSigint = (): void => ac.abort();
      process.once('SIGINT', onSigint);
      try {
        const report = await runBenchReport(opts, warmupMs, progress, ac.signal);
        process.stdout.write(o.json === true ? `${JSON.stringify(report, null, 2)}\n` : renderReport(report));
      } catch (err) {
        progress?.clear();
        process.stderr.write(`fcgi-pm bench: ${(err as Error).message}\n`);
        process.exitCode = EXIT_FAILURE;
      } finally {
        process.off('SIGINT', onSigint);
      }
    });
}
