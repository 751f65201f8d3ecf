/**
 * One spawned backend process from spawn to exit: a process handle. It spawns (or forks,
 * with preload), probes its socket for readiness, stops with escalation (SIGTERM, SIGKILL
 * after kill_timeout), reports its exit with what its WorkerOwner knows of its requests
 * and why it was wanted gone (the pool judges and logs it at burial), and logs its
 * stdout/stderr (rate-limited). Whether it is idle, busy or retiring is the pool's table,
 * not the worker's. Events: `ready` once, or `spawnFailed` at most once; then `exit`
 * exactly once, last (see types.ts). On exit it removes its socket file and kills stray
 * members of its process group.
 */
import { EventEmitter } from 'node:events';
import { closeSync } from 'node:fs';
import { Socket } from 'node:net';
import { setPriority } from 'node:os';
import type { Readable } from 'node:stream';
import type { ChildProcess } from 'node:child_process';
import { childLogger, type Logger } from '../log/log.js';
import type { SocketAddress } from '../protocol/address.js';
import { defaultDeathGuard, type DeathGuard } from './death-guard.js';
import { isOutsideKill } from './exit-policy.js';
import { captureOutput, RateLimitedLog } from './output.js';
import { TokenBucket } from '../util/token-bucket.js';
import { probeAccept, probeConnect, type ReadyProbe } from './ready-probe.js';
import {
  argvSocketPath,
  checkRuntimeDir,
  freeLoopbackPort,
  listenFd0,
  socketBaseName,
  substituteArgv,
  tcpAddress,
  unixAddress,
  unlinkQuiet,
  type Fd0Listener,
} from './socket.js';
import type { ForkServer } from './fork-server.js';
import { WorkerSpawnError } from './spawn-error.js';
import { checkCwd, resolveCommand, spawnUnforked, startProcess } from './spawn.js';
import type { HandedWorker, ManagedWorker, RetireReason, WorkerAdopter, WorkerEventMap, WorkerExit, WorkerFactory, WorkerOwner, WorkerSpec } from './types.js';
import { execAddonProblem, handOverAddon, spawnAddon } from './exec-addon.js';
import { signalGroup, watchChild } from './reaper.js';
import { systemClock, type Clock } from '../util/clock.js';
import { ErrorCodes } from '../errors.js';
import { acceptFd, blockedIn, readSyscall } from './accept-state.js';

export interface WorkerOptions {
  /** Default: setpriv --pdeathsig when available, else the sh watchdog. */
  deathGuard?: DeathGuard;
  /** Limits logged output lines; default 20 lines/s, burst 100. */
  outputLimiter?: TokenBucket;
  /** preload: the worker is a fork of this parent instead of an exec of the command. */
  forkServer?: ForkServer;
}

/** A worker nobody gives requests (tests, tools): the system clock, no requests, stopped without a reason. */
/** How long after SIGTERM a worker still waiting in accept() gets it again (Worker.retryTermWhileAccepting). */
const TERM_RETRY_MS = 200;

/** Whether sayForked() spoke. */
let forkSaid = false;

const NO_OWNER: WorkerOwner = { clock: systemClock, busy: () => false, requests: () => 0, reason: () => undefined };

export class Worker extends EventEmitter<WorkerEventMap> implements ManagedWorker {
  /** Starts the process on the next tick, so listeners attached now see every event. */
  static spawn(spec: WorkerSpec, logger: Logger, id: number, owner: WorkerOwner = NO_OWNER, opts: WorkerOptions = {}): Worker {
    const w = new Worker(spec, logger, id, owner, opts);
    process.nextTick(() => void w.start());
    return w;
  }

