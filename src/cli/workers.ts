/** `fcgi-pm workers`: one line per worker of the running daemon. */
import { Command } from 'commander';
import { renderWorkers } from '../control/render-workers.js';
import { addTargetOptions, runTarget, TargetError, type TargetOptions } from './control-target.js';
import { EXIT_FAILURE, EXIT_OK } from './report.js';
import { fetchSnapshot } from './status.js';

interface WorkersOptions extends TargetOptions {
  json?: boolean;
  pool?: string;
}

export function workersCommand(): Command {
  return addTargetOptions(
    new Command('workers')
      .description('list the workers: pool, pid, state, requests served, memory, CPU, uptime, current request and its age')
      .option('--json', 'as JSON: [{pool, pid, state, requests, memory, cpu, ...}]')
      .option('--pool <name>', 'only this pool'),
  ).action(async (o: WorkersOptions) =>
    runTarget(async () => {
      const s = await fetchSnapshot(o, true);
      if (o.pool !== undefined && !s.pools.some((p) => p.name === o.pool)) {
        throw new TargetError(`no pool named "${o.pool}" (pools: ${s.pools.map((p) => p.name).join(', ')})`, EXIT_FAILURE);
      }
      if (o.json) {
        const list = s.pools
          .filter((p) => o.pool === undefined || p.name === o.pool)
          .flatMap((p) => p.workers.map((w) => ({ pool: p.name, ...w, cpuCgroup: p.cpu?.dir, cpuWeight: p.cpu?.weight })));
        process.stdout.write(JSON.stringify(list, null, 2) + '\n');
      } else {
        process.stdout.write(renderWorkers(s, { pool: o.pool }));
      }
      return EXIT_OK;
    }),
  );
}
