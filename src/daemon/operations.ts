/**
 * What an operator needs of a running daemon, wired beside the Daemon so that
 * daemon.ts keeps only small hooks. Three rooms do the work: the per-request observers
 * (request-observers.ts: board, outcomes, access log), the control socket
 * (control-endpoint.ts) and reloads (reload-runner.ts); here they meet the status
 * snapshot and its pages, readiness, log reopening, socket activation, the upgrade in
 * place, the pid file and systemd.
 */
import type { Config } from '../config/types.js';
import { PoolGenerations } from '../control/generations.js';
import { readiness, type Readiness } from '../control/readiness.js';
import { StatusReuse, takeSnapshot, type SnapshotOptions } from '../control/snapshot.js';
import { createStatusResponder, type StatusResponder } from '../control/status-route.js';
import type { ListenerStatus, StatusSnapshot } from '../control/types.js';
import { codeOf, ErrorCodes } from '../errors.js';
import type { LogFiles } from '../log/files.js';
import type { Logger } from '../log/log.js';
import { recentWarnings } from '../log/warning-ring.js';
import type { Pool, PoolActionReport, PoolSnapshot } from '../pool/types.js';
import type { Exchange } from '../protocol/exchange.js';
import { packageVersion } from '../version.js';
import { ControlEndpoint } from './control-endpoint.js';
import { DashboardHost } from './dashboard.js';
import { pidFilePath, removePidFile, writePidFile } from './pid-file.js';
import { readySeats, type ReloadReport } from './reload.js';
import { ReloadRunner, type DaemonView, type ReloadParts } from './reload-runner.js';
import { RequestObservers } from './request-observers.js';
import { SystemdNotifier } from './sd-notify.js';
import { Sockets } from './sockets.js';
import { checkSuccessor, execPlan, startSuccessor, tellPredecessor, UpgradeError, type Successor } from './upgrade.js';
import { closeDuplicates, dupForExec, execSupport } from './exec-in-place.js';
import { bridgeBlocker, startBridge, stopBridge } from './bridge.js';

export { AlreadyRunningError } from './control-endpoint.js';
export type { DaemonView, ReloadParts } from './reload-runner.js';

/** What the control socket asks of the Daemon itself. */
export interface DaemonControl {
  stop(timeoutMs: number | undefined): void;
  upgrade(): Promise<Successor>;
}

export interface OperationsOptions {
  logger: Logger;
  /** Shown in status; default: package.json's. */
  version?: string | undefined;
  /** Log files (run.ts); without them the access log goes to the main logger. */
  logFiles?: LogFiles | undefined;
  /** Re-reads the config for a reload; default: the file the running config came from. */
  loadConfig?: (() => Config) | undefined;
  notifier?: SystemdNotifier | undefined;
}

export class Operations {
  readonly generations = new PoolGenerations();
  readonly responder: StatusResponder;
  readonly notifier: SystemdNotifier;
  /** The web dashboard, when the config has a dashboard section (src/dashboard/). */
  readonly dashboard: DashboardHost;
  readonly observers: RequestObservers;
  private readonly control: ControlEndpoint;
  private readonly reloads: ReloadRunner;
  private readonly logger: Logger;
  private readonly version: string;
  private readonly logFiles: LogFiles | undefined;
  private readonly startedAt = Date.now();
  /** The dashboard's samples of this daemon keep idle pools' statuses between them. */
  private readonly sampleReuse = new StatusReuse();
  private view!: DaemonView;
  private parts: ReloadParts | undefined;
  /** Every listening socket: adopted, bound, handed on (sockets.ts). */
  readonly sockets: Sockets;
  private readonly closingListeners = new Set<Promise<void>>();

