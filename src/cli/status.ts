/** `fcgi-pm status`: the running daemon's figures, in text, JSON, Prometheus or PHP-FPM form. */
import { Command } from 'commander';
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
      .option('--full', 'with the text or --fpm page: every worker too')
      .option('--pool <name>', 'only this pool')
      .option('--all-sites', 'vhosts: list every defined site, not only the active ones'),
  )
    .addHelpText(
      'after',
      `
Examples:
  fcgi-pm status
  fcgi-pm status --full -c /etc/fcgi-pm/fcgi-pm.yaml
  fcgi-pm status --prometheus > /var/lib/node_exporter/textfile/fcgipm.prom
  fcgi-pm status --fpm --json --full --pool php
`,
    )
    .action(async (o: StatusOptions) =>
      runTarget(async () => {
        const formats = [o.prometheus, o.openmetrics, o.fpm, o.json && !o.fpm].filter(Boolean).length;
        if (formats > 1) throw new TargetError('give one of --json, --prometheus, --openmetrics, --fpm', EXIT_USAGE);
        const s = await fetchSnapshot(o, o.full === true || (o.json === true && !o.fpm), o.allSites === true);
        if (o.pool !== undefined && !s.pools.some((p) => p.name === o.pool)) {
          throw new TargetError(`no pool named "${o.pool}" (pools: ${s.pools.map((p) => p.name).join(', ')})`, EXIT_FAILURE);
        }
        let out: string;
        if (o.prometheus || o.openmetrics) out = renderPrometheus(s, { openMetrics: o.openmetrics === true });
        else if (o.fpm) out = renderFpm(s, { format: o.json ? 'json' : 'text', full: o.full === true, pool: o.pool });
        else if (o.json) out = JSON.stringify(s, null, 2) + '\n';
        else out = renderText(s, { full: o.full === true, pool: o.pool });
        process.stdout.write(out);
        return EXIT_OK;
      }),
    );
}
