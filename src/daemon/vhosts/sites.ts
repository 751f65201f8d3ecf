/**
 * The vhost sites of a running daemon: their definitions (from a SiteSource), the host
 * index, and which sites have a pool. A site's pool is created by its first request
 * (through the pool registry, zero workers, pm ondemand unless the site says
 * otherwise) and evicted after vhosts.idle_timeout without requests. A changed or
 * removed site's pool drains (its queued and running requests finish) while the next
 * request makes a new one from the new definition; a definition that does not validate
 * is reported once and changes nothing (a site keeps its last good definition).
 */
import { rmSync } from 'node:fs';
import * as nodePath from 'node:path';
import type { SiteConfig, VhostsConfig } from '../../config/types.js';
import type { SitesView } from '../../control/types.js';
import type { SiteEditTarget } from '../../dashboard/actions.js';
import { ConfigError, ErrorCodes } from '../../errors.js';
import { EpisodeLimiter } from '../../log/episode-limiter.js';
import type { Logger } from '../../log/log.js';
import type { Pool } from '../../pool/types.js';
import type { CgiParams } from '../../protocol/params.js';
import type { PoolRegistry } from '../pool-registry.js';
import type { SiteCheckMemo } from '../preflight.js';
import { siteFromText, sitePool } from '../../config/site.js';
import { stable } from '../reload.js';
import { freshSubdir } from '../runtime-dir.js';
import { SiteIndex } from './site-index.js';
import type { SiteSource, SourceRead } from './source.js';

/** Distinct unknown names remembered at once for the once-a-minute log; more share one line. */
const UNKNOWN_NAMES_KEPT = 1024;

export interface SitesDeps {
  registry: PoolRegistry;
  logger: Logger;
  /** The host checks of one site (src/daemon/preflight.ts): its problems, none when it may run. */
  check(site: SiteConfig, memo: SiteCheckMemo): string[];
  /** Names of the config file's own pools: a site may not take one. */
  staticPools(): ReadonlySet<string>;
  /** How long a replaced or evicted site's requests may finish. */
  drainMs(): number;
  /** The daemon's private runtime directory (worker sockets). */
  runtimeDir(): string | undefined;
  now?: () => number;
}

export interface Routed {
  site: SiteConfig;
  pool: Pool;
}

type Eviction = 'idle' | 'changed' | 'removed';

/** What an eviction means for the site's next request, as its log line says. */
const EVICTED: Record<Eviction, (site: string, idleS: number) => string> = {
  idle: (site, idleS) => `site ${site} idle for ${idleS}s: its pool is stopped; the next request starts a new one`,
  changed: (site) => `site ${site} changed: its pool drains, the next request starts a new one`,
  removed: (site) => `site ${site} removed: its pool drains; its hosts now get 404 (or the default site)`,
};

export class Sites {
  private cfg: VhostsConfig;
  private defs = new Map<string, SiteConfig>();
  private index = new SiteIndex();
  /** Sites with a pool, and when each last got a request. */
  private readonly lastUsed = new Map<string, number>();
  /** Broken definitions and the text last reported for each (reported again only when it changes). */
  private readonly broken = new Map<string, string>();
  private readonly unknown: EpisodeLimiter<string>;
  private readonly now: () => number;
  private sweeper: NodeJS.Timeout | undefined;
  private poolDirs = 0;
  private sourceFailed = false;

  private source: SiteSource;

  /** `open`: the source a vhosts section names (open-source.ts). */
  constructor(
    cfg: VhostsConfig,
    private readonly open: (cfg: VhostsConfig) => SiteSource,
    private readonly deps: SitesDeps,
  ) {
    this.cfg = cfg;
    this.source = open(cfg);
    this.now = deps.now ?? (() => performance.now());
    this.unknown = new EpisodeLimiter({
      intervalMs: 60_000,
      summary: (name, n) => deps.logger.warn({ code: ErrorCodes.VHOST_UNKNOWN, host: name, repeats: n }, `${n} more request(s) for ${name === '*' ? 'other unknown hosts' : `unknown host ${name}`} in the last minute`),
    });
  }

  /** Reads the source, then follows its changes and evicts idle sites. */
  async start(): Promise<void> {
    await this.refresh();
    this.source.watch(() => void this.refresh());
    this.armSweeper();
  }

  /** Often enough that a site goes within a quarter of idle_timeout past it. */
  private armSweeper(): void {
    clearInterval(this.sweeper);
    this.sweeper = setInterval(() => this.sweep(), Math.max(250, Math.min(this.cfg.idleTimeout / 4, 10_000)));
    this.sweeper.unref();
  }

  /** A reload: new settings; a new source or new defaults open the source afresh. The source is read again. */
  reconfigure(cfg: VhostsConfig): Promise<void> {
    const fresh = JSON.stringify([cfg.source, cfg.defaults, cfg.pollInterval]) !== JSON.stringify([this.cfg.source, this.cfg.defaults, this.cfg.pollInterval]);
    const sweep = cfg.idleTimeout !== this.cfg.idleTimeout;
    this.cfg = cfg;
    if (sweep) this.armSweeper();
    if (fresh) {
      this.source.close();
      this.source = this.open(cfg);
      this.source.watch(() => void this.refresh());
    }
    return this.refresh();
  }