  constructor(opts: OperationsOptions) {
    this.logger = opts.logger;
    this.version = opts.version ?? packageVersion();
    this.logFiles = opts.logFiles;
    this.notifier = opts.notifier ?? new SystemdNotifier(opts.logger.child({ component: 'systemd' }));
    this.observers = new RequestObservers(opts.logger, opts.logFiles, () => this.view.pools);
    this.sockets = new Sockets(opts.logger);
    this.control = new ControlEndpoint(opts.logger, this.sockets);
    this.reloads = new ReloadRunner({
      logger: opts.logger,
      notifier: this.notifier,
      loadConfig: opts.loadConfig,
      inherited: this.sockets.inherited,
      closing: (p) => {
        this.closingListeners.add(p);
        void p.finally(() => this.closingListeners.delete(p));
      },
      applied: async (cur, next) => {
        // The registry's names, not the file's: site pools are in no config file.
        this.observers.outcomes.forget(new Set(this.view.pools.keys()), new Set(this.view.listeners.map((l) => l.address)));
        await this.dashboard.apply(next);
        return this.applyDaemonSettings(cur, next);
      },
    });
    this.dashboard = new DashboardHost(
      { config: () => this.view.config, site: (id) => this.view.siteEditTarget?.(id), snapshot: (what) => this.snapshot({ processes: what.processes === true, allSites: what.allSites === true, reuse: what.sample === true ? this.sampleReuse : undefined }), reload: () => this.reloadFromSource(), poolAction: (pool, verb) => (verb === 'restart' ? this.restartPool(pool) : this.poolAction(pool, verb === 'drain' ? 'drain' : 'rollingRestart')) },
      opts.logger.child({ component: 'dashboard' }),
      this.sockets.listen,
    );
    this.responder = createStatusResponder((o) => this.snapshot(o), (pool) => this.readiness(pool), opts.logger.child({ component: 'status' }));
  }

  /** Called once by the Daemon's constructor. */
  attach(view: DaemonView): void {
    this.view = view;
    this.reloads.attach(view);
    this.observers.configure(view.config);
  }

  onExchange(ex: Exchange): void {
    this.observers.onExchange(ex);
  }

  // ---- status ----------------------------------------------------------------------

  /** ready_path and `fcgi-pm ready`: the daemon's state, and a pool's own figures when one is named. */
  readiness(pool?: string): Readiness {
    const v = this.view;
    if (pool === undefined) return readiness(v.state);
    let snap: PoolSnapshot | undefined;
    try {
      snap = v.pools.get(pool)?.snapshot();
    } catch {
      snap = undefined;
    }
    return readiness(v.state, { name: pool, snap });
  }

  snapshot(opts: SnapshotOptions = {}): Promise<StatusSnapshot> {
    const v = this.view;
    return takeSnapshot(
      {
        version: this.version,
        pid: process.pid,
        startedAt: this.startedAt,
        state: () => (this.reloads.reloading && v.state === 'running' ? 'reloading' : v.state),
        configSource: () => v.config.source,
        controlSocket: () => this.control.path,
        reloads: () => ({ ...this.reloads.stats }),
        listeners: () => v.listeners.map((l): ListenerStatus => ({
          address: l.address,
          protocol: l.config.protocol,
          pool: l.config.pool,
          connections: l.connections,
          accepted: l.accepted,
          refused: l.refused,
          overflowed: l.overflowed || undefined,
          outcomes: this.observers.outcomes.ofListener(l.address),
          name: l.config.name,
          statusPath: l.config.statusPath,
          pingPath: l.config.pingPath,
          inherited: this.sockets.inherited.has(l.config.address.text) || undefined,
        })),
        pools: () => v.pools,
        generations: this.generations,
        board: this.observers.board,
        outcomes: this.observers.outcomes,
        memory: v.memorySnapshot ? () => v.memorySnapshot!() : undefined,
        sites: (all) => v.sitesView?.(all),
      },
      opts,
    );
  }

  // ---- logs -------------------------------------------------------------------------

  /** SIGUSR1 or fcgi-pm reopen-logs: reopen log files (after logrotate moved them); returns their paths. */
  reopenLogs(why = 'SIGUSR1'): string[] {
    const files = this.logFiles?.reopen() ?? [];
    this.logger.info({ kind: 'logs', files }, files.length > 0 ? `${why}: reopened ${files.join(', ')}` : `${why}: logs go to stdout; nothing to reopen`);
    return files;
  }

  // ---- listening sockets (sockets.ts) ------------------------------------------------

  /** Takes the sockets systemd or the daemon we replace passed us (before anything binds). */
  adoptInheritedSockets(cfg: Config): void {
    this.sockets.adopt(cfg);
  }

