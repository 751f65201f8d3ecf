/**
 * The composition root: turns a Config into running pools and listeners, and takes
 * them down again.
 *
 * States: new → starting → running → stopping → stopped. A start that fails half-way
 * takes down what it had started and ends in `stopped`. Process-level concerns
 * (signals, uncaught errors, exit codes) live in process.ts, so a Daemon can run
 * inside a test process.
 */
import * as frontend from '../frontend/index.js';
import * as poolModule from '../pool/index.js';
import type { Config, PoolConfig, ListenerConfig, VhostsConfig } from '../config/types.js';
import * as nodePath from 'node:path';
import { runsPhpCgi } from '../config/schema.js';
import type { FrontendContext, Listener } from '../frontend/index.js';
import type { PoolDeps } from '../pool/index.js';
import type { Pool } from '../pool/types.js';
import type { Exchange } from '../protocol/exchange.js';
import { readMeminfo } from '../memory/budget.js';
import { readBox } from '../memory/box-watch.js';
import { createHostGovernor, type HostGovernor } from '../memory/host-governor.js';
import { applyDaemonSlice } from '../memory/cpu-slice.js';
import { settleInLeaf } from '../memory/cgroup-files.js';
import { adjustOwnOomScore } from '../memory/oom-score.js';
import type { BudgetSnapshot } from '../memory/types.js';
import type { SitesView } from '../control/types.js';
import type { SiteEditTarget } from '../dashboard/actions.js';
import type { Logger } from '../log/log.js';
import { logListener, logPool } from '../log/startup.js';
import { assertPreflight, preflightSite } from './preflight.js';
import { addDirectFallbacks } from './direct-fallback.js';
import { PoolRegistry } from './pool-registry.js';
import { Sites } from './vhosts/sites.js';
import { openSiteSource } from './vhosts/open-source.js';
import { freshSubdir, makeRuntimeDir, removeRuntimeDir } from './runtime-dir.js';
import { takeHandover, takeReadySeats, UpgradeError, withHandover, type ExecPlan, type HandedPool, type Handover, type Successor } from './upgrade.js';
import type { HandedWorker } from '../worker/types.js';
import { endHanded } from '../worker/handover.js';
import { watchChild } from '../worker/reaper.js';
import { stopBridge } from './bridge.js';
import { opcacheRoot, ROOT_CACHE_DIR } from '../config/opcache-path.js';
import { RUNTIME_CACHE_SUBDIR, sweepCacheRoots } from '../worker/php-cache.js';
import { Operations, type OperationsOptions } from './operations.js';
import { poolFingerprint, warmStartOf, type ReloadReport } from './reload.js';
import { defaultDeathGuard } from '../worker/death-guard.js';
import { ErrorCodes } from '../errors.js';
import { formatDuration } from '../config/units.js';
import { FdGuard } from '../frontend/fd-guard.js';
import { describeOpenFiles, raiseOpenFilesLimit } from './open-files.js';

/** How long a stop goes on accepting the connections already in the listeners' accept queues. */
const BACKLOG_DRAIN_MS = 1000;

/** How long the new code waits for the upgrade's bridge to finish its requests and exit. */
const BRIDGE_STOP_MS = 5000;

export type DaemonState = 'new' | 'starting' | 'running' | 'stopping' | 'stopped';

export type CreatePool = (cfg: PoolConfig, deps: PoolDeps) => Pool;
export type StartListener = (cfg: ListenerConfig, ctx: FrontendContext) => Promise<Listener>;

export interface DaemonDeps {
  logger: Logger;
  /** Defaults to src/pool's createPool; tests may inject their own. */
  createPool?: CreatePool;
  /** Defaults to src/frontend's startListener. */
  startListener?: StartListener;
  /** Operations: log files, how a reload reads the config, systemd notifier. */
  operations?: Partial<Omit<OperationsOptions, 'logger'>>;
  /** -R / --allow-root: running as root, spawned pools without `user` may run workers as root. */
  allowRoot?: boolean;
}

