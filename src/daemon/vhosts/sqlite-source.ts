/**
 * vhosts.sqlite: one row per site in `table` (schema in docs/vhosts.md):
 *   id TEXT PRIMARY KEY, names TEXT, document_root TEXT, pool TEXT (JSON or YAML)
 * Opened read-only. A poll asks `PRAGMA data_version`, which changes when another
 * connection commits, so an unchanged table costs one statement; on a change every row
 * is read and only rows whose text changed are validated again.
 */
import Database from 'better-sqlite3';
import * as nodePath from 'node:path';
import { parseYamlText } from '../../config/load.js';
import { siteFromObject } from '../../config/site.js';
import { ConfigError } from '../../errors.js';
import type { SiteConfig } from '../../config/types.js';
import type { SiteSource, SourceRead } from './source.js';

interface Row {
  id: unknown;
  names: unknown;
  document_root: unknown;
  pool: unknown;
}

interface Cached {
  text: string;
  site: SiteConfig | undefined;
  problems: string[];
}

const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export class SqliteSource implements SiteSource {
  readonly label: string;
  private db: Database.Database | undefined;
  private version: number | undefined;
  private readonly cache = new Map<string, Cached>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly file: string,
    private readonly table: string,
    private readonly defaults: Record<string, unknown>,
    private readonly pollMs: number,
  ) {
    if (!TABLE_NAME.test(table)) throw new ConfigError([`vhosts.table: "${table}" must be a plain SQL name (letters, digits, "_")`]);
    this.label = `vhosts.sqlite ${file} table ${table}`;
  }

  private open(): Database.Database {
    this.db ??= new Database(this.file, { readonly: true, fileMustExist: true });
    return this.db;
  }

  read(): SourceRead {
    let rows: Row[];
    try {
      const db = this.open();
      this.version = db.pragma('data_version', { simple: true }) as number;
      rows = db.prepare(`SELECT id, names, document_root, pool FROM ${this.table} ORDER BY id`).all() as Row[];
    } catch (err) {
      this.db?.close();
      this.db = undefined;
      throw new Error(`${this.label}: ${(err as Error).message}`);
    }
    const out: SourceRead = { sites: [], broken: [] };
    const seen = new Set<string>();
    for (const r of rows) {
      const id = String(r.id);
      seen.add(id);
      const text = JSON.stringify([r.names, r.document_root, r.pool]);
      let c = this.cache.get(id);
      if (c?.text !== text) {
        c = this.validate(id, r, text);
        this.cache.set(id, c);
      }
      if (c.site !== undefined) out.sites.push(c.site);
      else out.broken.push({ id, problems: c.problems });
    }
    for (const id of this.cache.keys()) if (!seen.has(id)) this.cache.delete(id);
    return out;
  }

  private validate(id: string, r: Row, text: string): Cached {
    const label = `${this.file} table ${this.table} row ${id}`;
    try {
      const poolText = r.pool === null || r.pool === undefined ? '' : String(r.pool);
      const pool = poolText.trim() === '' ? {} : parseYamlText(poolText, `${label} column pool`, 'pool settings').obj;
      const site = siteFromObject(id, { names: r.names ?? undefined, document_root: r.document_root ?? undefined, pool }, this.defaults, { label, baseDir: nodePath.dirname(this.file) });
      return { text, site, problems: [] };
    } catch (err) {
      return { text, site: undefined, problems: err instanceof ConfigError ? err.problems : [`${label}: ${(err as Error).message}`] };
    }
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
