/**
 * Running reloads: one at a time (SIGHUP, `fcgi-pm reload`, a pool restart and the
 * dashboard's edits queue behind each other), checked against the host first, applied
 * by applyReload (reload.ts), counted for status and reported to systemd and the log.
 */
import * as nodePath from 'node:path';
import { loadConfig } from '../config/load.js';
import type { Config, ListenerConfig, PoolConfig } from '../config/types.js';
import type { DaemonStatus, SitesView } from '../control/types.js';
import type { SiteEditTarget } from '../dashboard/actions.js';
import { ConfigError, ErrorCodes, codeOf } from '../errors.js';
import type { FrontendContext, Listener } from '../frontend/index.js';
import type { Logger } from '../log/log.js';
import { logListener, logPool } from '../log/startup.js';
import type { Pool } from '../pool/types.js';
import type { PoolRegistry } from './pool-registry.js';
import { applyReload, type ReloadReport } from './reload.js';
import { freshSubdir } from './runtime-dir.js';
import type { SystemdNotifier } from './sd-notify.js';

/** What operations and reloads read of the daemon (Daemon has these getters). */
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

export interface ReloadRunnerOptions {
  logger: Logger;
  notifier: SystemdNotifier;
  /** Re-reads the config for a reload; default: the file the running config came from. */
  loadConfig?: (() => Config) | undefined;
  /** Listener addresses systemd handed over (a reload keeps them). */
  inherited: ReadonlySet<string>;
  /** A listener a reload closes: a stop waits for it. */
  closing(p: Promise<void>): void;
  /** After the new config is committed: the daemon-wide settings; returns notes for the report. */
  applied(cur: Config, next: Config): Promise<string[]>;
}

export class ReloadRunner {
  private readonly logger: Logger;
  private readonly notifier: SystemdNotifier;
  private readonly loadNext: (() => Config) | undefined;
  private readonly opts: ReloadRunnerOptions;
  private view!: DaemonView;
  private parts: ReloadParts | undefined;
  private reloadChain: Promise<unknown> = Promise.resolve();
  private generation = 0;
  /** A reload is being applied (status says "reloading"). */
  reloading = false;
  readonly stats: DaemonStatus['reloads'] = { ok: 0, failed: 0, last: undefined };

  constructor(opts: ReloadRunnerOptions) {
    this.opts = opts;
    this.logger = opts.logger;
    this.notifier = opts.notifier;
    this.loadNext = opts.loadConfig;
  }

  attach(view: DaemonView): void {
    this.view = view;
  }

  /** Daemon hands its private parts once started. */
  setParts(parts: ReloadParts): void {
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
          inherited: this.opts.inherited,
          restart,
          closing: (p) => this.opts.closing(p),
        },
        next,
      );
      parts.commit(next);
      report.notes.push(...(await this.opts.applied(cur, next)));
      this.stats.ok++;
      this.stats.last = { at: Date.now(), ok: true };
      this.logger.info({ kind: 'reload', ok: true, ...report }, `reload done: pools +${report.pools.added.length} -${report.pools.removed.length} ~${report.pools.changed.length} (${report.pools.retuned.length} in place), listeners +${report.listeners.added.length} -${report.listeners.removed.length} ~${report.listeners.reopened.length + report.listeners.updated.length}`);
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

  /** A fresh directory per reload for the new pools' worker sockets (runtime-dir.ts freshSubdir). */
  private generationDir(parts: ReloadParts): string | undefined {
    const base = parts.runtimeDir();
    if (base === undefined) return undefined;
    const { dir, n } = freshSubdir(base, 'r', this.generation);
    this.generation = n;
    return dir;
  }

  private failed(err: unknown): void {
    this.stats.failed++;
    const message = (err as Error)?.message ?? String(err);
    this.stats.last = { at: Date.now(), ok: false, error: message };
    const problems = err instanceof ConfigError ? err.problems : undefined;
    this.logger.error({ kind: 'reload', ok: false, code: codeOf(err, ErrorCodes.RELOAD_FAILED), problems }, `reload failed, still running the previous config: ${message}`);
  }
}

function defaultLoad(cur: Config): Config {
  if (!nodePath.isAbsolute(cur.source)) {
    throw new Error(`fcgi-pm was started without a config file (${cur.source}); there is nothing to reload`);
  }
  return loadConfig(cur.source);
}
