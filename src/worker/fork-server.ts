/**
 * A preload pool's parent process (bin/fcgi-pm-wsgi --preload): it imports the
 * application once, then forks one child per worker fcgi-pm asks for. The channel is
 * plain file descriptors given at spawn (FCGI_PM_PRELOAD_FDS=0,3,4): JSON lines in on its
 * stdin and out on fd 3, and as fd 4 this pool's socket directory (made here, private to
 * the pool's user), where the parent binds each worker's listening socket itself:
 *
 *   fcgi-pm → parent   {fork: id, socket: name}   bind name in the directory, fork a child
 *                      {fork: id, shared: true, max_requests: n}   a child serving on the
 *                          `accept: direct` pool's shared socket (fd 5, see share())
 *   parent → fcgi-pm   {ready: true}   application imported
 *                      {spare: pid | null}   the child it keeps forked ahead of need (its
 *                                            memory counts with the parent's), or none
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
import path from 'node:path';
import { createInterface } from 'node:readline';
import { ErrorCodes } from '../errors.js';
import { childLogger, type Logger } from '../log/log.js';
import { defaultDeathGuard, type DeathGuard } from './death-guard.js';
import { captureOutput, RateLimitedLog } from './output.js';
import { TokenBucket } from '../util/token-bucket.js';
import { MAX_UNIX_PATH } from './socket.js';
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
  /** The socket's name in the pool's socket directory; undefined: the shared socket. */
  socket: string | undefined;
  /** On the shared socket: the requests after which the child exits (0: none). */
  maxRequests: number;
  waiter: ForkWaiter;
}

type Message =
  | { ready: true; pid: number }
  | { spare: number | null }
  | { forked: number; pid: number }
  | { failed: number; errno: string; message: string }
  | { exited: number; pid: number; code: number | null; signal: NodeJS.Signals | null };

class Parent {
  readonly child: ChildProcess;
  ready = false;
  /** Workers it forked. */
  forks = 0;
  /** The child it keeps forked ahead of need (not a worker yet). */
  spare: number | undefined;
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
  /** Where the parents bind the workers' sockets; made on first use, removed by stop(). */
  private dir: string | undefined;
  /** An `accept: direct` pool's listening socket, handed to every parent started. */
  private sharedFd: number | undefined;

  constructor(spec: WorkerSpec, logger: Logger, opts: ForkServerOptions) {
    this.spec = spec;
    this.log = childLogger(logger, { pool: spec.pool, preload: true });
    this.out = new RateLimitedLog(this.log, new TokenBucket());
    this.opts = opts;
    this.guard = opts.guard ?? defaultDeathGuard();
  }

  /**
   * Where the worker named `base` will listen (in the pool's socket directory, made now
   * if need be, owned by the pool's user). Throws when it cannot be made or is too long.
   */
  socketPath(base: string): string {
    const p = path.join(this.socketDir(), `${base}.sock`);
    if (Buffer.byteLength(p) > MAX_UNIX_PATH) throw new Error(`socket path too long (${Buffer.byteLength(p)} > ${MAX_UNIX_PATH} bytes): ${p}; use a shorter runtime dir`);
    return p;
  }

  /**
   * An `accept: direct` pool's listening socket: parents started from now on hold it (and
   * never accept on it) and fork workers that accept on it (forkShared). The pool owns it.
   */
  share(fd: number): void {
    this.sharedFd = fd;
  }

  /** The parent binds `socketPath`'s name and forks a worker serving on it. */
  fork(id: number, socketPath: string, waiter: ForkWaiter): void {
    this.request({ id, socket: path.basename(socketPath), maxRequests: 0, waiter });
  }

  /** The parent forks a worker that accepts on the shared socket (share()) and exits after `maxRequests` (0: never). */
  forkShared(id: number, maxRequests: number, waiter: ForkWaiter): void {
    if (this.sharedFd === undefined) return waiter.failed('SETUP', 'no shared socket to fork on');
    this.request({ id, socket: undefined, maxRequests, waiter });
  }

