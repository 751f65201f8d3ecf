/** Runs wrk (Debian's) and reads its report. */
import { execFile } from 'node:child_process';
import { track, untrack } from './compare-procs.js';

export interface WrkResult {
  rps: number;
  requests: number;
  p50Ms: number;
  p99Ms: number;
  /** Socket errors: connect + read + write + timeout. */
  errors: number;
  non2xx: number;
}

function toMs(value: string, unit: string): number {
  const v = Number(value);
  switch (unit) {
    case 'us':
      return v / 1000;
    case 'ms':
      return v;
    case 's':
      return v * 1000;
    case 'm':
      return v * 60_000;
    default:
      throw new Error(`wrk: unknown time unit ${unit}`);
  }
}

export function parseWrk(out: string): WrkResult {
  const pct = (p: string): number => {
    const m = new RegExp(`^\\s*${p}%\\s+([\\d.]+)(us|ms|s|m)\\s*$`, 'm').exec(out);
    if (!m) throw new Error(`wrk output without the ${p}% line:\n${out}`);
    return toMs(m[1]!, m[2]!);
  };
  const req = /(\d+) requests in/.exec(out);
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(out);
  if (!req || !rps) throw new Error(`unexpected wrk output:\n${out}`);
  const se = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const errors = se ? Number(se[1]) + Number(se[2]) + Number(se[3]) + Number(se[4]) : 0;
  const non = /Non-2xx or 3xx responses: (\d+)/.exec(out);
  return { rps: Number(rps[1]), requests: Number(req[1]), p50Ms: pct('50'), p99Ms: pct('99'), errors, non2xx: non ? Number(non[1]) : 0 };
}

/** `close`: a new connection per request (Connection: close), as an open-loop load makes them. */
export function runWrk(url: string, connections: number, seconds: number, close = false): Promise<WrkResult> {
  return new Promise((resolve, reject) => {
    const args = ['-t1', `-c${connections}`, `-d${seconds}s`, '--timeout', '10s', '--latency', ...(close ? ['-H', 'Connection: close'] : []), url];
    const child = execFile('wrk', args, { timeout: (seconds + 30) * 1000, killSignal: 'SIGKILL' }, (err, stdout, stderr) => {
      if (child.pid !== undefined) untrack(child.pid);
      if (err) {
        reject(new Error(`wrk ${args.join(' ')}: ${err.message}\n${stderr}`));
        return;
      }
      try {
        resolve(parseWrk(stdout));
      } catch (e) {
        reject(e);
      }
    });
    if (child.pid !== undefined) track(child.pid, 'wrk', 'SIGKILL');
  });
}