  /**
   * A worker an exec in place of the daemon handed to this code: reaped through reaper.ts
   * (libuv knows nothing of it), its output read again from the inherited pipes, ready at
   * once (it accepted before the exec, and its socket kept queueing connections).
   */
  static adopt(h: HandedWorker, spec: WorkerSpec, logger: Logger, id: number, owner: WorkerOwner = NO_OWNER, opts: WorkerOptions = {}): Worker {
    const age = Math.max(0, Date.now() - h.startedAt);
    const w = new Worker(spec, logger, id, owner, opts, age);
    w.pid = h.pid;
    w.address = unixAddress(h.socket);
    w.socketPath = h.socket;
    w.log = w.log.child({ wpid: h.pid });
    w.out.logger = w.log;
    w.guard.started(h.pid);
    // Into the pool's cgroups and oom_score_adj as a spawned one (the same ones, unless the code changed them).
    spec.onStarted?.(h.pid);
    try {
      w.readOutput(new Socket({ fd: h.out, readable: true, writable: false }), new Socket({ fd: h.err, readable: true, writable: false }), [h.out, h.err]);
    } catch (e) {
      w.log.warn({ code: ErrorCodes.UPGRADE_FAILED, err: (e as Error).message }, `cannot read the output of adopted worker ${h.pid} again: ${(e as Error).message}`);
    }
    process.nextTick(() => {
      watchChild(h.pid, (e) => w.onExit(e.code, e.signal));
      w.onReady();
    });
    return w;
  }

  readonly id: number;
  readonly spec: WorkerSpec;
  pid: number | undefined;
  /** Known at once for Unix sockets; for argv `{port}` the port is filled in before spawn. */
  address: SocketAddress;
  /** Monotonic ms (the owner's clock) it was spawned and became ready. */
  readonly startedAt: number;
  readyAt: number | undefined;

  private readonly owner: WorkerOwner;
  private readonly clock: Clock;
  /** Asked to stop (or timed out) before or after ready: no more start, no ready. */
  private stopping = false;
  /** Its own reason to stop (spawn_timeout), which outranks the owner's. */
  private ownReason: RetireReason | undefined;
  private log: Logger;
  private readonly out: RateLimitedLog;
  private readonly guard: DeathGuard;
  private readonly exitPromise: Promise<WorkerExit>;
  private resolveExit!: (e: WorkerExit) => void;
  private probe: ReadyProbe | undefined;
  private spawnTimer: NodeJS.Timeout | undefined;
  private killTimer: NodeJS.Timeout | undefined;
  private termRetryTimer: NodeJS.Timeout | undefined;
  private termSent = false;
  private killSent = false;
  /** Ended idle with SIGKILL at once (WorkerExit.killedIdle). */
  private killedIdle = false;
  private failureEmitted = false;
  private finished = false;
  private socketPath: string | undefined;
  private readonly forkServer: ForkServer | undefined;
  private child: ChildProcess | undefined;
  /** Its stdout and stderr streams, and their descriptors when the daemon made the pipes (an exec in place can keep them). */
  private streams: Readable[] = [];
  private outFds: [number, number] | undefined;

  private constructor(spec: WorkerSpec, logger: Logger, id: number, owner: WorkerOwner, opts: WorkerOptions, age = 0) {
    super();
    this.id = id;
    this.spec = spec;
    this.owner = owner;
    this.clock = owner.clock;
    this.startedAt = this.clock.now() - age;
    this.guard = opts.deathGuard ?? defaultDeathGuard();
    this.forkServer = opts.forkServer;
    this.log = childLogger(logger, { pool: spec.pool, worker: id });
    this.out = new RateLimitedLog(this.log, opts.outputLimiter ?? new TokenBucket());
    this.address = unixAddress('');
    this.exitPromise = new Promise((resolve) => (this.resolveExit = resolve));
  }

  /** Resolves with the one exit (also after a spawn failure). */
  get exited(): Promise<WorkerExit> {
    return this.exitPromise;
  }

  // ---- what the pool calls ----------------------------------------------------------

  stop(idle = false): Promise<WorkerExit> {
    if (!this.finished) {
      this.stopping = true;
      this.terminate(idle && this.spec.killIdle === true);
    }
    return this.exitPromise;
  }