  private request(req: Pending): void {
    if (this.closed) return req.waiter.failed('SETUP', 'the pool is stopping');
    this.cancelIdle();
    const p = this.current ?? this.start();
    if (!(p instanceof Parent)) return req.waiter.failed(p.errno, p.message);
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

  /** The parent forks come from now: its pid, whether it is ready, the workers it forked, and its spare. */
  get parent(): { pid: number; ready: boolean; forks: number; spare: number | undefined } | undefined {
    const p = this.current;
    return p?.pid === undefined ? undefined : { pid: p.pid, ready: p.ready, forks: p.forks, spare: p.spare };
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

  /**
   * Memory pressure: stops the parent now if it has no worker and no fork pending, as
   * preload_idle_timeout would later. Resolves when it has exited; undefined when there
   * is no such parent. The next fork starts a new one.
   */
  stopIdle(): Promise<void> | undefined {
    const p = this.current;
    if (p === undefined || !p.empty || p.stopping) return undefined;
    this.cancelIdle();
    this.current = undefined;
    this.stopParent(p);
    return p.exited;
  }

  /** Stops every parent (shutdown: fcgi-pm has stopped the children already). */
  async stop(): Promise<void> {
    this.closed = true;
    this.cancelIdle();
    const all = [...this.parents];
    for (const p of all) this.stopParent(p);
    await Promise.all(all.map((p) => p.exited));
    if (this.dir !== undefined) fs.rmSync(this.dir, { recursive: true, force: true });
    this.dir = undefined;
  }

  private socketDir(): string {
    if (this.dir !== undefined) return this.dir;
    const dir = fs.mkdtempSync(path.join(this.spec.runtimeDir, 'preload-'));
    // The parent runs as the pool's user and binds here; the runtime dir stays ours alone
    // (the parent reaches this directory through the fd it inherits, not by its path).
    if (this.spec.uid !== undefined || this.spec.gid !== undefined) fs.chownSync(dir, this.spec.uid ?? -1, this.spec.gid ?? -1);
    this.dir = dir;
    return dir;
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
    let dirFd: number | undefined;
    try {
      dirFd = fs.openSync(this.socketDir(), fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
      child = startProcess({ spec, file: resolved.file, args: spec.command.slice(1), fd0: undefined, guard: this.guard, preload: { dirFd, sharedFd: this.sharedFd } });
    } catch (e) {
      const err = e as NodeJS.ErrnoException;
      return fail(err.code ?? 'ESPAWN', `${resolved.file}: ${err.message}`);
    } finally {
      if (dirFd !== undefined) fs.closeSync(dirFd);
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
    // A parent that closed its stdin is going: its exit fails what was sent.
    child.stdin!.on('error', () => {});
    const replies = child.stdio[3] as NodeJS.ReadableStream;
    createInterface({ input: replies, crlfDelay: Infinity }).on('line', (line) => {
      let m: Message;
      try {
        m = JSON.parse(line) as Message;
      } catch {
        this.log.warn({ code: ErrorCodes.INTERNAL, wpid: child.pid, line: line.slice(0, 200) }, 'preload parent sent a line that is not JSON');
        return;
      }
      this.onMessage(p, m);
    });
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
    } else if ('spare' in m) {
      p.spare = m.spare ?? undefined;
    } else if ('forked' in m) {
      if (m.pid === p.spare) p.spare = undefined; // the spare became this worker
      const req = p.forking.get(m.forked);
      if (req === undefined) return;
      p.forking.delete(m.forked);
      p.children.set(m.forked, { pid: m.pid, waiter: req.waiter });
      p.forks++;
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
    const msg = req.socket === undefined ? { fork: req.id, shared: true, max_requests: req.maxRequests } : { fork: req.id, socket: req.socket };
    p.child.stdin!.write(JSON.stringify(msg) + '\n');
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