export interface StopOptions {
  /** Cut running requests now instead of waiting up to shutdown_timeout. */
  immediate?: boolean;
  /** No shutdown_delay: the sockets stay open for what comes next (an exec in place). */
  noDelay?: boolean;
  /** An exec in place follows: idle workers of spawned pools are handed on (handOn()) instead of stopped. */
  handOn?: boolean;
  /** How long running requests may finish, instead of shutdown_timeout (fcgi-pm stop --graceful-timeout). */
  timeoutMs?: number;
}

export class Daemon {
  private _state: DaemonState = 'new';
  private _config: Config;
  private readonly logger: Logger;
  private readonly createPool: CreatePool;
  private readonly startListener: StartListener;
  private readonly allowRoot: boolean;
  /** Looked up per request through ctx.getPool, so reload can swap entries. */
  private readonly registry: PoolRegistry;
  /** vhosts: sites started on their first request (src/daemon/vhosts/sites.ts). */
  private sites: Sites | undefined;
  private readonly listenerList: Listener[] = [];
  private privateDir: string | undefined;
  /** Where this code's workers bind their sockets: the private dir, or after an exec in place that kept it a fresh one in it. */
  private workerDir: string | undefined;
  /** The memory governor all pools share (memory_budget, sampling): docs/memory.md. */
  private governor: HostGovernor | undefined;
  private stopping: Promise<void> | undefined;
  /** Workers the pools handed on in a stop for an exec in place, by pool. */
  private readonly handed: HandedPool[] = [];
  /** Handed workers no pool adopts that the upgrade's bridge may still be using: stopped once it exited. */
  private readonly afterBridge: HandedWorker[][] = [];
  /** When start() began (epoch ms), for the upgrade's phases. */
  private startBegan = 0;
  /** Ends shutdown_delay early (a second signal, an immediate stop). */
  private skipDelay: (() => void) | undefined;
  readonly ctx: FrontendContext;
  /** Status, control socket, reload, access log, systemd (src/daemon/operations.ts). */
  readonly ops: Operations;
  /** Set by process.ts: how a stop asked for over the control socket ends the process. */
  onStopRequest: ((timeoutMs: number | undefined) => void) | undefined;
  /** Set by process.ts: how the end of a successful upgrade (the new daemon serves) ends this process. */
  onHandedOver: ((pid: number) => void) | undefined;
  /** Set by process.ts: how an upgrade by exec (upgrade: exec) stops this daemon and execs the new code. */
  onExec: ((plan: ExecPlan) => void) | undefined;

  constructor(config: Config, deps: DaemonDeps) {
    this._config = config;
    this.logger = deps.logger;
    this.createPool = deps.createPool ?? required(poolModule.createPool, 'createPool', 'src/pool/index.ts');
    this.startListener = deps.startListener ?? required(frontend.startListener, 'startListener', 'src/frontend/index.ts');
    this.allowRoot = deps.allowRoot === true;
    this.ops = new Operations({ ...deps.operations, logger: this.logger });
    this.registry = new PoolRegistry(this.ops.generations, (p, runtimeDir = this.workerDir!) => this.createPool(p, { logger: this.logger.child({ pool: p.name }), runtimeDir, memory: this.governor, opcacheRoot: this.opcacheRoot() }), this.logger);
    this.ctx = {
      // A pool a reload removed still serves the connections of listeners closing with it.
      getPool: (name) => this.registry.get(name),
      route: (params) => this.sites?.route(params),
      site: (host) => this.sites?.siteFor(host),
      limits: { maxBytes: config.limits.maxParamsBytes, maxCount: config.limits.maxParamsCount },
      logger: this.logger.child({ component: 'frontend' }),
      onExchange: (ex: Exchange) => this.ops.onExchange(ex),
      localResponder: this.ops.responder,
      tempDir: () => this.privateDir,
      listen: this.ops.sockets.listen,
    };
    this.ops.attach(this);
    this.ops.setReloadParts({
      pools: this.registry,
      listeners: this.listenerList,
      ctx: this.ctx,
      makePool: (p, runtimeDir) => this.registry.make(p, runtimeDir),
      runtimeDir: () => this.privateDir,
      checkHost: (next) => this.checkHost(next),
      startListener: this.startListener,
      commit: (next) => {
        this._config = next;
        if (next.vhosts !== undefined) void this.sites?.reconfigure(next.vhosts);
        // The cgroup limit may have changed too (systemctl set-property, a resized container).
        this.governor?.rebudget(next.memoryBudget, readMeminfo(), readBox().box);
        this.governor?.setProcessMax(next.maxChildrenTotal ?? 0);
      },
    });
  }

