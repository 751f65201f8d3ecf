/** `fcgi-pm status`: the running daemon's figures, in text, JSON, Prometheus or PHP-FPM form. */
import { Command } from 'commander';
import { renderCompact } from '../control/render-compact.js';
import { renderFpm } from '../control/render-fpm.js';
import { renderPrometheus } from '../control/render-prometheus.js';
import { renderText } from '../control/render-text.js';
import type { StatusSnapshot } from '../control/types.js';
import { addTargetOptions, ask, runTarget, TargetError, type TargetOptions } from './control-target.js';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE } from './report.js';

interface StatusOptions extends TargetOptions {
  json?: boolean;
  prometheus?: boolean;
  openmetrics?: boolean;
  fpm?: boolean;
  full?: boolean;
  pool?: string;
  site?: string;
  allSites?: boolean;
}

/** Asks the daemon for its snapshot; `processes` also samples worker CPU and memory. */
export async function fetchSnapshot(o: TargetOptions, processes: boolean, allSites = false): Promise<StatusSnapshot> {
  const session = await ask(o, { cmd: 'status', processes, all_sites: allSites });
  session.end();
  const r = session.response;
  if (!r.ok) throw new TargetError(`status failed: ${r.error.message}`, EXIT_FAILURE);
  return r.result as StatusSnapshot;
}

export function statusCommand(): Command {
  return addTargetOptions(
    new Command('status')
      .description('show what the running daemon does: pools, workers, queues, errors (exit 3 when no daemon runs)')
      .option('--json', 'the whole snapshot as JSON (with --fpm: the PHP-FPM JSON page)')
      .option('--prometheus', 'Prometheus text exposition (metrics fcgipm_*)')
      .option('--openmetrics', 'OpenMetrics text exposition')
      .option('--fpm', "PHP-FPM's status page, one per pool (what pm.status_path shows)")
      .option('--full', 'every figure of every pool (not one line each), and every worker; with --fpm: the per-process blocks')
      .option('--pool <name>', 'only this pool, every figure')
      .option('--site <id>', 'vhosts: the pool of this site, every figure')
      .option('--all-sites', 'vhosts: list every defined site, not only the active ones'),
  )
    .addHelpText(
      'after',
      `
Examples:
  fcgi-pm status                       one line per pool, busiest first
  fcgi-pm status --pool www            every figure of one pool
  fcgi-pm status --site site517        the same for a vhosts site's pool
  fcgi-pm status --full -c /etc/fcgi-pm/fcgi-pm.yaml
  fcgi-pm status --prometheus > /var/lib/node_exporter/textfile/fcgipm.prom
  fcgi-pm status --fpm --json --full --pool php
`,
    )
    .action(async (o: StatusOptions) =>
      runTarget(async () => {
        const formats = [o.prometheus, o.openmetrics, o.fpm, o.json && !o.fpm].filter(Boolean).length;
        if (formats > 1) throw new TargetError('give one of --json, --prometheus, --openmetrics, --fpm', EXIT_USAGE);
        if (o.pool !== undefined && o.site !== undefined) throw new TargetError('give one of --pool, --site', EXIT_USAGE);
        const s = await fetchSnapshot(o, o.full === true || (o.json === true && !o.fpm), o.allSites === true || o.site !== undefined);
        if (o.site !== undefined) {
          // A site's pool has the site's id as its name, from its first request until it is evicted idle.
          const site = s.sites?.list?.find((x) => x.id === o.site);
          if (site === undefined) throw new TargetError(s.sites === undefined ? 'this daemon has no vhosts' : `no site "${o.site}" is defined (${s.sites.defined} are; status --all-sites lists them)`, EXIT_FAILURE);
          if (!s.pools.some((p) => p.name === site.id)) {
            process.stdout.write(`site ${site.id}: ${site.names.join(' ')} → ${site.documentRoot}; not active (no pool until its next request)\n`);
            return EXIT_OK;
          }
          o.pool = site.id;
          if (s.sites !== undefined) s.sites.list = [site];
        }
        if (o.pool !== undefined && !s.pools.some((p) => p.name === o.pool)) {
          throw new TargetError(`no pool named "${o.pool}" (pools: ${s.pools.length > 20 ? `${s.pools.length}, see fcgi-pm status` : s.pools.map((p) => p.name).join(', ')})`, EXIT_FAILURE);
        }
        let out: string;
        if (o.prometheus || o.openmetrics) out = renderPrometheus(s, { openMetrics: o.openmetrics === true });
        else if (o.fpm) out = renderFpm(s, { format: o.json ? 'json' : 'text', full: o.full === true, pool: o.pool });
        else if (o.json) out = JSON.stringify(s, null, 2) + '\n';
        else if (o.pool === undefined && o.full !== true) out = renderCompact(s);
        else out = renderText(s, { full: o.full === true, pool: o.pool });
        process.stdout.write(out);
        return EXIT_OK;
      }),
    );
}
