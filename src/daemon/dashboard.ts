/**
 * The daemon's side of the dashboard (src/dashboard/): opened at start when the config
 * has a `dashboard:` section, given this daemon's snapshot, config file and reload;
 * reopened by a reload that adds, removes or moves it (other settings are read live).
 * The dashboard's modules load when it first opens: a daemon without one never holds them.
 */
import type { Config, DashboardConfig } from '../config/types.js';
import type { PoolVerb, SiteEditTarget } from '../dashboard/actions.js';
import type { DashboardServer } from '../dashboard/server.js';
import type { ReadWhat } from '../dashboard/peers.js';
import type { StatusSnapshot } from '../control/types.js';
import { ErrorCodes } from '../errors.js';
import type { Logger } from '../log/log.js';
import type { BindSocket } from '../frontend/listen.js';
import { recentWarnings } from '../log/warning-ring.js';

export interface DashboardOwner {
  config(): Config;
  snapshot(what: ReadWhat): Promise<StatusSnapshot>;
  reload(): Promise<unknown>;
  poolAction(pool: string, verb: PoolVerb): Promise<unknown>;
  site(id: string): SiteEditTarget | undefined;
}

export class DashboardHost {
  private server: DashboardServer | undefined;
  private cfg: DashboardConfig | undefined;

  constructor(
    private readonly owner: DashboardOwner,
    private readonly logger: Logger,
    private readonly bind: BindSocket,
  ) {}

  get address(): string | undefined {
    return this.server?.address;
  }

  /** Start: a dashboard that cannot listen stops the start, like a listener. */
  async open(cfg: Config): Promise<void> {
    const d = cfg.dashboard;
    if (d === undefined) return;
    this.cfg = d;
    const { DashboardServer } = await import('../dashboard/server.js');
    const server = new DashboardServer({
      config: () => this.cfg!,
      logger: this.logger,
      self: { snapshot: (what) => this.owner.snapshot(what), configPath: () => this.owner.config().source, reload: () => this.owner.reload(), poolAction: (pool, verb) => this.owner.poolAction(pool, verb), site: (id) => this.owner.site(id) },
      warnings: recentWarnings,
      listen: this.bind,
    });
    await server.listen();
    this.server = server;
  }

  /** After a reload committed `next`. */
  async apply(next: Config): Promise<void> {
    const d = next.dashboard;
    if (this.server !== undefined && d !== undefined && d.address.text === this.cfg?.address.text) {
      this.cfg = d;
      return;
    }
    await this.close();
    await this.open(next).catch((err: unknown) => this.logger.error({ code: ErrorCodes.DASHBOARD, err }, `dashboard could not be opened: ${(err as Error).message}`));
  }

  async close(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (s !== undefined) await s.close();
  }
}
