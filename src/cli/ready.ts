/**
 * `fcgi-pm ready`: readiness through the control socket, for an exec probe (Kubernetes)
 * or a script: exit 0 ready, 1 not ready (stopping; with --pool, that pool failing or
 * full), 3 no daemon answers. `--live` asks only whether the daemon answers at all.
 */
import { Command } from 'commander';
import type { Readiness } from '../control/readiness.js';
import { addTargetOptions, ask, runTarget, TargetError, type TargetOptions } from './control-target.js';
import { EXIT_FAILURE, EXIT_OK } from './report.js';

interface ReadyOptions extends TargetOptions {
  pool?: string;
  live?: boolean;
  quiet?: boolean;
}

export function readyCommand(): Command {
  return addTargetOptions(
    new Command('ready')
      .description('is the daemon ready for requests? exit 0 ready, 1 not ready (stopping, or --pool failing or full), 3 no daemon')
      .option('--pool <name>', 'also whether this pool can take a request now')
      .option('--live', 'liveness only: the daemon answers on its control socket')
      .option('-q, --quiet', 'no output, only the exit code'),
  )
    .addHelpText(
      'after',
      `
Examples:
  fcgi-pm ready -c /etc/fcgi-pm/fcgi-pm.yaml
  fcgi-pm ready --pool www
  fcgi-pm ready --live -q
`,
    )
    .action(async (o: ReadyOptions) =>
      runTarget(async () => {
        const session = await ask(o, o.live === true ? { cmd: 'ping' } : { cmd: 'ready', pool: o.pool });
        session.end();
        const r = session.response;
        if (!r.ok) throw new TargetError(`ready failed: ${r.error.message}`, EXIT_FAILURE);
        const verdict: Readiness = o.live === true ? { ready: true, status: 200, reason: 'alive' } : (r.result as Readiness);
        if (o.quiet !== true) (verdict.ready ? process.stdout : process.stderr).write(`${verdict.reason}\n`);
        return verdict.ready ? EXIT_OK : EXIT_FAILURE;
      }),
    );
}