  get state(): DaemonState {
    return this._state;
  }

  get config(): Config {
    return this._config;
  }

  get pools(): ReadonlyMap<string, Pool> {
    return this.registry.pools;
  }

  /** Defined, active and broken vhost sites for status (undefined without vhosts); `all`: every site too. */
  siteEditTarget(id: string): SiteEditTarget | undefined {
    return this.sites?.editTarget(id);
  }

  sitesView(all: boolean): SitesView | undefined {
    const s = this.sites;
    if (s === undefined) return undefined;
    return all ? { ...s.status(), list: s.list() } : s.status();
  }

  get listeners(): readonly Listener[] {
    return this.listenerList;
  }

  /** The shared memory governor (set once started). */
  get memory(): HostGovernor | undefined {
    return this.governor;
  }

  /** The host memory budget and what uses it, for status pages. */
  memorySnapshot(): BudgetSnapshot | undefined {
    return this.governor?.snapshot();
  }

  /** The private 0700 directory for worker sockets (set while started). */
  get runtimeDir(): string | undefined {
    return this.privateDir;
  }

  /** As root, php-cgi pools' cache roots of configs that no longer exist go (src/worker/php-cache.ts). */
  private sweepOpcacheRoots(cfg: Config): void {
    const root = opcacheRoot(cfg);
    if (typeof root !== 'string' || nodePath.dirname(root) !== ROOT_CACHE_DIR || !nodePath.isAbsolute(cfg.source)) return;
    if (![...cfg.pools.values()].some((p) => p.command !== undefined && runsPhpCgi(p.command))) return;
    const swept = sweepCacheRoots(ROOT_CACHE_DIR, { root, source: cfg.source });
    if (swept.length > 0) this.logger.info({ kind: 'opcache_dir', swept }, `removed ${swept.length} opcache file cache root(s) of config files that no longer exist: ${swept.join(', ')}`);
  }

