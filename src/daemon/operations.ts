/**
 * What an operator needs of a running daemon (issue 5), wired beside the Daemon so that
 * daemon.ts keeps only small hooks: the access log and the in-flight board (every
 * exchange's onFinish), the status snapshot and its pages on the listeners, the control
 * socket, reload (serialised, counted, reported to systemd), log reopening, and socket
 * activation.
 */
import type { Server } from 'node:net';
import { mkdirSync, statSync } from 'node:fs';
import * as nodePath from 'node:path';
import { controlSocketPath, isDefaultControlSocket } from '../config/control-path.js';
import { loadConfig } from '../config/load.js';
import type { Config, ListenerConfig, PoolConfig } from '../config/types.js';
import { PoolGenerations } from '../control/generations.js';
import { OutcomeCounter } from '../control/outcomes.js';
import { readiness, type Readiness } from '../control/readiness.js';
import { RequestBoard } from '../control/request-board.js';
import { whoAnswers } from '../control/client.js';
import { ControlServer, type BoundControl, type ControlHandlers } from '../control/server.js';
import { takeSnapshot, type SnapshotOptions } from '../control/snapshot.js';
import { createStatusResponder, type StatusResponder } from '../control/status-route.js';
import type { DaemonStatus, ListenerStatus, SitesView, StatusSnapshot } from '../control/types.js';
import { ConfigError, ErrorCodes, codeOf } from '../errors.js';
import type { FrontendContext, Listener } from '../frontend/index.js';
import { adoptListeningFd, closeUnusedAdopted, hasAdoptedFd, keepUnixPaths, listeningFd, listenOn, ListenError, releaseUnixPath } from '../frontend/listen.js';
import { createAccessLog, type AccessLogger } from '../log/access.js';
import type { LogFiles } from '../log/files.js';
import type { Logger } from '../log/log.js';
import { recentWarnings } from '../log/warning-ring.js';
import { logListener, logPool } from '../log/startup.js';
import type { Pool, PoolActionReport, PoolSnapshot } from '../pool/types.js';
import type { Exchange } from '../protocol/exchange.js';
import type { PoolRegistry } from './pool-registry.js';
import { DashboardHost } from './dashboard.js';
import type { SiteEditTarget } from '../dashboard/actions.js';
import { applyReload, type ReloadReport } from './reload.js';
import { SystemdNotifier } from './sd-notify.js';
import { describeInherited, matchInherited, takeInheritedSockets, type InheritedSocket } from './socket-activation.js';
import { startSuccessor, tellPredecessor, upgradeAddress, UpgradeError, type HandedSocket, type Successor } from './upgrade.js';
import { pidFilePath, removePidFile, writePidFile } from './pid-file.js';
import { packageVersion } from '../version.js';

/** Another daemon answers on this one's control socket. */
export class AlreadyRunningError extends Error {
  readonly code = ErrorCodes.ALREADY_RUNNING;
  constructor(message: string) {
    super(message);
    this.name = 'AlreadyRunningError';
  }
}

/** What the control socket asks of the Daemon itself. */
export interface DaemonControl {
  stop(timeoutMs: number | undefined): void;
  upgrade(): Promise<Successor>;
}

/** What operations reads of the daemon (Daemon has these getters). */
export interface DaemonView {
  readonly state: string;
  readonly config: Config;
  readonly pools: ReadonlyMap<string, Pool>;
  readonly listeners: readonly Listener[];
  memorySnapshot?(): unknown;
  sitesView?(all: boolean): SitesView | undefined;
  /** A vhosts site's definition, for the dashboard's edits. */
  siteEditTarget?(id: string): SiteEditTarget | undefined;
}

