/**
 * vhosts.sqlite: one row per site in `table` (schema in docs/vhosts.md), opened
 * read-only. A poll asks `PRAGMA data_version`, which changes when another connection
 * commits, so an unchanged table costs one statement; on a change every row is read
 * and only rows whose text changed are validated again (rows.ts).
 */
import type Database from 'better-sqlite3';
import * as nodePath from 'node:path';
import type { VhostsConfig } from '../../config/types.js';
import { RowSites, SELECT_SITES, type SiteRow } from './rows.js';
import { loadOptional } from './optional-module.js';
import type { SiteSource, SourceRead } from './source.js';

export class SqliteSource implements SiteSource {
  readonly label: string;
  private db: Database.Database | undefined;
  private version: number | undefined;
  private readonly rows: RowSites;
  private timer: NodeJS.Timeout | undefined;

  private readonly file: string;
  private readonly table: string;
  private readonly pollMs: number;

  constructor(source: { file: string; table: string }, v: VhostsConfig) {
    ({ file: this.file, table: this.table } = source);
    this.pollMs = v.pollInterval;
    this.label = `vhosts.sqlite ${this.file} table ${this.table}`;
    this.rows = new RowSites(`${this.file} table ${this.table}`, nodePath.dirname(this.file), v);
  }

  private open(): Database.Database {
    if (this.db === undefined) {
      const Driver = loadOptional<typeof Database>('better-sqlite3', 'vhosts.sqlite');
      this.db = new Driver(this.file, { readonly: true, fileMustExist: true });
    }
    return this.db;
  }

  read(): SourceRead {
    let rows: SiteRow[];
    try {
      const db = this.open();
      this.version = db.pragma('data_version', { simple: true }) as number;
      rows = db.prepare(SELECT_SITES(this.table)).all() as SiteRow[];
    } catch (err) {
      this.db?.close();
      this.db = undefined;
      throw new Error(`${this.label}: ${(err as Error).message}`);
    }
    return this.rows.read(rows);
  }

  /** True when another connection committed since the last read (or the database was not open). */
  private changed(): boolean {
    try {
      return this.db === undefined || this.open().pragma('data_version', { simple: true }) !== this.version;
    } catch {
      return true;
    }
  }

  watch(changed: () => void): void {
    this.timer = setInterval(() => {
      if (this.changed()) changed();
    }, this.pollMs);
    this.timer.unref();
  }

  close(): void {
    clearInterval(this.timer);
    this.db?.close();
    this.db = undefined;
  }
}