  close(): void {
    this.source.close();
    clearInterval(this.sweeper);
    this.unknown.flush();
  }

  status(): SitesView {
    const brokenSites = [...this.broken].map(([id, error]) => ({ id, error }));
    return { defined: this.defs.size, active: this.lastUsed.size, broken: this.broken.size, brokenSites, source: this.source.label };
  }

  /** Every defined site, for status --all-sites. */
  list(): NonNullable<SitesView['list']> {
    return [...this.defs.values()].map((s) => ({ id: s.id, names: s.names, documentRoot: s.documentRoot, active: this.lastUsed.has(s.id) }));
  }

  /**
   * Where site `id` is defined, for the dashboard's edits: its file and the checks a
   * load makes (schema, host checks, a name another site has), or why it is not edited
   * here (a database table). undefined: no such site.
   */
  editTarget(id: string): SiteEditTarget | undefined {
    if (!this.defs.has(id) && !this.broken.has(id)) return undefined;
    const file = this.source.fileOf?.(id);
    if (file === undefined) return { readOnly: `site ${id} is defined in ${this.source.label}: change it there (the dashboard edits only site files)` };
    return { file, validate: (text) => this.problemsOf(id, text, file) };
  }

  private problemsOf(id: string, text: string, file: string): string[] {
    let site: SiteConfig;
    try {
      site = siteFromText(id, text, this.cfg, file, this.source.baseDir ?? nodePath.dirname(file));
    } catch (err) {
      if (err instanceof ConfigError) return err.problems;
      return [`${file}: ${(err as Error).message}`];
    }
    if (this.deps.staticPools().has(id)) return [`${site.origin}: site id ${id} is also a pool of the config file; rename one`];
    const host = this.deps.check(site, new Map());
    if (host.length > 0) return host;
    const others = [...this.defs.values()].filter((s) => s.id !== id);
    return SiteIndex.build([...others, site]).problems.filter((p) => p.site.id === id).map((p) => p.message);
  }

  /** The site `host` names, else default_site; no pool is made. */
  siteFor(host: string | undefined, server?: string): SiteConfig | undefined {
    let site = host === undefined ? undefined : this.index.lookup(host);
    if (site === undefined && server !== undefined && server !== host) site = this.index.lookup(server);
    const fallback = this.cfg.defaultSite;
    return site ?? (fallback === undefined ? undefined : this.defs.get(fallback));
  }

  /**
   * The site a request names (HTTP_HOST, else SERVER_NAME; then default_site) and its
   * pool, created on first use. undefined: no site; logged once per name per minute.
   */
  route(params: CgiParams): Routed | undefined {
    const host = params.get('HTTP_HOST');
    const server = params.get('SERVER_NAME');
    const site = this.siteFor(host, server);
    if (site === undefined) {
      this.reportUnknown(host ?? server ?? '');
      return undefined;
    }
    this.lastUsed.set(site.id, this.now());
    return { site, pool: this.deps.registry.obtain(site.id, () => sitePool(site), () => this.poolDir(site.id)) };
  }

  private reportUnknown(sent: string): void {
    const host = sent.length > 255 ? `${sent.slice(0, 255)}…` : sent; // a client chooses it
    const key = this.unknown.size < UNKNOWN_NAMES_KEPT ? host : '*';
    if (this.unknown.hit(key)) {
      this.deps.logger.warn({ code: ErrorCodes.VHOST_UNKNOWN, host }, `no site is named ${JSON.stringify(host)} (and no default_site); answered 404`);
    }
  }

  private refreshing: Promise<void> = Promise.resolve();
  private again = false;

  /**
   * Reads the source and applies what changed; a source that cannot be read changes
   * nothing. One read at a time; calls meanwhile make one more read after it.
   */
  refresh(): Promise<void> {
    if (this.again) return this.refreshing;
    this.again = true;
    this.refreshing = this.refreshing
      .then(() => {
        this.again = false;
        return this.readOnce();
      })
      .catch((err: unknown) => this.deps.logger.error({ code: ErrorCodes.VHOST_SOURCE, err }, `applying the sites of ${this.source.label} failed`));
    return this.refreshing;
  }

  private async readOnce(): Promise<void> {
    let read;
    try {
      read = await this.source.read();
    } catch (err) {
      if (!this.sourceFailed) this.deps.logger.error({ code: ErrorCodes.VHOST_SOURCE, err: (err as Error).message }, `${(err as Error).message}; the sites known keep serving`);
      this.sourceFailed = true;
      return;
    }
    if (this.sourceFailed) this.deps.logger.info({ kind: 'vhosts' }, `${this.source.label} can be read again`);
    this.sourceFailed = false;
    const { good: next, problems, index: built } = await judgeSites(read, this.deps.staticPools(), this.deps.check, this.defs);
    // A broken definition of a known site keeps its previous one serving.
    for (const id of problems.keys()) {
      const old = this.defs.get(id);
      if (old !== undefined && !next.has(id)) next.set(id, old);
    }
    this.reportBroken(problems, next);
    const index = problems.size > 0 ? SiteIndex.build(next.values()).index : built;
    const before = this.defs;
    this.defs = next;
    this.index = index;
    this.retireChanged(before, next);
  }

