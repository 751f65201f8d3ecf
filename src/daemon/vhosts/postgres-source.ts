/**
 * vhosts.postgres: one row per site in `table` of a PostgreSQL database several daemons
 * may share (schema and trigger in docs/vhosts.md). A poll compares `count(*)` and
 * `max(updated_at)`, one cheap query; LISTEN on the channel `table` makes a committed
 * change (the trigger's NOTIFY) apply at once. A lost connection is opened again on the
 * next poll; until then the sites known keep serving.
 */
import type pg from 'pg';
import type { VhostsConfig } from '../../config/types.js';
import { RowSites, SELECT_SITES, type SiteRow } from './rows.js';
import { loadOptional } from './optional-module.js';
import type { SiteSource, SourceRead } from './source.js';

export class PostgresSource implements SiteSource {
  readonly label: string;
  private client: Promise<pg.Client> | undefined;
  private stamp: string | undefined;
  private readonly rows: RowSites;
  private timer: NodeJS.Timeout | undefined;
  private changed: (() => void) | undefined;

  private readonly url: string;
  private readonly table: string;
  private readonly pollMs: number;

  constructor(source: { url: string; table: string }, v: VhostsConfig) {
    this.url = source.url;
    this.table = source.table;
    this.pollMs = v.pollInterval;
    this.label = `vhosts.postgres ${redacted(this.url)} table ${this.table}`;
    this.rows = new RowSites(`postgres table ${this.table}`, '/', v);
  }

  private connect(): Promise<pg.Client> {
    this.client ??= (async () => {
      const driver = loadOptional<typeof pg>('pg', 'vhosts.postgres');
      const c = new driver.Client({ connectionString: this.url, connectionTimeoutMillis: 5000 });
      c.on('error', () => this.drop(c));
      c.on('end', () => this.drop(c));
      c.on('notification', () => this.changed?.());
      await c.connect();
      await c.query(`LISTEN ${this.table}`);
      return c;
    })().catch((err: unknown) => {
      this.client = undefined;
      throw err;
    });
    return this.client;
  }

  private drop(c: pg.Client): void {
    void this.client?.then((mine) => {
      if (mine === c) this.client = undefined;
    });
    c.end().catch(() => undefined);
  }

  private async stampOf(c: pg.Client): Promise<string> {
    const r = await c.query<{ s: string }>(`SELECT count(*)::text || ' ' || coalesce(max(updated_at)::text, '') AS s FROM ${this.table}`);
    return r.rows[0]!.s;
  }

  async read(): Promise<SourceRead> {
    try {
      const c = await this.connect();
      this.stamp = await this.stampOf(c);
      const r = await c.query<SiteRow>(SELECT_SITES(this.table));
      return this.rows.read(r.rows);
    } catch (err) {
      throw new Error(`${this.label}: ${(err as Error).message}`);
    }
  }

  watch(changed: () => void): void {
    this.changed = changed;
    this.timer = setInterval(() => {
      void this.connect()
        .then((c) => this.stampOf(c))
        .then((s) => s !== this.stamp, () => true)
        .then((yes) => yes && changed());
    }, this.pollMs);
    this.timer.unref();
  }

  close(): void {
    clearInterval(this.timer);
    this.changed = undefined;
    const c = this.client;
    this.client = undefined;
    void c?.then((x) => x.end()).catch(() => undefined);
  }
}

/** The URL without its password, for log lines. */
function redacted(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '***';
    return u.toString();
  } catch {
    return '(postgres URL)';
  }
}