  /** Once started: inherited sockets no listener took are closed. */
  closeUnusedInherited(): void {
    this.sockets.closeUnused();
  }

  // ---- lifecycle --------------------------------------------------------------------

  /**
   * The daemon is serving: tell systemd (READY=1 with our MAINPID), then, when an upgrade
   * in place started us, the daemon we replace (which then stops).
   */
  ready(): void {
    const v = this.view;
    void this.notifier.ready(`serving ${v.listeners.length} listener(s), ${v.pools.size} pool(s)`).then(() => {
      if (tellPredecessor()) this.logger.info({ kind: 'upgrade' }, 'serving; told the daemon we replace to stop');
    });
  }

  // ---- upgrade in place, pid file -----------------------------------------------------

  private upgrading: Promise<Successor> | undefined;
  /** The sockets went to a new daemon or the new code (an upgrade): their queues are its. */
  handedOver = false;
  private pidPath: string | undefined;

  /**
   * Upgrade in place (src/daemon/upgrade.ts). `upgrade: exec` where the process can exec
   * (`canExec`: a daemon attached to its process): resolves once the new code passed its
   * check, with the plan the process execs once its requests finished. Otherwise (or
   * `upgrade: spawn`) starts a new daemon with our sockets and resolves once it serves.
   */
  upgrade(canExec = false): Promise<Successor> {
    if (this.handedOver) return Promise.reject(new UpgradeError('this daemon already handed its sockets to a new one'));
    if (this.upgrading !== undefined) return Promise.reject(new UpgradeError('an upgrade is already under way'));
    const begin = Date.now();
    const run = async (): Promise<Successor> => {
      await this.reloadSettled();
      const seats = new Map<string, number>();
      for (const [name, pool] of this.view.pools) seats.set(name, readySeats(pool));
      if ((this.view.config.upgrade ?? 'exec') === 'exec') {
        const why = canExec ? execSupport() : 'this daemon does not own its process';
        if (why === undefined) return this.prepareExec(seats, begin);
        this.logger.warn({ code: ErrorCodes.UPGRADE_NO_EXEC, kind: 'upgrade', reason: why }, `upgrade: cannot re-execute in place (${why}); starting the new code with a new pid instead, which a supervisor waiting on pid ${process.pid} sees exit`);
      }
      const sockets = this.sockets.handOn();
      this.logger.info({ kind: 'upgrade', sockets: sockets.length }, `upgrade: starting a new daemon with ${sockets.length} listening socket(s)`);
      const next = await startSuccessor(sockets, seats);
      this.handedOver = true;
      this.sockets.handedOn();
      // New control connections go to the new daemon.
      this.control.handOver();
      this.logger.info({ kind: 'upgrade', new_pid: next.pid }, `upgrade: the new daemon (pid ${next.pid}) serves; this one (pid ${process.pid}) stops after its requests`);
      return next;
    };
    const p = run().then(
      (next) => next,
      (err: unknown) => {
        this.logger.error({ kind: 'upgrade', code: codeOf(err, ErrorCodes.UPGRADE_FAILED), err: (err as Error).message }, `upgrade failed: ${(err as Error).message}`);
        throw err;
      },
    );
    this.upgrading = p;
    void p.finally(() => (this.upgrading = undefined)).catch(() => undefined);
    return p;
  }