  private reportBroken(problems: Map<string, string[]>, kept: Map<string, SiteConfig>): void {
    for (const [id, texts] of problems) {
      const text = texts.join('\n');
      if (this.broken.get(id) === text) continue;
      this.broken.set(id, text);
      const keeps = kept.has(id) ? '; it keeps its previous definition' : '';
      this.deps.logger.error({ code: ErrorCodes.VHOST_INVALID, site: id, problems: texts }, `site ${id} is not valid${keeps}: ${texts.join('; ')}`);
    }
    for (const id of this.broken.keys()) {
      if (problems.has(id)) continue;
      this.broken.delete(id);
      if (kept.has(id)) this.deps.logger.info({ kind: 'vhosts', site: id }, `site ${id} is valid again`);
    }
  }

  /** Pools of sites whose definition changed or went away drain; the next request makes a new one. */
  private retireChanged(before: Map<string, SiteConfig>, after: Map<string, SiteConfig>): void {
    for (const id of [...this.lastUsed.keys()]) {
      const old = before.get(id);
      const now = after.get(id);
      if (now !== undefined && old !== undefined && sameSite(old, now)) continue;
      this.evict(id, now === undefined ? 'removed' : 'changed');
    }
  }

  /** Sites idle past idle_timeout with nothing queued or running lose their pool. */
  sweep(): void {
    const cutoff = this.now() - this.cfg.idleTimeout;
    for (const [id, at] of this.lastUsed) {
      if (at > cutoff) continue;
      const pool = this.deps.registry.pools.get(id);
      const snap = pool?.snapshot();
      if (snap !== undefined && (snap.active > 0 || snap.queued > 0)) continue;
      this.evict(id, 'idle');
    }
  }

  private evict(id: string, why: Eviction): void {
    this.lastUsed.delete(id);
    const drain = this.deps.drainMs();
    const dir = this.dirs.get(id);
    this.dirs.delete(id);
    const had = this.deps.registry.retire(id, (old) => {
      return old.stop(drain, why === 'idle' ? 'shutdown' : 'reload').finally(() => {
        if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
      });
    });
    if (had) this.deps.logger.info({ kind: 'vhosts', site: id, why }, EVICTED[why](id, Math.round(this.cfg.idleTimeout / 1000)));
  }

  private readonly dirs = new Map<string, string>();

  /** A fresh directory per pool of a site (runtime-dir.ts freshSubdir): an evicted or replaced pool's workers still own theirs. */
  private poolDir(id: string): string | undefined {
    const base = this.deps.runtimeDir();
    if (base === undefined) return undefined;
    const { dir, n } = freshSubdir(base, 's', this.poolDirs);
    this.poolDirs = n;
    this.dirs.set(id, dir);
    return dir;
  }
}

/**
 * The sites of a read that may run, and the problems of the others: the source's own,
 * the host checks (`check`), an id a config pool has, a name an earlier site has.
 * `known`: sites checked before; the same object is not checked again.
 */
export async function judgeSites(
  read: SourceRead,
  statics: ReadonlySet<string>,
  check: (site: SiteConfig, memo: SiteCheckMemo) => string[],
  known: ReadonlyMap<string, SiteConfig> = new Map(),
): Promise<{ good: Map<string, SiteConfig>; problems: Map<string, string[]>; index: SiteIndex }> {
  const good = new Map<string, SiteConfig>();
  const problems = new Map<string, string[]>();
  for (const b of read.broken) problems.set(b.id, b.problems);
  let checked = 0;
  // Host checks are made once per distinct pool settings in a read, fresh in the next.
  const memo: SiteCheckMemo = new Map();
  for (const site of read.sites) {
    if (known.get(site.id) === site) {
      good.set(site.id, site); // the source handed back the object it validated before
      continue;
    }
    if (++checked % 100 === 0) await new Promise((r) => setImmediate(r)); // as the sources do: garbage dies young
    const why = statics.has(site.id) ? [`${site.origin}: site id ${site.id} is also a pool of the config file; rename one`] : check(site, memo);
    if (why.length > 0) problems.set(site.id, why);
    else good.set(site.id, site);
  }
  const built = SiteIndex.build(good.values());
  for (const p of built.problems) {
    good.delete(p.site.id);
    problems.set(p.site.id, [p.message]);
  }
  return { good, problems, index: built.index };
}

export function sameSite(a: SiteConfig, b: SiteConfig): boolean {
  return a === b || (a.documentRoot === b.documentRoot && a.baseDir === b.baseDir && a.names.join(' ') === b.names.join(' ') && stable(a.rewrite) === stable(b.rewrite) && stable(a.settings) === stable(b.settings));
}