  /**
   * An exec in place of the daemon follows: hands this worker on when it can go on in the
   * new code (ready, not stopping, on a Unix socket of its own, output on pipes whose
   * descriptors we know); its output is no longer read here (the pipes stay open for the
   * exec), its exit no longer reported, and the watchdog forgets its group.
   */
  handOver(): HandedWorker | undefined {
    const pid = this.pid;
    if (this.finished || this.stopping || this.termSent || pid === undefined || this.readyAt === undefined) return undefined;
    if (this.socketPath === undefined || this.outFds === undefined || this.forkServer !== undefined || this.spec.sharedSocket !== undefined) return undefined;
    // From here this handle reports nothing: the new code adopts the process.
    this.finished = true;
    this.cancelProbe();
    this.clearSpawnTimer();
    this.child?.removeAllListeners('exit');
    for (const s of this.streams) {
      s.removeAllListeners('data');
      s.pause();
    }
    this.out.flush();
    this.guard.exited(pid);
    const now = this.clock.now();
    const wall = Date.now();
    return {
      pid,
      socket: this.socketPath,
      out: this.outFds[0],
      err: this.outFds[1],
      requests: this.owner.requests(),
      startedAt: Math.round(wall - (now - this.startedAt)),
      readyAt: Math.round(wall - (now - this.readyAt)),
    };
  }

  private readOutput(stdout: Readable, stderr: Readable, fds: [number, number] | undefined): void {
    this.streams = [stdout, stderr];
    this.outFds = fds;
    captureOutput(stdout, this.out, 'stdout', 'info');
    captureOutput(stderr, this.out, 'stderr', 'warn');
  }

  // ---- start ------------------------------------------------------------------------

  private async start(): Promise<void> {
    const spec = this.spec;
    const cmd = spec.command[0] ?? '';
    this.spawnTimer = setTimeout(() => this.onSpawnTimeout(), spec.spawnTimeout);
    if (this.stopping) return this.finish(null, null);

    const setupProblem = checkRuntimeDir(spec.runtimeDir) ?? checkCwd(spec.cwd);
    if (setupProblem !== undefined) return this.failWithoutProcess('SETUP', `cannot start ${cmd}: ${setupProblem}`);
    if (this.forkServer !== undefined) return this.startForked(this.forkServer);
    const resolved = resolveCommand(cmd, spec.env, spec.cwd);
    if (!resolved.ok) return this.failWithoutProcess(resolved.errno, resolved.message);

    let args = spec.command.slice(1);
    let fd0: Fd0Listener | undefined;
    const base = socketBaseName(spec.pool, this.id);
    const shared = spec.sharedSocket;
    try {
      if (shared !== undefined) {
        this.address = shared.address;
      } else if (spec.socket === 'fd0') {
        fd0 = await listenFd0(spec.runtimeDir, base);
        this.address = unixAddress(fd0.path);
      } else {
        const wantsSocket = args.some((a) => a.includes('{socket}'));
        const wantsPort = args.some((a) => a.includes('{port}'));
        if (!wantsSocket && !wantsPort) throw new Error('socket "argv" needs {socket} or {port} in the command arguments');
        const sockPath = wantsSocket ? argvSocketPath(spec.runtimeDir, base) : undefined;
        const port = wantsPort ? await freeLoopbackPort() : undefined;
        args = substituteArgv(args, sockPath, port);
        this.address = sockPath !== undefined ? unixAddress(sockPath) : tcpAddress('127.0.0.1', port!);
        this.socketPath = sockPath;
      }
    } catch (e) {
      fd0?.abort();
      return this.failWithoutProcess('SETUP', `cannot start ${cmd}: socket setup failed: ${(e as Error).message}`);
    }
    if (this.stopping) {
      // Stopped while the socket was being prepared.
      fd0?.abort();
      return this.finish(null, null);
    }

    // Pipes the daemon made: the addon's spawn needs them, and an exec in place hands the worker on with them.
    const pipes = outputPipes();
    let child: ChildProcess | undefined;
    let pid: number | undefined;
    try {
      const start = { spec, file: resolved.file, args, fd0: shared?.fd ?? fd0?.fd, guard: this.guard };
      pid = pipes === undefined ? undefined : spawnUnforked({ ...start, output: [pipes[0][1], pipes[1][1]] });
      if (pid === undefined) {
        if (spawnAddon() === undefined) this.sayForked();
        child = startProcess({ ...start, output: pipes && [pipes[0][1], pipes[1][1]] });
      }
    } catch (e) {
      fd0?.abort();
      if (pipes !== undefined) for (const fd of pipes.flat()) closeQuiet(fd);
      const err = e as NodeJS.ErrnoException;
      return this.failWithoutProcess(err.code ?? 'ESPAWN', `cannot start ${resolved.file}: ${err.message}`);
    }
    if (fd0 !== undefined) {
      // Synchronously after spawn(): see socket.ts for why.
      try {
        fd0.handOff();
        this.socketPath = fd0.path;
      } catch (e) {
        fd0.abort();
        this.log.error({ code: ErrorCodes.SPAWN_FAILED, err: e }, 'cannot publish the worker socket');
      }
    }
    // The child has its copies of the write ends: ours would keep the pipes from ever ending.
    if (pipes !== undefined) for (const [, w] of pipes) closeQuiet(w);
    if (child !== undefined) {
      child.on('error', (err: NodeJS.ErrnoException) => this.onChildError(err, resolved.file));
      pid = child.pid;
    }
    if (pid === undefined) {
      if (pipes !== undefined) for (const [r] of pipes) closeQuiet(r);
      return; // spawn failed; 'error' follows
    }
    this.child = child;
    this.pid = pid;
    spec.onStarted?.(pid);
    // `wpid`, not `pid`: the base logger's `pid` is the daemon's.
    this.log = this.log.child({ wpid: pid });
    if (spec.priority !== undefined) {
      try {
        setPriority(pid, spec.priority);
      } catch (e) {
        this.log.warn({ code: ErrorCodes.SPAWN_FAILED, err: (e as Error).message }, `process_priority ${spec.priority} not set: ${(e as Error).message} (below fcgi-pm's own nice value needs root)`);
      }
    }
    this.out.logger = this.log;
    this.guard.started(pid);
    if (child !== undefined) child.on('exit', (code, signal) => this.onExit(code, signal));
    else {
      // Reaped by us, not libuv; still after a hand-over, which ends this handle's reports (onExit), as libuv's reaping goes on for its own.
      const unforked = pid;
      process.nextTick(() => watchChild(unforked, (e) => this.onExit(e.code, e.signal)));
    }
    if (pipes !== undefined) {
      this.readOutput(new Socket({ fd: pipes[0][0], readable: true, writable: false }), new Socket({ fd: pipes[1][0], readable: true, writable: false }), [pipes[0][0], pipes[1][0]]);
    } else this.readOutput(child!.stdout!, child!.stderr!, undefined);
    this.log.debug({ command: [resolved.file, ...args], address: this.address.text }, 'worker spawned');

    // A probe on the shared socket would be taken by any worker.
    if (shared !== undefined) return this.onReady();
    const onReady = (): void => this.onReady();
    this.probe = spec.socket === 'fd0' ? probeAccept(this.address, onReady) : probeConnect(this.address, onReady);
  }

