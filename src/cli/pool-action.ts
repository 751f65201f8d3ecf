/** `fcgi-pm restart --pool NAME [--rolling]` and `fcgi-pm drain --pool NAME`: one pool's workers, on the running daemon. */
import { Command } from 'commander';
import type { ControlRequest } from '../control/protocol.js';
import type { PoolActionReport } from '../pool/types.js';
import { addTargetOptions, ask, describeDaemon, runTarget, type TargetOptions } from './control-target.js';
import { EXIT_FAILURE, EXIT_OK } from './report.js';

interface PoolOptions extends TargetOptions {
  pool: string;
  rolling?: boolean;
}

/** Long enough for a rolling restart that waits on slow requests. */
const ACTION_TIMEOUT_MS = 600_000;

function poolCommand(name: string, description: string, request: (o: PoolOptions) => ControlRequest): Command {
  return addTargetOptions(new Command(name).description(description).requiredOption('--pool <name>', 'the pool')).action(async (o: PoolOptions) =>
    runTarget(async () => {
      const session = await ask(o, request(o), ACTION_TIMEOUT_MS);
      session.end();
      const r = session.response;
      if (!r.ok) {
        process.stderr.write(`fcgi-pm: ${name} of pool ${o.pool} failed: ${r.error.message}\n`);
        return EXIT_FAILURE;
      }
      const rep = r.result as Partial<PoolActionReport>;
      const what = rep.action === 'drain' ? `drained pool ${o.pool}: ${rep.retired?.length ?? 0} worker(s) retired` : `restarted pool ${o.pool}`;
      const pids = rep.started === undefined ? '' : ` (${rep.retired?.length ?? 0} retired, ${rep.started.length} started)`;
      process.stdout.write(`${what}${rep.action === 'drain' ? '' : pids} (${describeDaemon(r.daemon)})\n`);
      return EXIT_OK;
    }),
  );
}

export function restartCommand(): Command {
  return poolCommand(
    'restart',
    "replace one pool's workers without failing a request: all at once as a reload swaps a pool, or with --rolling one at a time, each only once its replacement is ready",
    (o) => ({ cmd: 'restart', pool: o.pool, rolling: o.rolling === true }),
  ).option('--rolling', 'one worker at a time; capacity drops by at most one worker');
}

export function drainCommand(): Command {
  return poolCommand(
    'drain',
    "retire one pool's workers after their requests; new requests start workers again on demand (a static pool is restarted one worker at a time instead: it never stops serving)",
    (o) => ({ cmd: 'drain', pool: o.pool }),
  );
}
