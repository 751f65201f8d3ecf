/**
 * Where site definitions come from: a directory of files or a database table. A source
 * reads every definition (re-validating only what changed since its last read) and
 * says when something may have changed; src/daemon/vhosts/sites.ts applies the reads.
 */
import type { SiteConfig, VhostsConfig } from '../../config/types.js';

export interface SourceRead {
  sites: SiteConfig[];
  /** Definitions that do not validate: id and the problems ("file:line: key: message"). */
  broken: Array<{ id: string; problems: string[] }>;
}

export interface SiteSource {
  /** Names the source in log lines. */
  readonly label: string;
  /** Every definition now; throws (rejects) when the source itself cannot be read. */
  read(): SourceRead | Promise<SourceRead>;
  /** Calls `changed` when a read may find something new (a watch event, a poll tick). */
  watch(changed: () => void): void;
  close(): void;
  /** The file that defines site `id`, for a source of files (the dashboard edits it there); undefined otherwise. */
  fileOf?(id: string): string | undefined;
  /** The directory a site's relative paths start from. */
  readonly baseDir?: string;
}

export type SourceFactory = (cfg: VhostsConfig) => SiteSource;