  /**
   * preload: the parent binds the worker's socket in the pool's socket directory and forks
   * a child serving on it; for an `accept: direct` pool the child serves on the pool's
   * shared socket, which the parent holds, and exits after FCGI_PM_MAX_REQUESTS.
   */
  private async startForked(fork: ForkServer): Promise<void> {
    const shared = this.spec.sharedSocket;
    if (shared !== undefined) {
      this.address = shared.address;
      fork.forkShared(this.id, Number(this.spec.env['FCGI_PM_MAX_REQUESTS'] ?? 0) || 0, {
        forked: (pid) => this.onForked(pid),
        failed: (errno, message) => this.failWithoutProcess(errno, message),
        exited: (code, signal) => this.onExit(code, signal),
      });
      return;
    }
    let sockPath: string;
    try {
      sockPath = fork.socketPath(socketBaseName(this.spec.pool, this.id));
    } catch (e) {
      return this.failWithoutProcess('SETUP', `cannot start ${this.spec.command[0]}: socket setup failed: ${(e as Error).message}`);
    }
    this.address = unixAddress(sockPath);
    fork.fork(this.id, sockPath, {
      forked: (pid) => {
        this.socketPath = sockPath;
        this.onForked(pid);
      },
      failed: (errno, message) => this.failWithoutProcess(errno, message),
      exited: (code, signal) => this.onExit(code, signal),
    });
  }

  private onForked(pid: number): void {
    this.pid = pid;
    this.log = this.log.child({ wpid: pid });
    this.out.logger = this.log;
    this.log.debug({ address: this.address.text }, 'worker forked');
    // The socket listens already: connections wait in its backlog for the child's accept.
    if (!this.stopping) this.onReady();
    else this.terminate();
  }

