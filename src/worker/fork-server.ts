/**
 * A preload pool's parent process (bin/fcgi-pm-wsgi --preload): it imports the
 * application once, then forks one child per worker fcgi-pm asks for. The control
 * channel is Node's IPC channel on the parent's fd 3 (JSON lines; a handle travels as
 * an SCM_RIGHTS fd):
 *
 *   fcgi-pm → parent   {fork: id} + the worker's listening socket (made here, as for fd0)
 *   parent → fcgi-pm   {ready: true}   application imported
 *                      {forked: id, pid}   the child serves on that socket
 *                      {failed: id, errno, message}   fork() failed
 *                      {exited: id, pid, code, signal}   the parent reaped a child
 *
 * fcgi-pm signals children directly (each leads its own process group, like any worker);
 * the parent only forks and reaps. A parent that exits by itself takes no child with it
 * at once: children get SIGTERM (PR_SET_PDEATHSIG), finish their request and exit, and
 * are watched here in /proc until gone (their exit reported as code 0). Forks waiting for a parent fail (the pool counts
 * them as early crashes, so its restart back-off applies). The parent stops after
 * `idleTimeout` without children; the next fork starts a new one. `renew` (reload) starts
 * a new parent for the forks to come; the old one stops when its children have gone.
 */
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import type net from 'node:net';
import { ErrorCodes } from '../errors.js';
import { childLogger, type Logger } from '../log/log.js';
import { defaultDeathGuard, type DeathGuard } from './death-guard.js';
import { captureOutput, RateLimitedLog } from './output.js';
import { TokenBucket } from '../util/token-bucket.js';
import { resolveCommand, startProcess } from './spawn.js';
import type { WorkerSpec } from './types.js';

/** What a worker hears about its fork. Exactly one of failed / exited ends it. */
export interface ForkWaiter {
  forked(pid: number): void;
  failed(errno: string, message: string): void;
  exited(code: number | null, signal: NodeJS.Signals | null): void;
}

/** How often children of a parent that died are looked for in /proc. */
const ORPHAN_POLL_MS = 50;

interface Pending {
  id: number;
  server: net.Server;
  waiter: ForkWaiter;
}

type Message =
  | { ready: true; pid: number }
  | { forked: number; pid: number }
  | { failed: number; errno: string; message: string }
  | { exited: number; pid: number; code: number | null; signal: NodeJS.Signals | null };

class Parent {
  readonly child: ChildProcess;
  ready = false;
  /** Asked to stop (idle, renew, shutdown): its exit is no failure. */
  stopping = false;
  gone = false;
  /** Forks asked before it was ready. */
  readonly waiting: Pending[] = [];
  /** Sent, not yet reported. */
  readonly forking = new Map<number, Pending>();
  /** Live children by worker id. */
  readonly children = new Map<number, { pid: number; waiter: ForkWaiter }>();
  readonly exited: Promise<void>;
  /** Resolves true once ready, false if it went first. */
  readonly settled: Promise<boolean>;
  settle!: (ready: boolean) => void;

  constructor(child: ChildProcess) {
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    this.settled = new Promise((resolve) => (this.settle = resolve));
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get empty(): boolean {
    return this.waiting.length === 0 && this.forking.size === 0 && this.children.size === 0;
  }
}

export interface ForkServerOptions {
  /** ms without children before the parent stops; 0 = never. */
  idleTimeout: number;
  guard?: DeathGuard;
}

export class ForkServer {
  private readonly spec: WorkerSpec;
  private readonly log: Logger;
  private readonly out: RateLimitedLog;
  private readonly opts: ForkServerOptions;
  private readonly guard: DeathGuard;
  private current: Parent | undefined;
  private readonly parents = new Set<Parent>();
  private idleTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(spec: WorkerSpec, logger: Logger, opts: ForkServerOptions) {
    this.spec = spec;
    this.log = childLogger(logger, { pool: spec.pool, preload: true });
    this.out = new RateLimitedLog(this.log, new TokenBucket());
    this.opts = opts;
    this.guard = opts.guard ?? defaultDeathGuard();
  }

