/**
 * Table rows (id, names, document_root, pool as JSON or YAML text) to sites, shared by
 * the SQLite and PostgreSQL sources: a row whose text did not change since the last
 * read keeps the SiteConfig validated then (Sites sees the same object: no re-check).
 */
import { parseYamlText } from '../../config/load.js';
import { siteFromObject } from '../../config/site.js';
import type { SiteBase, SiteConfig } from '../../config/types.js';
import { ConfigError } from '../../errors.js';
import type { SourceRead } from './source.js';

export interface SiteRow {
  id: unknown;
  names: unknown;
  document_root: unknown;
  pool: unknown;
}

export const SELECT_SITES = (table: string): string => `SELECT id, names, document_root, pool FROM ${table} ORDER BY id`;

interface Cached {
  text: string;
  site: SiteConfig | undefined;
  problems: string[];
}

export class RowSites {
  private readonly cache = new Map<string, Cached>();

  /** `where`: "FILE table T" (a row is "… row ID"); `baseDir` for relative paths. */
  constructor(
    private readonly where: string,
    private readonly baseDir: string,
    private readonly base: SiteBase,
  ) {}

  read(rows: readonly SiteRow[]): SourceRead {
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

  private validate(id: string, r: SiteRow, text: string): Cached {
    const label = `${this.where} row ${id}`;
    try {
      const poolText = r.pool === null || r.pool === undefined ? '' : String(r.pool);
      const pool = poolText.trim() === '' ? {} : parseYamlText(poolText, `${label} column pool`, 'pool settings').obj;
      const site = siteFromObject(id, { names: r.names ?? undefined, document_root: r.document_root ?? undefined, pool }, this.base, { label, baseDir: this.baseDir });
      return { text, site, problems: [] };
    } catch (err) {
      return { text, site: undefined, problems: err instanceof ConfigError ? err.problems : [`${label}: ${(err as Error).message}`] };
    }
  }
}