  private onReady(): void {
    this.probe = undefined;
    if (this.stopping || this.readyAt !== undefined) return;
    this.clearSpawnTimer();
    const now = this.clock.now();
    this.readyAt = now;
    this.log.debug({ ms: Math.round(now - this.startedAt) }, 'worker ready');
    this.emit('ready');
  }

  /** Once per daemon: workers are spawned by a fork of the daemon, the addon being missing or older. */
  private sayForked(): void {
    if (forkSaid) return;
    forkSaid = true;
    this.log.info(`workers are spawned by a fork of the daemon (Node's child_process.spawn), not by the native addon: ${execAddonProblem() ?? 'it was built by an older fcgi-pm; run "node scripts/build-native.mjs"'}`);
  }

  private onSpawnTimeout(): void {
    this.spawnTimer = undefined;
    if (this.stopping || this.readyAt !== undefined) return;
    this.stopping = true;
    this.ownReason = 'spawn_timeout';
    this.emitFailure('TIMEOUT', `${this.spec.command[0]} did not accept connections on ${this.address.text} within spawn_timeout (${this.spec.spawnTimeout} ms)`);
    this.terminate();
  }

  private onChildError(err: NodeJS.ErrnoException, file: string): void {
    if (this.pid === undefined) {
      this.failWithoutProcess(err.code ?? 'ESPAWN', `cannot start ${file}: ${err.message}`);
      return;
    }
    this.log.warn({ code: ErrorCodes.INTERNAL, err }, 'worker process error');
  }

  // ---- stop -------------------------------------------------------------------------

  /** SIGTERM to its process group now, SIGKILL after killTimeout (`now`: SIGKILL at once). Once. */
  private terminate(now = false): void {
    this.cancelProbe();
    this.clearSpawnTimer();
    if (this.pid === undefined && !this.finished && this.forkServer?.cancel(this.id) === true) {
      // A fork still waiting for its parent: there is no process to stop.
      return this.failWithoutProcess('CANCELLED', 'stopped before its fork');
    }
    if (this.termSent || this.finished || this.pid === undefined) return; // no process yet: start() sees the state
    this.termSent = true;
    if (now && this.readyAt !== undefined) {
      this.killSent = this.killedIdle = true;
      return this.signalGroup('SIGKILL');
    }
    this.signalGroup('SIGTERM');
    this.retryTermWhileAccepting();
    this.killTimer = setTimeout(() => {
      this.killTimer = undefined;
      if (this.finished) return;
      // Where it waits tells why it sat out SIGTERM (a connection left open to it, a stuck script).
      const blocked = this.pid === undefined ? undefined : blockedIn(this.pid);
      this.log.warn({ code: ErrorCodes.KILL_TIMEOUT, killTimeout: this.spec.killTimeout, blockedIn: blocked }, 'worker did not exit within kill_timeout after SIGTERM; sending SIGKILL');
      this.killSent = true;
      this.signalGroup('SIGKILL');
    }, this.spec.killTimeout);
  }

  /**
   * php-cgi looks for a SIGTERM it got before it blocks in accept(): one that lands between
   * that look and the accept is noted and then slept through, until SIGKILL. A worker still
   * waiting in accept() a moment after SIGTERM serves nothing that a second SIGTERM could cut
   * short, and the second one interrupts the accept.
   */
  private retryTermWhileAccepting(): void {
    const retry = (): void => {
      this.termRetryTimer = undefined;
      if (this.finished || this.pid === undefined || this.killSent) return;
      const line = readSyscall(this.pid);
      const fd = line === undefined ? undefined : acceptFd(line);
      if (fd === undefined || fd === false) return;
      this.signalGroup('SIGTERM');
      this.termRetryTimer = setTimeout(retry, TERM_RETRY_MS);
    };
    this.termRetryTimer = setTimeout(retry, TERM_RETRY_MS);
  }

  private signalGroup(sig: NodeJS.Signals): void {
    if (this.pid !== undefined) signalGroup(this.pid, sig);
  }

  // ---- exit -------------------------------------------------------------------------