  /** The parent forks a worker serving on `server`'s socket. */
  fork(id: number, server: net.Server, waiter: ForkWaiter): void {
    if (this.closed) return waiter.failed('SETUP', 'the pool is stopping');
    this.cancelIdle();
    const p = this.current ?? this.start();
    if (!(p instanceof Parent)) return waiter.failed(p.errno, p.message);
    const req = { id, server, waiter };
    if (p.ready) this.send(p, req);
    else p.waiting.push(req);
  }

  /** Drops a fork not yet sent to the parent; true when it was still waiting. */
  cancel(id: number): boolean {
    const p = this.current;
    const i = p?.waiting.findIndex((r) => r.id === id) ?? -1;
    if (p === undefined || i < 0) return false;
    p.waiting.splice(i, 1);
    this.checkIdle(p);
    return true;
  }

  /** Parent pid, for status and tests (undefined while none runs). */
  get pid(): number | undefined {
    return this.current?.pid;
  }

  /**
   * A new parent for the forks to come (reload: it imports the code as it is now);
   * resolves once it is ready or gone. The old one stops when its children have gone.
   */
  async renew(): Promise<boolean> {
    const old = this.current;
    this.current = undefined;
    if (old !== undefined) this.retireParent(old);
    const p = this.start();
    return p instanceof Parent ? p.settled : false;
  }

  /** Stops every parent (shutdown: fcgi-pm has stopped the children already). */
  async stop(): Promise<void> {
    this.closed = true;
    this.cancelIdle();
    const all = [...this.parents];
    for (const p of all) this.stopParent(p);
    await Promise.all(all.map((p) => p.exited));
  }

  // ---- the parent -------------------------------------------------------------------

  private start(): Parent | { errno: string; message: string } {
    const spec = this.spec;
    const cmd = spec.command[0] ?? '';
    // The worker waiting for it reports the failure (SPAWN_FAILED, once per episode).
    const fail = (errno: string, message: string) => ({ errno, message: `cannot start the preload parent: ${message}` });
    const resolved = resolveCommand(cmd, spec.env, spec.cwd);
    if (!resolved.ok) return fail(resolved.errno, resolved.message);
    let child: ChildProcess;
    try {
      child = startProcess({ spec, file: resolved.file, args: spec.command.slice(1), fd0: undefined, guard: this.guard, ipc: true });
    } catch (e) {
      const err = e as NodeJS.ErrnoException;
      return fail(err.code ?? 'ESPAWN', `${resolved.file}: ${err.message}`);
    }
    const p = new Parent(child);
    this.current = p;
    this.parents.add(p);
    child.on('error', (err: NodeJS.ErrnoException) => {
      if (child.pid === undefined) this.onParentExit(p, null, null, `${resolved.file}: ${err.message}`);
      else this.log.warn({ code: ErrorCodes.INTERNAL, err }, 'preload parent process error');
    });
    if (child.pid !== undefined) this.guard.started(child.pid);
    captureOutput(child.stdout!, this.out, 'stdout', 'info');
    captureOutput(child.stderr!, this.out, 'stderr', 'warn');
    child.on('message', (m: Message) => this.onMessage(p, m));
    child.on('exit', (code, signal) => this.onParentExit(p, code, signal));
    this.log.info({ wpid: child.pid, command: spec.command }, `preload parent ${child.pid} starting (it imports the application once)`);
    return p;
  }

