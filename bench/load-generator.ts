/**
 * The load generators of bench/overload.ts and bench/fairness.ts: an open loop (requests
 * leave on schedule, a new connection each, whatever happened to the earlier ones) and a
 * closed loop (clients that each wait for their answer, kept-alive).
 *
 * Each runs in a process of its own, in a session of its own (its own autogroup), raised to
 * an autogroup nice of GENERATOR_NICE when the bench runs as root: users' browsers are on
 * other machines, and a generator that shares the 2 cores with the workers it overloads
 * measures its own lateness. Run inside the bench's process, beside the busy workers, its
 * event loop fell 100–400 ms behind at 1.5× (noisy, 2026-12-03): requests left up to
 * 300 ms late, in lumps, and answers the daemon gave at once were read 300 ms later. The open loop reports its loop delay and CPU, so a
 * run where it still lagged shows it; both report where they ran. (bench/fairness's noise,
 * wrk, stays in the bench's session: its lateness only lowers the noise.)
 */
import { fork } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { track, untrack } from './compare-procs.js';

/** The generator's autogroup nice as root (the daemon's own weight, 300, is about −5). */
export const GENERATOR_NICE = -10;

export interface OpenLoopResult {
  sent: number;
  served: number;
  refused: number;
  other: number;
  errors: number;
  /** Client errors by kind (timeout, ECONNRESET, ...). */
  errorKinds: Record<string, number>;
  servedMs: number[];
  refusedMs: number[];
  /** When each of servedMs / refusedMs was due, ms from the first (the onset: the first sub-windows of an overload). */
  servedDue: number[];
  refusedDue: number[];
  /** The load generator's own state over the window: its event loop's delay (p99, max, ms), CPU (% of one core), session and autogroup. */
  client: { loopP99: number; loopMax: number; cpu: number; session: number; autogroup: string };
  /** --hops: per request (by its `?i=` id) when it was due, left, and was answered (epoch ms), and its status (0: failed). */
  trace?: Map<number, ClientHop>;
}

export interface ClientHop {
  dueAt: number;
  sentAt: number;
  endAt: number;
  status: number;
}

/** `rate` requests a second for `seconds`, each on a new connection; resolves once every one is answered or failed. */
export async function openLoop(url: string, rate: number, seconds: number, timeoutMs: number, trace = false, firstId = 0): Promise<OpenLoopResult> {
  const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  const r: OpenLoopResult = { sent: 0, served: 0, refused: 0, other: 0, errors: 0, errorKinds: {}, servedMs: [], refusedMs: [], servedDue: [], refusedDue: [], client: { loopP99: 0, loopMax: 0, cpu: 0, ...placement() } };
  const loop = monitorEventLoopDelay({ resolution: 5 });
  loop.enable();
  const cpu0 = process.cpuUsage();
  const hops = trace ? new Map<number, ClientHop>() : undefined;
  if (hops !== undefined) r.trace = hops;
  const failed = (err: NodeJS.ErrnoException): void => {
    r.errors++;
    const kind = err.code ?? err.message;
    r.errorKinds[kind] = (r.errorKinds[kind] ?? 0) + 1;
  };
  const total = Math.round(rate * seconds);
  const pending: Array<Promise<void>> = [];
  const epoch = (t: number): number => performance.timeOrigin + t;
  const one = (dueAt: number, dueMs: number): Promise<void> =>
    new Promise((resolve) => {
      const t0 = performance.now();
      const id = firstId + r.sent;
      const hop = hops === undefined ? undefined : { dueAt: epoch(dueAt), sentAt: epoch(t0), endAt: 0, status: 0 };
      if (hop !== undefined) hops!.set(id, hop);
      const req = http.get(hop === undefined ? url : `${url}?i=${id}`, { agent, timeout: timeoutMs }, (res) => {
        res.resume();
        res.on('end', () => {
          const ms = performance.now() - t0;
          const s = res.statusCode ?? 0;
          if (hop !== undefined) {
            hop.endAt = epoch(t0 + ms);
            hop.status = s;
          }
          if (s >= 200 && s < 300) {
            r.served++;
            r.servedMs.push(ms);
            r.servedDue.push(dueMs);
          } else if (s === 503) {
            r.refused++;
            r.refusedMs.push(ms);
            r.refusedDue.push(dueMs);
          } else r.other++;
          resolve();
        });
        res.on('error', (err) => {
          failed(err);
          resolve();
        });
      });
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', (err) => {
        failed(err);
        resolve();
      });
    });
  const begin = performance.now();
  while (r.sent < total) {
    const due = Math.min(total, Math.floor(((performance.now() - begin) / 1000) * rate) + 1);
    for (; r.sent < due; r.sent++) pending.push(one(begin + (r.sent / rate) * 1000, (r.sent / rate) * 1000));
    await new Promise((res) => setTimeout(res, 2));
  }
  const cpu = process.cpuUsage(cpu0);
  const sending = performance.now() - begin;
  loop.disable();
  r.client = { ...r.client, loopP99: loop.percentile(99) / 1e6, loopMax: loop.max / 1e6, cpu: ((cpu.user + cpu.system) / 1000 / sending) * 100 };
  await Promise.all(pending);
  agent.destroy();
  return r;
}