  /**
   * upgrade: exec, once the new code passed its check (the bridge's start, or without a
   * bridge a run in check mode: one start of the new code before the exec, not two): the
   * sockets are duplicated (so they outlive the servers the stop closes, and connections
   * wait in their queues), the pid file stays (the pid does), and systemd hears RELOADING=1
   * (READY=1 comes from the new code).
   */
  private async prepareExec(seats: ReadonlyMap<string, number>, begin: number): Promise<Successor> {
    const bridge = await this.startBridge();
    // With a bridge, the check was its start: the phases then show no check of their own.
    let checked = begin;
    if (bridge === undefined) {
      this.logger.info({ kind: 'upgrade' }, 'upgrade: checking that the new code on disk starts');
      try {
        await checkSuccessor();
      } catch (err) {
        for (const pool of this.view.pools.values()) pool.holdForHandover?.(false);
        throw err;
      }
      checked = Date.now();
    }
    const sockets = this.sockets.handOn();
    const kept: typeof sockets = [];
    try {
      for (const s of sockets) kept.push({ ...s, fd: dupForExec(s.fd) });
    } catch (err) {
      closeDuplicates(kept.map((s) => s.fd));
      if (bridge !== undefined) {
        stopBridge(bridge);
        for (const pool of this.view.pools.values()) pool.holdForHandover?.(false);
      }
      throw new UpgradeError(`cannot keep the listening sockets for the exec: ${(err as Error).message}; still serving`);
    }
    this.handedOver = true;
    this.sockets.handedOn();
    this.pidPath = undefined;
    void this.notifier.reloading();
    this.logger.info({ kind: 'upgrade', sockets: kept.length, exec: true }, `upgrade: the new code starts; pid ${process.pid} re-executes it once its running requests finish, keeping ${kept.length} listening socket(s) (new connections wait in their queues)`);
    return { pid: process.pid, exec: { ...execPlan(kept, seats), times: { begin, checked, bridged: Date.now() }, ...(bridge !== undefined ? { bridge } : {}) } };
  }

  /**
   * The bridge (bridge.ts) when this config can have one: the new code started on the
   * listeners' sockets (its start is the new code's check), serving through the workers
   * that will be handed on while the process re-executes; undefined when there is none.
   */
  private async startBridge(): Promise<number | undefined> {
    const cfg = this.view.config;
    const sockets = this.sockets.handOn();
    // Never the Unix socket files' owner: the bridge's stop must leave them to the new code.
    const listeners = sockets.filter((s) => s.address !== undefined && cfg.listen.some((l) => l.address.text === s.address)).map((s) => ({ ...s, ownsPath: false }));
    const missing = cfg.listen.find((l) => !listeners.some((s) => s.address === l.address.text));
    const workers = new Map<string, string[]>();
    for (const [name, pool] of this.view.pools) {
      const addrs = pool.holdForHandover?.() ?? [];
      if (addrs.length > 0) workers.set(name, addrs);
    }
    const why = bridgeBlocker(cfg) ?? (missing !== undefined ? `no descriptor for listener ${missing.address.text}` : workers.size === 0 ? 'no worker to hand on' : undefined);
    if (why !== undefined) {
      this.logger.info({ kind: 'upgrade', bridge: false, reason: why }, `upgrade: no bridge (${why}); connections wait in the queues while the process re-executes`);
      return undefined;
    }
    this.logger.info({ kind: 'upgrade', bridge: true, pools: Object.fromEntries([...workers].map(([n, a]) => [n, a.length])) }, 'upgrade: checking the new code on disk by starting it as a bridge that serves through the workers while the process re-executes');
    try {
      const b = await startBridge(listeners, workers);
      this.logger.info({ kind: 'upgrade', bridge_pid: b.pid }, `upgrade: the new code passed its check and serves as the bridge (pid ${b.pid}); the process re-executes it`);
      return b.pid;
    } catch (err) {
      for (const pool of this.view.pools.values()) pool.holdForHandover?.(false);
      const told = err instanceof UpgradeError ? err.told : undefined;
      if (told !== undefined) throw new UpgradeError(`the new code cannot start (its check exited with ${told.exit}: ${told.message}); not upgrading, still serving`);
      throw new UpgradeError(`the upgrade's bridge did not start (${(err as Error).message.replace(/; still serving$/, '')}); not upgrading, still serving`);
    }
  }

  writePidFile(cfg: Config): void {
    const path = pidFilePath(cfg);
    if (path === undefined) return;
    try {
      writePidFile(path);
      this.pidPath = path;
    } catch (err) {
      this.logger.warn({ code: ErrorCodes.PID_FILE, path, err: (err as Error).message }, `could not write the pid file ${path}: ${(err as Error).message}`);
    }
  }

  /** Only while it names us: after an upgrade it names the new daemon. */
  removePidFile(): void {
    const path = this.pidPath;
    if (path === undefined) return;
    this.pidPath = undefined;
    removePidFile(path);
  }