  /**
   * Makes the runtime directory, creates and starts every pool, then opens the
   * listeners (pools first, so the first request finds its workers), after the host
   * checks (src/daemon/preflight.ts). On failure, whatever was started is stopped again
   * and the error is rethrown for the caller to report.
   */
  async start(): Promise<void> {
    if (this._state !== 'new') throw new Error(`Daemon.start() called in state ${this._state}`);
    this._state = 'starting';
    this.startBegan = Date.now();
    const cfg = this._config;
    // After an exec in place: the workers the code before handed on, still our children.
    const handover = takeHandover();
    let adopt = new Map<string, HandedWorker[]>();
    let adoptedCount = 0;
    let bridgeMs: number | undefined;
    try {
      this.checkHost(cfg);
      const made = makeRuntimeDir(cfg, undefined, handover?.runtimeDir);
      this.privateDir = made.dir;
      // The handed workers keep their sockets in the dir they were started in (by pool and worker number, as ours would be).
      this.workerDir = made.reused === true ? freshSubdir(made.dir, 'x').dir : made.dir;
      if (handover !== undefined) adopt = this.sortHanded(handover, made.reused === true);
      adoptedCount = [...adopt.values()].reduce((n, w) => n + w.length, 0);
      if (made.swept.length > 0) this.logger.info({ kind: 'runtime_dir', swept: made.swept }, `removed ${made.swept.length} runtime dir(s) of dead predecessors: ${made.swept.join(', ')}`);
      this.sweepOpcacheRoots(cfg);
      // Before anything binds: sockets from systemd or from the daemon we replace.
      this.ops.adoptInheritedSockets(cfg);
      // Early, so a second daemon on the same control_socket stops here.
      await this.ops.openControl(cfg, { stop: (ms) => this.requestStop(ms), upgrade: () => this.upgrade() });
      this.ops.writePidFile(cfg);
      this.settleInCgroupLeaf();
      this.governor = createHostGovernor(cfg, this.logger.child({ component: 'memory' }));
      if (cfg.daemonShortSlice !== false) applyDaemonSlice(this.logger.child({ component: 'memory' }));
      this.openFiles();
      adjustOwnOomScore(cfg.oomScoreAdj, this.logger.child({ component: 'memory' }));
      // Probe for setpriv now, not inside the first request's cold start (~8 ms).
      if ([...cfg.pools.values()].some((p) => p.command !== undefined)) defaultDeathGuard();
      for (const p of cfg.pools.values()) {
        logPool(this.logger, p);
        this.registry.put(this.registry.make(p), (old) => old.stop(0));
      }
      // After an upgrade in place, as many workers as the daemon we replace had ready.
      const handedSeats = takeReadySeats();
      await Promise.all([...this.registry.pools.values()].map((p) => {
        const warm = warmStartOf(handedSeats.get(p.name) ?? 0);
        const workers = adopt.get(p.name);
        return p.start(workers === undefined ? warm : { seats: warm?.seats ?? 0, step: warm?.step ?? 1, adopt: workers });
      }));
      adopt.clear();
      if (cfg.vhosts !== undefined) await this.startSites(cfg.vhosts);
      // The bridge goes before this code accepts: a php-cgi serves one connection at a time,
      // and the bridge's last requests would wait behind the connections this code keeps open.
      if (handover?.bridge !== undefined) bridgeMs = await this.endBridge(handover.bridge);
      for (const l of cfg.listen) {
        if (this.stopping) break; // a signal arrived while starting
        const listener = await this.startListener(l, this.ctx);
        this.listenerList.push(listener);
        logListener(this.logger, l, listener.address);
      }
      if (!this.stopping) await this.ops.dashboard.open(cfg);
      this.ops.closeUnusedInherited();
    } catch (err) {
      // Handed workers no pool took must not outlive the start that failed.
      for (const workers of [...adopt.values(), ...this.afterBridge.splice(0)]) endHanded(workers, this.logger);
      if (handover?.bridge !== undefined) stopBridge(handover.bridge);
      // The caller reports the error once (src/cli/run.ts); here we only undo.
      await this.stop({ immediate: true });
      throw err;
    }
    if (this.stopping) return;
    this._state = 'running';
    if (handover !== undefined) this.logPhases(handover, adoptedCount, bridgeMs);
    this.logger.info(
      { kind: 'ready', listeners: this.listenerList.length, pools: this.registry.size, sites: this.sites?.status().defined, runtime_dir: this.privateDir, config: cfg.source },
      `fcgi-pm ready: ${this.listenerList.length} listener(s), ${this.registry.size} pool(s)${this.sites ? `, ${this.sites.status().defined} site(s)` : ''}`,
    );
    this.ops.ready();
  }

  /**
   * The workers an exec in place handed on, by pool: those of a pool whose settings are the
   * same go to it (adopted at its start); the others (a changed or removed pool, or their
   * runtime dir not ours any more) are stopped and reaped. One line per pool says which.
   */
  private sortHanded(h: Handover, dirKept: boolean): Map<string, HandedWorker[]> {
    const adopt = new Map<string, HandedWorker[]>();
    for (const hp of h.pools) {
      const p = this._config.pools.get(hp.pool);
      const n = hp.workers.length;
      const same = p !== undefined && dirKept && poolFingerprint(p) === hp.config;
      if (same) adopt.set(hp.pool, hp.workers);
      else if (h.bridge !== undefined) this.afterBridge.push(hp.workers);
      else endHanded(hp.workers, this.logger);
      const why = p === undefined ? 'the pool is gone' : !dirKept ? 'their runtime dir is gone' : 'the pool changed';
      this.logger.info(
        { kind: 'upgrade', pool: hp.pool, handed: n, adopted: same ? n : 0, pids: hp.workers.map((w) => w.pid) },
        same ? `upgrade: pool ${hp.pool}: ${n} worker(s) handed over, adopted` : `upgrade: pool ${hp.pool}: ${n} worker(s) handed over, stopped (${why}); new ones start`,
      );
    }
    return adopt;
  }

