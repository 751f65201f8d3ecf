/** The SiteSource a vhosts section names. */
import type { VhostsConfig } from '../../config/types.js';
import { DirSource } from './dir-source.js';
import type { SiteSource } from './source.js';
import { SqliteSource } from './sqlite-source.js';

export function openSiteSource(v: VhostsConfig): SiteSource {
  const s = v.source;
  return s.kind === 'dir' ? new DirSource(s.dir, v.defaults, v.pollInterval) : new SqliteSource(s.file, s.table, v.defaults, v.pollInterval);
}
