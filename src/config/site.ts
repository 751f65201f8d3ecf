/**
 * One site definition (a file in vhosts.dir, or a table row) to a validated SiteConfig,
 * with the main config's key tables and "file:line: key: message" problems. Pure but for
 * the account lookups the pool keys make; the sources that read files and rows live in
 * src/daemon/vhosts/.
 */
import { ConfigError } from '../errors.js';
import { parseYamlText } from './load.js';
import { Problems, type Locator } from './problems.js';
import { poolConfigFromObject, readSiteParts } from './schema.js';
import type { PoolConfig, RewriteRule, SiteBase, SiteConfig } from './types.js';
import { SITE_KEYS } from './vhosts-keys.js';

/** Site ids become pool names (logs, status, socket file names). */
const SITE_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;
/** A host name, or "*." and one: letters, digits, "-", "." (and "_", which some hosts use). */
const HOST_NAME = /^(\*\.)?[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*\.?$/;

export interface SiteWhere {
  /** Names the definition in messages: a file name, or "db table T row ID". */
  label: string;
  locate?: Locator | undefined;
  /** Relative document_root and pool paths are resolved against this. */
  baseDir: string;
}

/** Validates a site in file form; throws ConfigError listing every problem. */
export function siteFromObject(id: string, obj: unknown, base: SiteBase, where: SiteWhere): SiteConfig {
  const problems = new Problems(where.label, where.locate);
  if (!SITE_ID.test(id)) problems.add([], `site id "${id}" may use letters, digits, "_", "-" and "." (and start with a letter or digit); it names the site's pool`);
  const given = typeof obj === 'object' && obj !== null && !Array.isArray(obj) ? { ...(obj as Record<string, unknown>) } : obj;
  // One string may list several names (a table column): "example.org www.example.org".
  if (typeof given === 'object' && given !== null && typeof (given as Record<string, unknown>).names === 'string') {
    const g = given as Record<string, unknown>;
    g.names = (g.names as string).split(/[\s,]+/).filter((n) => n !== '');
  }
  const parts = readSiteParts(given, SITE_KEYS, problems, where.baseDir);
  const names = ((parts.values.names as string[] | undefined) ?? []).map((n) => n.toLowerCase().replace(/\.$/, ''));
  names.forEach((n, i) => {
    if (!HOST_NAME.test(n)) problems.add(['names', i], `"${n}" is not a host name or a "*.domain" wildcard`);
  });
  const documentRoot = parts.values.documentRoot as string | undefined;
  const own = (parts.values.pool ?? {}) as Record<string, unknown>;
  const settings: Record<string, unknown> = { ...base.defaults, ...own };
  if (settings.script_roots === undefined && documentRoot !== undefined) settings.script_roots = [documentRoot];
  if (base.siteMaxChildren > 0) capWorkers(settings, base.siteMaxChildren);
  parts.pool(id, settings); // validated now, built again when the site gets a pool
  if (problems.count > 0) throw new ConfigError(problems.texts());
  return { id, names, documentRoot: documentRoot!, settings, baseDir: where.baseDir, rewrite: (parts.values.rewrite as RewriteRule[] | undefined) ?? [], origin: where.label };
}

/** Worker counts a site may set, each held to site_max_children (max_children always: its default may be above the cap). */
const CAPPED = ['max_children', 'start_children', 'min_spare', 'max_spare'] as const;

function capWorkers(settings: Record<string, unknown>, cap: number): void {
  for (const key of CAPPED) {
    const v = settings[key];
    if (typeof v === 'number' ? v > cap : key === 'max_children') settings[key] = cap;
  }
}

/** The site's PoolConfig (its settings were validated when the site was read). */
export function sitePool(site: SiteConfig): PoolConfig {
  return poolConfigFromObject(site.id, site.settings, site.origin, site.baseDir);
}

/** A site file's text (YAML or JSON). */
export function siteFromText(id: string, text: string, base: SiteBase, label: string, baseDir: string): SiteConfig {
  const { obj, locate } = parseYamlText(text, label, '"names" and "document_root"');
  return siteFromObject(id, obj, base, { label, locate, baseDir });
}