  /**
   * Binds the control socket (control-endpoint.ts): ERR_ALREADY_RUNNING when another
   * daemon answers there.
   */
  openControl(cfg: Config, handlers: DaemonControl): Promise<void> {
    return this.control.open(cfg, {
      status: (req) => this.snapshot({ processes: req.processes === true, allSites: req.all_sites === true }),
      reload: () => this.reloadFromSource(),
      restart: (pool, rolling) => (rolling ? this.poolAction(pool, 'rollingRestart') : this.restartPool(pool)),
      drain: (pool) => this.poolAction(pool, 'drain'),
      warnings: () => recentWarnings.list(),
      stop: (ms) => handlers.stop(ms),
      ready: (pool) => this.readiness(pool),
      upgrade: async () => {
        const next = await handlers.upgrade();
        return next.exec === undefined ? { pid: next.pid } : { pid: next.pid, exec: true, started: this.startedAt };
      },
      reopenLogs: () => ({ files: this.reopenLogs('fcgi-pm reopen-logs') }),
      ping: () => ({ pid: process.pid, config: this.view.config.source, version: this.version, started: this.startedAt, shutdown_timeout_ms: this.view.config.shutdownTimeout, shutdown_delay_ms: this.view.config.shutdownDelay }),
    });
  }

  /** A stop began: tell systemd, unless the service goes on in the daemon that replaced us. */
  stopping(): void {
    if (!this.handedOver) void this.notifier.stopping();
  }

  /** End of a stop: stop draining generations, wait for closing listeners, close the control socket. */
  async closeAll(timeoutMs: number): Promise<void> {
    await this.dashboard.close();
    await Promise.allSettled(this.generations.draining.map((p) => p.stop(timeoutMs, 'shutdown')));
    await Promise.allSettled([...this.closingListeners]);
  }

  closeControl(): Promise<void> {
    return this.control.close();
  }

  /** Pools replaced or removed by a reload, still draining: a closing listener's requests reach them. */
  drainingPool(name: string): Pool | undefined {
    return this.generations.drainingPool(name);
  }

  // ---- reload and pool actions --------------------------------------------------------

  /** Daemon hands its private parts once started. */
  setReloadParts(parts: ReloadParts): void {
    this.parts = parts;
    this.reloads.setParts(parts);
  }

  /** SIGHUP or `fcgi-pm reload`: re-read the config file and apply it. */
  reloadFromSource(): Promise<ReloadReport> {
    return this.reloads.reloadFromSource();
  }

  /** Applies a config (already loaded and valid). */
  reload(next: Config): Promise<ReloadReport> {
    return this.reloads.reload(next);
  }

  /** Fresh workers for one pool, by the reload's graceful swap of the running config. */
  restartPool(pool: string): Promise<ReloadReport> {
    return this.reloads.restartPool(pool);
  }

  /** Resolves once no reload runs (a stop waits, so pools a reload is starting are stopped too). */
  reloadSettled(): Promise<void> {
    return this.reloads.reloadSettled();
  }

  /** A spawned pool's drain or rolling restart (Supervisor); not serialised with reloads, it changes no config. */
  poolAction(name: string, action: 'drain' | 'rollingRestart'): Promise<PoolActionReport> {
    const pool = this.view.pools.get(name);
    if (pool === undefined) return Promise.reject(new Error(`no pool named "${name}" (pools: ${[...this.view.pools.keys()].join(', ')})`));
    const run = pool[action]?.bind(pool);
    if (run === undefined) return Promise.reject(new Error(`pool ${name} is external: fcgi-pm does not run its workers`));
    return run();
  }

  /** Limits, log settings, access log, control socket: daemon-wide settings. */
  private applyDaemonSettings(cur: Config, next: Config): string[] {
    const notes: string[] = [];
    const ctx = this.parts!.ctx;
    ctx.limits.maxBytes = next.limits.maxParamsBytes;
    ctx.limits.maxCount = next.limits.maxParamsCount;
    if (this.logFiles !== undefined) notes.push(...this.logFiles.apply(next.log));
    else this.logger.level = next.log.level;
    this.observers.configure(next);
    this.control.follow(cur, next);
    return notes;
  }
}

