/** The SiteSource a vhosts section names. */
import type { VhostsConfig } from '../../config/types.js';
import { DirSource } from './dir-source.js';
import type { SiteSource } from './source.js';
import { PostgresSource } from './postgres-source.js';
import { SqliteSource } from './sqlite-source.js';

export function openSiteSource(v: VhostsConfig): SiteSource {
  const s = v.source;
  switch (s.kind) {
    case 'dir':
      return new DirSource(s.dir, v, v.pollInterval);
    case 'sqlite':
      return new SqliteSource(s, v);
    case 'postgres':
      return new PostgresSource(s, v);
  }
}