  private onMessage(p: Parent, m: Message): void {
    if ('ready' in m) {
      p.ready = true;
      p.settle(true);
      this.log.info({ wpid: p.pid }, `preload parent ${p.pid} ready: forking workers`);
      for (const req of p.waiting.splice(0)) this.send(p, req);
      this.checkIdle(p);
    } else if ('forked' in m) {
      const req = p.forking.get(m.forked);
      if (req === undefined) return;
      p.forking.delete(m.forked);
      p.children.set(m.forked, { pid: m.pid, waiter: req.waiter });
      req.waiter.forked(m.pid);
    } else if ('failed' in m) {
      const req = p.forking.get(m.failed);
      p.forking.delete(m.failed);
      req?.waiter.failed(m.errno, `preload parent ${p.pid} could not fork: ${m.message}`);
      this.checkIdle(p);
    } else if ('exited' in m) {
      const c = p.children.get(m.exited);
      if (c === undefined) return;
      p.children.delete(m.exited);
      c.waiter.exited(m.code, m.signal);
      this.checkIdle(p);
    }
  }

  private send(p: Parent, req: Pending): void {
    p.forking.set(req.id, req);
    p.child.send({ fork: req.id }, req.server, (err) => {
      if (err === null || !p.forking.has(req.id)) return;
      p.forking.delete(req.id);
      req.waiter.failed('EPIPE', `cannot reach the preload parent ${p.pid}: ${err.message}`);
    });
  }

  private onParentExit(p: Parent, code: number | null, signal: NodeJS.Signals | null, why?: string): void {
    if (p.gone) return;
    p.gone = true;
    p.settle(false);
    this.parents.delete(p);
    if (this.current === p) this.current = undefined;
    if (p.pid !== undefined) this.guard.exited(p.pid);
    this.out.flush();
    const how = why ?? (signal !== null ? `was killed by ${signal}` : `exited with code ${code}`);
    if (!p.stopping) {
      this.log.error(
        { code: ErrorCodes.PRELOAD_PARENT_EXITED, wpid: p.pid, exitCode: code, signal, ready: p.ready, workers: p.children.size },
        `preload parent ${p.pid ?? '?'} of pool ${this.spec.pool} ${how}${p.ready ? '' : ' before it was ready (see its output above)'}; ${p.children.size} worker(s) finish their requests and stop, the next worker starts a new parent`,
      );
    }
    const message = `the preload parent ${how} before forking this worker`;
    for (const req of [...p.waiting.splice(0), ...p.forking.values()]) req.waiter.failed('EXITED', message);
    p.forking.clear();
    if (p.children.size > 0) this.watchOrphans(p);
  }

  /**
   * Children of a dead parent: they got SIGTERM (PR_SET_PDEATHSIG); seen gone in /proc,
   * their exit is reported. Nobody can reap them for us, so the status is the one the
   * adapter's children exit with on that SIGTERM: 0, after the request they run.
   */
  private watchOrphans(p: Parent): void {
    const timer = setInterval(() => {
      for (const [id, c] of p.children) {
        if (alive(c.pid)) continue;
        p.children.delete(id);
        c.waiter.exited(0, null);
      }
      if (p.children.size === 0) clearInterval(timer);
    }, ORPHAN_POLL_MS);
    timer.unref();
  }

  private retireParent(p: Parent): void {
    if (p.empty) this.stopParent(p);
    // else checkIdle stops it when its last child is gone
  }

  private stopParent(p: Parent): void {
    if (p.gone || p.stopping) return;
    p.stopping = true;
    try {
      p.child.kill('SIGTERM');
    } catch {
      /* gone */
    }
  }

  private checkIdle(p: Parent): void {
    if (!p.empty) return;
    if (p !== this.current) {
      this.stopParent(p);
      return;
    }
    this.cancelIdle();
    if (this.opts.idleTimeout <= 0) return;
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined;
      if (this.current !== p || !p.empty) return;
      this.log.info({ wpid: p.pid, idleMs: this.opts.idleTimeout }, `preload parent ${p.pid} stops: no worker for preload_idle_timeout`);
      this.current = undefined;
      this.stopParent(p);
    }, this.opts.idleTimeout);
    this.idleTimer.unref();
  }

  private cancelIdle(): void {
    if (this.idleTimer !== undefined) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
  }
}

function alive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
    return stat[stat.lastIndexOf(')') + 2] !== 'Z';
  } catch {
    return false;
  }
}