  /**
   * The pools are up: the upgrade's bridge (bridge.ts, our child, unknown to libuv) stops
   * (SIGTERM: it finishes what it runs) and is reaped here, within BRIDGE_STOP_MS (then
   * SIGKILL); the handed workers it may have used that no pool adopted go then. Resolves
   * with how long it took.
   */
  private endBridge(pid: number): Promise<number> {
    const began = Date.now();
    return new Promise<number>((resolve) => {
      const timer = setTimeout(() => {
        this.logger.warn({ code: ErrorCodes.KILL_TIMEOUT, kind: 'upgrade', bridge_pid: pid }, `upgrade: the bridge (pid ${pid}) did not stop within ${BRIDGE_STOP_MS} ms; sending SIGKILL`);
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone
        }
      }, BRIDGE_STOP_MS);
      watchChild(pid, (e) => {
        clearTimeout(timer);
        const ms = Date.now() - began;
        this.logger.info({ kind: 'upgrade', bridge_pid: pid, exitCode: e.code, signal: e.signal, ms }, `upgrade: the bridge (pid ${pid}) stopped after its requests`);
        for (const workers of this.afterBridge.splice(0)) endHanded(workers, this.logger);
        resolve(ms);
      });
      stopBridge(pid);
    });
  }

  /** One line with how long each phase of the upgrade that started this code took (kind upgrade_phases). */
  private logPhases(h: Handover, adopted: number, bridgeMs: number | undefined): void {
    const ready = Date.now();
    const t = h.times;
    const bridged = t.bridged ?? t.checked;
    const phases = { check_ms: t.checked - t.begin, bridge_start_ms: bridged - t.checked, stop_ms: t.exec - bridged, boot_ms: this.startBegan - t.exec, start_ms: ready - this.startBegan, bridge_stop_ms: bridgeMs };
    // The bridge's start is the check (operations.ts prepareExec): no check of its own before it.
    const check = h.bridge !== undefined && t.checked === t.begin ? 'bridge' : 'alone';
    this.logger.info(
      { kind: 'upgrade_phases', ...phases, check, total_ms: ready - t.begin, unserved_ms: ready - bridged, bridge: h.bridge !== undefined, handed: h.pools.reduce((n, p) => n + p.workers.length, 0), adopted },
      `upgrade phases: ${check === 'bridge' ? `check and bridge start ${phases.bridge_start_ms} ms` : `check ${phases.check_ms} ms${h.bridge !== undefined ? `, bridge start ${phases.bridge_start_ms} ms` : ''}`}, stop ${phases.stop_ms} ms, exec and load ${phases.boot_ms} ms, start ${phases.start_ms} ms; ` +
        (h.bridge !== undefined ? `the bridge served, then its stop took ${bridgeMs ?? 0} ms while connections waited in the queues` : `no listener accepted for ${ready - t.checked} ms`),
    );
  }

  /**
   * After a stop for an exec in place (stop({handOn})): the plan with the workers the
   * pools handed on, one line per pool saying how many; the private runtime dir stays for them.
   */
  handOn(plan: ExecPlan): ExecPlan {
    for (const hp of this.handed) {
      this.logger.info({ kind: 'upgrade', pool: hp.pool, handed: hp.workers.length, pids: hp.workers.map((w) => w.pid) }, `upgrade: pool ${hp.pool} hands ${hp.workers.length} worker(s) over to the new code`);
    }
    return withHandover(plan, this.handed, this.handed.length > 0 ? this.privateDir : undefined);
  }

  /** What this host would refuse (src/daemon/preflight.ts): throws ConfigError; notices are logged. */
  /** Under a delegated cgroup v2 (systemd's Delegate=yes), into a leaf of it, so pools' memory and CPU cgroups can be made. */
  private settleInCgroupLeaf(): void {
    const r = settleInLeaf();
    const log = this.logger.child({ component: 'memory' });
    if (r === undefined) return;
    if ('moved' in r) log.info({ kind: 'cgroup', leaf: r.moved }, `cgroup: moved into ${r.moved}, so that the pools' cgroups can be made beside it`);
    else log.info({ kind: 'cgroup', why: r.why }, `cgroup: staying where started (${r.why})`);
  }

  private checkHost(cfg: Config): void {
    assertPreflight(cfg, { allowRoot: this.allowRoot }, (line) => this.logger.info({ kind: 'notice' }, line));
    for (const line of addDirectFallbacks(cfg)) this.logger.warn({ code: ErrorCodes.DIRECT_SOCKET, kind: 'direct-fallback' }, line);
  }

  /** Raises RLIMIT_NOFILE and keeps a reserve of descriptors out of the listeners' reach. */
  private openFiles(): void {
    const l = raiseOpenFilesLimit();
    if (l.soft !== undefined && l.soft !== Infinity) this.ctx.fds = new FdGuard(l.soft);
    const fields = { kind: 'open_files', before: l.before, soft: l.soft, hard: l.hard, reserve: this.ctx.fds?.reserve };
    const text = describeOpenFiles(l, this.ctx.fds?.reserve);
    if (l.problem !== undefined) this.logger.warn({ code: ErrorCodes.OPEN_FILES_LIMIT, ...fields }, text);
    else this.logger.info(fields, text);
  }

  /** Reads the sites (their host checks are this daemon's: users, root policy, document_root) and follows their changes. */
  private startSites(v: VhostsConfig): Promise<void> {
    this.sites = new Sites(v, openSiteSource, {
      registry: this.registry,
      logger: this.logger.child({ component: 'vhosts' }),
      check: (site, memo) => preflightSite(site, { allowRoot: this.allowRoot }, memo).problems,
      staticPools: () => new Set(this._config.pools.keys()),
      drainMs: () => this._config.shutdownTimeout,
      runtimeDir: () => this.privateDir,
    });
    return this.sites.start();
  }

  /**
   * SIGUSR2 / fcgi-pm upgrade (src/daemon/upgrade.ts): with `upgrade: exec`, once the new
   * code on disk passed its check, this daemon stops gracefully and the process execs the
   * new code, which takes the same sockets and pid; with `upgrade: spawn`, a new daemon
   * takes over every listening socket, and once it serves this one stops gracefully.
   * Rejects (UpgradeError, logged) when the new code cannot start: this one then serves
   * on as before.
   */
  async upgrade(): Promise<Successor> {
    if (this._state !== 'running') throw new UpgradeError(`cannot upgrade while ${this._state}`);
    const next = await this.ops.upgrade(this.onExec !== undefined);
    if (next.exec !== undefined) this.onExec!(next.exec);
    else if (this.onHandedOver !== undefined) this.onHandedOver(next.pid);
    else void this.stop();
    return next;
  }

  /** A stop asked for over the control socket (fcgi-pm stop). */
  private requestStop(timeoutMs: number | undefined): void {
    if (this.onStopRequest !== undefined) this.onStopRequest(timeoutMs);
    else void this.stop({ timeoutMs });
  }

  /**
   * Stops accepting (listeners close, giving open connections until shutdown_timeout
   * to finish their requests), then stops the pools with what is left of that time
   * (queued requests finish or get 503, workers get SIGTERM → kill_timeout → SIGKILL),
   * then removes the runtime directory. Calling it again returns the same promise;
   * `immediate` on a second call cuts a graceful stop short.
   */
  stop(opts: StopOptions = {}): Promise<void> {
    const immediate = opts.immediate === true;
    if (this.stopping) {
      if (immediate) {
        this.skipDelay?.();
        void this.closeAll(0);
      }
      return this.stopping;
    }
    if (this._state === 'new') {
      this._state = 'stopped';
      this.stopping = Promise.resolve();
      return this.stopping;
    }
    this._state = 'stopping';
    this.ops.stopping();
    const delayMs = immediate || opts.noDelay === true ? 0 : this._config.shutdownDelay;
    this.stopping = this.serveOn(delayMs).then(() => this.closeAll(immediate ? 0 : (opts.timeoutMs ?? this._config.shutdownTimeout), opts.handOn === true)).finally(async () => {
      this.governor?.dispose();
      // Handed workers' sockets are in it: the new code takes it again.
      if (this.handed.length === 0) this.removePrivateDir();
      this.ops.removePidFile();
      this._state = 'stopped';
      this.logger.info({ kind: 'stopped' }, 'fcgi-pm stopped');
      await this.ops.closeControl();
    });
    return this.stopping;
  }

  /**
   * Applies a new config without failing a request (src/daemon/reload.ts): new and
   * changed pools start, then take over in the map ctx.getPool reads; replaced pools
   * drain; listeners open, close or change. Rejects, changing nothing, when a new pool
   * or listener cannot start. Reloads run one at a time.
   */
  reload(next: Config): Promise<ReloadReport> {
    return this.ops.reload(next);
  }

  /** SIGHUP / fcgi-pm reload: re-read the config file, then reload(). Rejects with ConfigError when invalid. */
  reloadFromSource(): Promise<ReloadReport> {
    return this.ops.reloadFromSource();
  }

  /** For a process 'exit' handler: the only cleanup that must happen even on a crash. */
  cleanupSync(): void {
    this.removePrivateDir();
    this.ops.removePidFile();
  }

  /**
   * shutdown_delay: stopping (ready_path answers 503) but still accepting and serving, so
   * a load balancer's health check takes this daemon out of rotation before its
   * listeners close and new connections would be refused.
   */
  private serveOn(ms: number): Promise<void> {
    if (ms <= 0) return Promise.resolve();
    this.logger.info({ kind: 'shutdown', delay_ms: ms }, `serving on for ${formatDuration(ms)} (shutdown_delay) while ready_path answers 503; then the listeners close`);
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.skipDelay = done;
    });
  }

  private async closeAll(timeoutMs: number, handOn = false): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    await this.ops.reloadSettled();
    const left = (): number => Math.max(0, Math.round(deadline - performance.now()));
    // Handed on, the queues stay with the successor; else they are taken before the close resets them.
    if (!handOn && !this.ops.handedOver) {
      const waiting = await this.ops.sockets.drainBacklogs(new Set(this.listenerList.map((l) => l.config.address.text)), Math.min(BACKLOG_DRAIN_MS, left()));
      if (waiting > 0) this.logger.warn({ code: ErrorCodes.STOP_FAILED, kind: 'shutdown', waiting }, `stop: ${waiting} connection(s) still waiting in the listeners' accept queues are reset by the close`);
    }
    const listeners = await Promise.allSettled(this.listenerList.map((l) => l.close(left())));
    this.logFailures(listeners, 'closing a listener failed');
    this.sites?.close();
    // Only the config's own pools hand workers on (a vhosts site's pool starts again on its first request).
    const pools = await this.registry.stopAll(left(), (name) => (handOn && this._config.pools.has(name) ? 'upgrade' : 'shutdown'));
    this.logFailures(pools, 'stopping a pool failed');
    if (handOn) {
      for (const [name, pool] of this.registry.pools) {
        const workers = pool.handedOn?.() ?? [];
        const cfg = this._config.pools.get(name);
        if (workers.length > 0 && cfg !== undefined) this.handed.push({ pool: name, config: poolFingerprint(cfg), workers: [...workers] });
      }
    }
    await this.ops.closeAll(left());
  }

  private logFailures(results: PromiseSettledResult<unknown>[], msg: string): void {
    for (const r of results) if (r.status === 'rejected') this.logger.error({ code: ErrorCodes.STOP_FAILED, err: r.reason }, msg);
  }

  /** php-cgi pools' opcache file caches: the configured or root's, else one in the private dir that every generation of this process shares. */
  private opcacheRoot(): string | false | undefined {
    const root = opcacheRoot(this._config);
    return root === undefined && this.privateDir !== undefined ? nodePath.join(this.privateDir, RUNTIME_CACHE_SUBDIR) : root;
  }

  private removePrivateDir(): void {
    const dir = this.privateDir;
    if (dir === undefined) return;
    this.privateDir = undefined;
    try {
      removeRuntimeDir(dir);
    } catch (err) {
      this.logger.warn({ code: ErrorCodes.STOP_FAILED, err, dir }, 'could not remove the runtime directory');
    }
  }
}

/**
 * The pool and frontend modules may still be declaration-only stubs; a namespace import
 * keeps this module loadable (check, --help) and fails clearly only when used.
 */
function required<F>(fn: F | undefined, name: string, where: string): F {
  if (typeof fn === 'function') return fn;
  return ((..._args: unknown[]) => {
    throw new Error(`${name} is not implemented yet (${where})`);
  }) as F;
}