/** What a reload may change, handed in by Daemon.reload (its private parts). */
export interface ReloadParts {
  pools: PoolRegistry;
  listeners: Listener[];
  ctx: FrontendContext;
  /** `runtimeDir`: where its workers' sockets go (default the daemon's private dir). */
  makePool(cfg: PoolConfig, runtimeDir?: string): Pool;
  runtimeDir(): string | undefined;
  /** The host checks (src/daemon/preflight.ts): throws when the config cannot run here. */
  checkHost(next: Config): void;
  startListener(cfg: ListenerConfig, ctx: FrontendContext): Promise<Listener>;
  commit(next: Config): void;
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
  readonly board = new RequestBoard();
  readonly outcomes = new OutcomeCounter();
  readonly generations = new PoolGenerations();
  readonly responder: StatusResponder;
  readonly notifier: SystemdNotifier;
  /** The web dashboard, when the config has a dashboard section (src/dashboard/). */
  readonly dashboard: DashboardHost;
  private readonly logger: Logger;
  private readonly version: string;
  private readonly logFiles: LogFiles | undefined;
  private readonly loadNext: (() => Config) | undefined;
  private readonly startedAt = Date.now();
  private view!: DaemonView;
  private access: AccessLogger | undefined;
  private control: ControlServer | undefined;
  private controlPath: string | undefined;
  private readonly inherited = new Set<string>();
  private readonly closingListeners = new Set<Promise<void>>();
  private reloadChain: Promise<unknown> = Promise.resolve();
  private reloading = false;
  private readonly reloadStats: DaemonStatus['reloads'] = { ok: 0, failed: 0, last: undefined };
  /** The one onFinish of every exchange: board and access log, no closure per request. */
  readonly finish = (ex: Exchange): void => {
    // One clock read for both.
    const now = performance.now();
    this.board.finished(ex, now);
    this.outcomes.finished(ex, now);
    const a = this.access;
    if (a !== undefined) a(ex, now);
  };

  constructor(opts: OperationsOptions) {
    this.logger = opts.logger;
    this.version = opts.version ?? packageVersion();
    this.logFiles = opts.logFiles;
    this.loadNext = opts.loadConfig;
    this.notifier = opts.notifier ?? new SystemdNotifier(opts.logger.child({ component: 'systemd' }));
    this.dashboard = new DashboardHost(
      { config: () => this.view.config, site: (id) => this.view.siteEditTarget?.(id), snapshot: (what) => this.snapshot({ processes: what.processes === true, allSites: what.allSites === true }), reload: () => this.reloadFromSource(), poolAction: (pool, verb) => (verb === 'restart' ? this.restartPool(pool) : this.poolAction(pool, verb === 'drain' ? 'drain' : 'rollingRestart')) },
      opts.logger.child({ component: 'dashboard' }),
    );
    this.responder = createStatusResponder((o) => this.snapshot(o), (pool) => this.readiness(pool), opts.logger.child({ component: 'status' }));
  }

  /** Called once by the Daemon's constructor. */
  attach(view: DaemonView): void {
    this.view = view;
    this.configureAccessLog(view.config);
  }