  private onExit(code: number | null, signal: NodeJS.Signals | null): void {
    if (this.finished) return;
    // Killed from outside before ready is no failure to start (exit-policy.ts): the exit line says it.
    if (!this.stopping && this.readyAt === undefined && !isOutsideKill(signal, this.reason())) {
      const how = signal !== null ? `was killed by ${signal}` : `exited with code ${code}`;
      const hint = code === 126 || code === 127 ? ' (the command could not be executed)' : '';
      this.emitFailure('EXITED', `${this.spec.command[0]} ${how} before accepting connections${hint}; see its output above`);
    }
    const pid = this.pid!;
    // Members of its group that outlived it (php-cgi children after a crash) still hold the socket.
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      /* none left */
    }
    if (this.forkServer === undefined) this.guard.exited(pid);
    this.finish(code, signal);
  }

  private failWithoutProcess(errno: string, message: string): void {
    this.emitFailure(errno, message);
    this.finish(null, null);
  }

  private emitFailure(errno: string, message: string): void {
    if (this.failureEmitted) return;
    this.failureEmitted = true;
    this.log.error({ errno, code: ErrorCodes.SPAWN_FAILED }, `worker spawn failed: ${message}`);
    this.emit('spawnFailed', new WorkerSpawnError(this.spec.command[0] ?? '', errno, message));
  }

  private finish(code: number | null, signal: NodeJS.Signals | null): void {
    if (this.finished) return;
    this.finished = true;
    this.cancelProbe();
    this.clearSpawnTimer();
    if (this.killTimer !== undefined) clearTimeout(this.killTimer);
    this.killTimer = undefined;
    if (this.termRetryTimer !== undefined) clearTimeout(this.termRetryTimer);
    this.termRetryTimer = undefined;
    if (this.socketPath !== undefined) unlinkQuiet(this.socketPath);
    this.out.flush();
    const busy = this.owner.busy();
    const exit: WorkerExit = {
      code,
      signal,
      reason: this.sentSignal(signal) ? this.reason() : undefined,
      uptime: Math.round(this.clock.now() - this.startedAt),
      ready: this.readyAt !== undefined,
      served: this.owner.requests() - (busy ? 1 : 0),
      busy,
      ...(this.killedIdle ? { killedIdle: true } : {}),
    };
    this.emit('exit', exit);
    this.resolveExit(exit);
  }

  // ---- helpers ----------------------------------------------------------------------

  /**
   * Whether an end by `signal` can be fcgi-pm's stop. A retire reason explains a SIGTERM or
   * SIGKILL death only when fcgi-pm sent that signal (max_memory_hard's SIGKILL is sent by
   * the pool): a worker retired but still draining, or one just sent SIGTERM, that dies of
   * a SIGKILL nobody here sent was killed from outside (an operator, the OOM killer), and
   * its exit is counted as such. A retire decided after the outside kill, before its exit
   * was reaped (its request failed first), must not hide that kill either.
   */
  private sentSignal(signal: NodeJS.Signals | null): boolean {
    if (signal === 'SIGTERM') return this.termSent;
    if (signal === 'SIGKILL') return this.killSent || this.reason() === 'memory_hard';
    return true;
  }

  private reason(): RetireReason | undefined {
    return this.ownReason ?? this.owner.reason();
  }

  private cancelProbe(): void {
    this.probe?.cancel();
    this.probe = undefined;
  }

  private clearSpawnTimer(): void {
    if (this.spawnTimer !== undefined) clearTimeout(this.spawnTimer);
    this.spawnTimer = undefined;
  }
}

/** Pipes for a worker's stdout and stderr ([read, write] each) when the addon can make them; else Node's own. */
function outputPipes(): [[number, number], [number, number]] | undefined {
  const a = handOverAddon();
  if (a === undefined) return undefined;
  let out: [number, number] | undefined;
  try {
    out = a.pipeForChild();
    return [out, a.pipeForChild()];
  } catch {
    // Out of descriptors: Node's own pipes will say so at spawn.
    for (const fd of out ?? []) closeQuiet(fd);
    return undefined;
  }
}

function closeQuiet(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // already closed
  }
}

/** The real WorkerFactory for pools. */
export const spawnWorker: WorkerFactory = (spec, logger, id, owner) => Worker.spawn(spec, logger, id, owner);

/** The real WorkerAdopter for pools. */
export const adoptWorker: WorkerAdopter = (h, spec, logger, id, owner) => Worker.adopt(h, spec, logger, id, owner);