export interface ClosedLoopResult {
  statuses: Record<number, number>;
  errors: number;
  ms: number[];
  /** The generator's session and autogroup. */
  client: { session: number; autogroup: string };
}

/** `clients` loops, each one request after another on its own kept-alive connection, for `seconds`. */
export async function closedLoop(url: string, clients: number, seconds: number): Promise<ClosedLoopResult> {
  const r: ClosedLoopResult = { statuses: {}, errors: 0, ms: [], client: placement() };
  const end = performance.now() + seconds * 1000;
  const one = (agent: http.Agent): Promise<void> =>
    new Promise((resolve) => {
      const t0 = performance.now();
      const req = http.get(url, { agent, timeout: 30_000 }, (res) => {
        res.resume();
        res.on('end', () => {
          r.ms.push(performance.now() - t0);
          const s = res.statusCode ?? 0;
          r.statuses[s] = (r.statuses[s] ?? 0) + 1;
          resolve();
        });
      });
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', () => {
        r.errors++;
        resolve();
      });
    });
  await Promise.all(
    Array.from({ length: clients }, async () => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      while (performance.now() < end) await one(agent);
      agent.destroy();
    }),
  );
  return r;
}

type Job =
  | { kind: 'open'; url: string; rate: number; seconds: number; timeoutMs: number; trace: boolean; firstId: number }
  | { kind: 'closed'; url: string; clients: number; seconds: number };

/** What the generator's process sends back: the result, an open loop's trace as entries. */
type Reply = (Omit<OpenLoopResult, 'trace'> & { traceEntries?: Array<[number, ClientHop]> }) | ClosedLoopResult;

/** A process's session id, from /proc (after the command, which may hold spaces: state ppid pgrp session ...). */
function sessionOf(pid: number | 'self'): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[3]);
}

/** This process's session id and autogroup ("/autogroup-66169 nice -10"; "–" without autogroups). */
function placement(): { session: number; autogroup: string } {
  const session = sessionOf('self');
  let autogroup = '–';
  try {
    autogroup = readFileSync('/proc/self/autogroup', 'utf8').trim();
  } catch {
    // a kernel without autogroups
  }
  return { session, autogroup };
}

/** Runs a job in a process and session of its own, at GENERATOR_NICE when root; its reply. */
async function apart(job: Job): Promise<Reply> {
  const child = fork(fileURLToPath(import.meta.url), ['--generator'], { detached: true, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  if (child.pid === undefined) throw new Error('load generator: could not start');
  const pid = child.pid;
  track(pid, 'load generator');
  // Only a session leader's autogroup is its own: another's nice would be the bench's session's.
  if (process.getuid?.() === 0 && sessionOf(pid) === pid) {
    try {
      writeFileSync(`/proc/${pid}/autogroup`, String(GENERATOR_NICE));
    } catch {
      // no autogroups on this kernel (the reply's placement says so)
    }
  }
  try {
    return await new Promise<Reply>((resolve, reject) => {
      child.once('message', (m) => resolve(m as Reply));
      child.once('exit', (code) => reject(new Error(`load generator exited (${code}) before its answer`)));
      child.send(job);
    });
  } finally {
    child.disconnect();
    untrack(pid);
  }
}

/** openLoop() in a process and session of its own. */
export async function openLoopApart(url: string, rate: number, seconds: number, timeoutMs: number, trace = false, firstId = 0): Promise<OpenLoopResult> {
  const { traceEntries, ...rest } = (await apart({ kind: 'open', url, rate, seconds, timeoutMs, trace, firstId })) as Omit<OpenLoopResult, 'trace'> & { traceEntries?: Array<[number, ClientHop]> };
  return { ...rest, ...(traceEntries === undefined ? {} : { trace: new Map(traceEntries) }) };
}

/** closedLoop() in a process and session of its own. */
export async function closedLoopApart(url: string, clients: number, seconds: number): Promise<ClosedLoopResult> {
  return (await apart({ kind: 'closed', url, clients, seconds })) as ClosedLoopResult;
}

if (process.argv.includes('--generator')) {
  process.once('message', (m) => {
    const job = m as Job;
    const done = (reply: Reply): void => void process.send!(reply, () => process.exit(0));
    if (job.kind === 'closed') void closedLoop(job.url, job.clients, job.seconds).then(done);
    else
      void openLoop(job.url, job.rate, job.seconds, job.timeoutMs, job.trace, job.firstId).then(({ trace, ...rest }) =>
        done({ ...rest, ...(trace === undefined ? {} : { traceEntries: [...trace] }) }),
      );
  });
}