  onExchange(ex: Exchange): void {
    this.board.add(ex);
    ex.onFinish = this.finish;
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
        state: () => (this.reloading && v.state === 'running' ? 'reloading' : v.state),
        configSource: () => v.config.source,
        controlSocket: () => this.controlPath,
        reloads: () => ({ ...this.reloadStats }),
        listeners: () => v.listeners.map((l): ListenerStatus => ({
          address: l.address,
          protocol: l.config.protocol,
          pool: l.config.pool,
          connections: l.connections,
          accepted: l.accepted,
          refused: l.refused,
          overflowed: l.overflowed || undefined,
          outcomes: this.outcomes.ofListener(l.address),
          name: l.config.name,
          statusPath: l.config.statusPath,
          pingPath: l.config.pingPath,
          inherited: this.inherited.has(l.config.address.text) || undefined,
        })),
        pools: () => v.pools,
        generations: this.generations,
        board: this.board,
        outcomes: this.outcomes,
        memory: v.memorySnapshot ? () => v.memorySnapshot!() : undefined,
        sites: (all) => v.sitesView?.(all),
      },
      opts,
    );
  }

  // ---- logs -------------------------------------------------------------------------

  private configureAccessLog(cfg: Config): void {
    const pools = cfg.pools;
    this.access = createAccessLog({
      logger: this.logger,
      enabled: cfg.log.access,
      format: cfg.log.accessFormat,
      file: this.logFiles?.access,
      slowMs: (name) => (name === undefined ? 0 : (pools.get(name)?.slowRequest ?? 0)),
      workerFigures: (pid) => this.workerFigures(pid),
    });
  }

  private figures = new Map<number, { memory: number | undefined; cpu: number | undefined }>();
  private figuresAt = -Infinity;

  /** Latest memory/CPU sample of a worker, for %M and %C; pool snapshots read at most once a second. */
  private workerFigures(pid: number): { memory: number | undefined; cpu: number | undefined } | undefined {
    const now = performance.now();
    if (now - this.figuresAt > 1000) {
      this.figuresAt = now;
      this.figures = new Map();
      for (const p of this.view.pools.values()) {
        for (const w of p.snapshot().workers) {
          const m = (w as { memory?: { pss?: number; rss?: number; cpu?: number } }).memory;
          if (m !== undefined) this.figures.set(w.pid, { memory: m.pss ?? m.rss, cpu: m.cpu });
        }
      }
    }
    return this.figures.get(pid);
  }

  /** SIGUSR1 or fcgi-pm reopen-logs: reopen log files (after logrotate moved them); returns their paths. */
  reopenLogs(why = 'SIGUSR1'): string[] {
    const files = this.logFiles?.reopen() ?? [];
    this.logger.info({ kind: 'logs', files }, files.length > 0 ? `${why}: reopened ${files.join(', ')}` : `${why}: logs go to stdout; nothing to reopen`);
    return files;
  }

  // ---- socket activation ------------------------------------------------------------

  /** Inherited sockets no listener claimed: kept open and handed on by an upgrade in place. */
  private readonly unclaimed: InheritedSocket[] = [];

  /**
   * Hands inherited listening sockets to what will bind them (call before the control
   * socket and listeners bind): those an upgrade in place handed on name their address;
   * systemd's are matched to listeners by name, then address.
   */
  adoptInheritedSockets(cfg: Config): void {
    const sockets = takeInheritedSockets();
    if (sockets.length === 0) return;
    const fromSystemd: InheritedSocket[] = [];
    for (const s of sockets) {
      const address = upgradeAddress(s.name);
      if (address === undefined) fromSystemd.push(s);
      else {
        adoptListeningFd(address, s.fd);
        this.inherited.add(address);
      }
    }
    const { byListener, unmatched } = matchInherited(fromSystemd, cfg.listen);
    for (const [l, s] of byListener) {
      adoptListeningFd(l.address.text, s.fd);
      this.inherited.add(l.address.text);
      this.logger.info({ kind: 'socket-activation', fd: s.fd, name: s.name, listener: l.address.text }, `listener ${l.protocol} ${l.address.text} takes over ${describeInherited(s)} from systemd`);
    }
    for (const s of unmatched) {
      this.unclaimed.push(s);
      this.logger.warn({ code: ErrorCodes.SOCKET_UNMATCHED, kind: 'socket-activation', fd: s.fd, name: s.name }, `socket ${describeInherited(s)} from systemd matches no listener (by name or address); it is not served`);
    }
  }

  /** Once started: inherited sockets for addresses the config no longer has are closed, not left to queue connections. */
  closeUnusedInherited(): void {
    const left = closeUnusedAdopted();
    if (left.length > 0) this.logger.info({ kind: 'upgrade', closed: left }, `inherited sockets no listener uses, closed: ${left.join(', ')}`);
  }

  /** Every listening socket this daemon holds, for an upgrade in place. */
  handedSockets(): HandedSocket[] {
    const out: HandedSocket[] = [];
    for (const l of this.view.listeners) {
      const fd = l.fd;
      if (fd !== undefined) out.push({ fd, address: l.config.address.text });
    }
    const cfd = this.control?.fd;
    if (cfd !== undefined && this.controlPath !== undefined) out.push({ fd: cfd, address: `unix:${this.controlPath}` });
    const d = this.dashboard.handoff;
    if (d !== undefined) out.push(d);
    for (const s of this.unclaimed) out.push({ fd: s.fd, name: s.name });
    return out;
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
  /** The sockets went to a new daemon: this one only drains now. */
  private handedOver = false;
  private pidPath: string | undefined;

  /** Starts a new daemon with our sockets (src/daemon/upgrade.ts); resolves once it serves. */
  upgrade(): Promise<Successor> {
    if (this.handedOver) return Promise.reject(new UpgradeError('this daemon already handed its sockets to a new one'));
    if (this.upgrading !== undefined) return Promise.reject(new UpgradeError('an upgrade is already under way'));
    const run = async (): Promise<Successor> => {
      await this.reloadSettled();
      const sockets = this.handedSockets();
      this.logger.info({ kind: 'upgrade', sockets: sockets.length }, `upgrade: starting a new daemon with ${sockets.length} listening socket(s)`);
      const next = await startSuccessor(sockets);
      this.handedOver = true;
      keepUnixPaths();
      // New control connections go to the new daemon; a reply under way on ours still goes out.
      const c = this.control;
      this.control = undefined;
      if (c !== undefined) void c.close(false);
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

  private controlHandlers: DaemonControl | undefined;

  /**
   * Binds the control socket. A daemon that answers there already (the same config
   * started twice, or two configs told to share a path) stops this start with
   * ERR_ALREADY_RUNNING, except in the quick form, which then runs without a control
   * socket (a warning): its default is one shared name. Other failures to bind throw for
   * a configured path and warn for a derived one.
   */
  async openControl(cfg: Config, handlers: DaemonControl): Promise<void> {
    this.controlHandlers = handlers;
    const path = controlSocketPath(cfg);
    if (path === undefined) return;
    const all: ControlHandlers = {
      status: (req) => this.snapshot({ processes: req.processes === true, allSites: req.all_sites === true }),
      reload: () => this.reloadFromSource(),
      restart: (pool, rolling) => (rolling ? this.poolAction(pool, 'rollingRestart') : this.restartPool(pool)),
      drain: (pool) => this.poolAction(pool, 'drain'),
      warnings: () => recentWarnings.list(),
      stop: (ms) => handlers.stop(ms),
      ready: (pool) => this.readiness(pool),
      upgrade: async () => ({ pid: (await handlers.upgrade()).pid }),
      reopenLogs: () => ({ files: this.reopenLogs('fcgi-pm reopen-logs') }),
      ping: () => ({ pid: process.pid, config: this.view.config.source, version: this.version, shutdown_timeout_ms: this.view.config.shutdownTimeout, shutdown_delay_ms: this.view.config.shutdownDelay }),
    };
    const quickDefault = isDefaultControlSocket(cfg) && !nodePath.isAbsolute(cfg.source);
    // Handed on by the daemon we replace (upgrade in place): it answers there until it leaves.
    const other = hasAdoptedFd(`unix:${path}`) ? undefined : await whoAnswers(path);
    if (other !== undefined && !quickDefault) {
      const who = `pid ${other.pid ?? '?'}, config ${other.config ?? '?'}`;
      throw new AlreadyRunningError(`another fcgi-pm (${who}) answers on the control socket ${path}; not starting a second daemon for ${cfg.source}`);
    }
    try {
      const dir = nodePath.dirname(path);
      const isDefault = isDefaultControlSocket(cfg);
      // The derived default for a non-root user may sit in a shared tmpdir: private, and
      // ours, or not used at all. /run/fcgi-pm and runtime_dir may hold listener sockets: 0755.
      const privateDir = isDefault && cfg.runtimeDir === undefined && !dir.startsWith('/run/');
      mkdirSync(dir, { recursive: true, mode: privateDir ? 0o700 : 0o755 });
      const st = statSync(dir);
      const uid = process.getuid?.() ?? 0;
      if (isDefault && st.uid !== uid && st.uid !== 0) throw new Error(`${dir} belongs to uid ${st.uid}, not to us`);
      const identity = { pid: process.pid, config: cfg.source };
      this.control = await ControlServer.start(path, cfg.controlSocketMode ?? 0o600, all, this.logger.child({ component: 'control' }), bindControl, identity);
      this.controlPath = path;
      this.logger.info({ kind: 'control', path }, `control socket ${path} (fcgi-pm status, reload, stop, workers)`);
    } catch (err) {
      // A derived path that cannot be bound (a foreign directory) is not worth refusing to serve over.
      if (!isDefaultControlSocket(cfg)) {
        throw new ListenError(`control_socket ${path}: ${(err as Error).message.replace(/^unix:\S+: /, '')}; is another fcgi-pm running with this config? ("fcgi-pm status -c FILE" tells)`);
      }
      const hint = quickDefault ? 'run it from a config file, or set control_socket, to give it its own' : 'set control_socket to give this daemon its own';
      this.logger.warn({ code: ErrorCodes.CONTROL_SOCKET, kind: 'control', path, err: (err as Error).message }, `no control socket: ${(err as Error).message}; ${hint}`);
    }
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

  async closeControl(): Promise<void> {
    const c = this.control;
    this.control = undefined;
    if (c !== undefined) await c.close();
  }

  /** Pools replaced or removed by a reload, still draining: a closing listener's requests reach them. */
  drainingPool(name: string): Pool | undefined {
    return this.generations.drainingPool(name);
  }

  // ---- reload -----------------------------------------------------------------------

  private parts: ReloadParts | undefined;

  /** Daemon hands its private parts once started. */
  setReloadParts(parts: ReloadParts): void {
    this.parts = parts;
  }

  /** SIGHUP or `fcgi-pm reload`: re-read the config file and apply it. */
  reloadFromSource(): Promise<ReloadReport> {
    return this.serialised(async () => {
      let next: Config;
      try {
        next = this.loadNext ? this.loadNext() : defaultLoad(this.view.config);
      } catch (err) {
        this.failed(err);
        throw err;
      }
      return this.apply(next);
    });
  }

  /** Applies a config (already loaded and valid). */
  reload(next: Config): Promise<ReloadReport> {
    return this.serialised(() => this.apply(next));
  }

  /** Fresh workers for one pool, by the reload's graceful swap of the running config. */
  restartPool(pool: string): Promise<ReloadReport> {
    return this.serialised(() => {
      if (!this.view.config.pools.has(pool)) return Promise.reject(new Error(`no pool named "${pool}" (pools: ${[...this.view.config.pools.keys()].join(', ')})`));
      return this.apply(this.view.config, new Set([pool]));
    });
  }

  /** A spawned pool's drain or rolling restart (Supervisor); not serialised with reloads, it changes no config. */
  poolAction(name: string, action: 'drain' | 'rollingRestart'): Promise<PoolActionReport> {
    const pool = this.view.pools.get(name);
    if (pool === undefined) return Promise.reject(new Error(`no pool named "${name}" (pools: ${[...this.view.pools.keys()].join(', ')})`));
    const run = pool[action]?.bind(pool);
    if (run === undefined) return Promise.reject(new Error(`pool ${name} is external: fcgi-pm does not run its workers`));
    return run();
  }

  /** Resolves once no reload runs (a stop waits, so pools a reload is starting are stopped too). */
  reloadSettled(): Promise<void> {
    return this.reloadChain.then(() => undefined);
  }

  private serialised<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.reloadChain.then(fn, fn);
    this.reloadChain = run.catch(() => undefined);
    return run;
  }

  private async apply(next: Config, restart?: ReadonlySet<string>): Promise<ReloadReport> {
    const v = this.view;
    const parts = this.parts;
    if (v.state !== 'running' || parts === undefined) {
      const err = new Error(`cannot reload while ${v.state}`);
      this.failed(err);
      throw err;
    }
    const cur = v.config;
    try {
      parts.checkHost(next);
    } catch (err) {
      this.failed(err);
      throw err;
    }
    this.reloading = true;
    void this.notifier.reloading();
    this.logger.info({ kind: 'reload', config: next.source }, `reloading ${next.source}`);
    try {
      const report = await applyReload(
        {
          current: cur,
          pools: parts.pools,
          listeners: parts.listeners,
          ctx: parts.ctx,
          logger: this.logger,
          makePool: (p) => {
            logPool(this.logger, p);
            return parts.makePool(p, this.generationDir(parts));
          },
          startListener: async (l, ctx) => {
            const listener = await parts.startListener(l, ctx);
            logListener(this.logger, l, listener.address);
            return listener;
          },
          inherited: this.inherited,
          restart,
          closing: (p) => {
            this.closingListeners.add(p);
            void p.finally(() => this.closingListeners.delete(p));
          },
        },
        next,
      );
      parts.commit(next);
      // The registry's names, not the file's: site pools are in no config file.
      this.outcomes.forget(new Set(this.view.pools.keys()), new Set(this.view.listeners.map((l) => l.address)));
      await this.dashboard.apply(next);
      report.notes.push(...this.applyDaemonSettings(cur, next));
      this.reloadStats.ok++;
      this.reloadStats.last = { at: Date.now(), ok: true };
      this.logger.info({ kind: 'reload', ok: true, ...report }, `reload done: pools +${report.pools.added.length} -${report.pools.removed.length} ~${report.pools.changed.length}, listeners +${report.listeners.added.length} -${report.listeners.removed.length} ~${report.listeners.reopened.length + report.listeners.updated.length}`);
      for (const n of report.notes) this.logger.warn({ code: ErrorCodes.RELOAD_INCOMPLETE, kind: 'reload' }, n);
      return report;
    } catch (err) {
      this.failed(err);
      throw err;
    } finally {
      this.reloading = false;
      if (v.state === 'running') void this.notifier.ready(`serving ${v.listeners.length} listener(s), ${v.pools.size} pool(s)`);
    }
  }

  private generation = 0;

  /**
   * A fresh 0700 directory per reload for the new pools' worker sockets: a replaced pool's
   * workers (same pool name, same worker numbers) still own their socket paths until they
   * exit, and remove them when they do.
   */
  private generationDir(parts: ReloadParts): string | undefined {
    const base = parts.runtimeDir();
    if (base === undefined) return undefined;
    const dir = nodePath.join(base, `r${++this.generation}`);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    return dir;
  }

  private failed(err: unknown): void {
    this.reloadStats.failed++;
    const message = (err as Error)?.message ?? String(err);
    this.reloadStats.last = { at: Date.now(), ok: false, error: message };
    const problems = err instanceof ConfigError ? err.problems : undefined;
    this.logger.error({ kind: 'reload', ok: false, code: codeOf(err, ErrorCodes.RELOAD_FAILED), problems }, `reload failed, still running the previous config: ${message}`);
  }

  /** Limits, log settings, access log, control socket: daemon-wide settings. */
  private applyDaemonSettings(cur: Config, next: Config): string[] {
    const notes: string[] = [];
    const ctx = this.parts!.ctx;
    ctx.limits.maxBytes = next.limits.maxParamsBytes;
    ctx.limits.maxCount = next.limits.maxParamsCount;
    if (this.logFiles !== undefined) notes.push(...this.logFiles.apply(next.log));
    else this.logger.level = next.log.level;
    this.configureAccessLog(next);
    const oldPath = controlSocketPath(cur);
    const newPath = controlSocketPath(next);
    if (oldPath !== newPath || cur.controlSocketMode !== next.controlSocketMode) {
      const old = this.control;
      this.control = undefined;
      this.controlPath = undefined;
      // The reply to this reload still goes out on the old connection; new ones use the new path.
      void (async () => {
        if (old !== undefined) await old.close(false);
        if (this.controlHandlers !== undefined) await this.openControl(next, this.controlHandlers).catch((err: unknown) => this.logger.error({ code: ErrorCodes.CONTROL_SOCKET, err }, 'control socket could not be opened'));
      })();
    }
    return notes;
  }
}

function defaultLoad(cur: Config): Config {
  if (!nodePath.isAbsolute(cur.source)) {
    throw new Error(`fcgi-pm was started without a config file (${cur.source}); there is nothing to reload`);
  }
  return loadConfig(cur.source);
}

async function bindControl(server: Server, path: string, mode: number): Promise<BoundControl> {
  await listenOn(server, { kind: 'unix', path, text: `unix:${path}` }, { mode });
  return { fd: () => listeningFd(server), release: () => releaseUnixPath(server) };
}
