/** `fcgi-pm reload`: make the running daemon re-read its config file and apply it. */
import { Command } from 'commander';
import type { ReloadReport } from '../daemon/reload.js';
import { addTargetOptions, ask, describeDaemon, runTarget, type TargetOptions } from './control-target.js';
import { EXIT_FAILURE, EXIT_OK } from './report.js';

function list(what: string, names: string[]): string {
  return names.length === 0 ? '' : `  ${what}: ${names.join(', ')}\n`;
}

export function reloadCommand(): Command {
  return addTargetOptions(
    new Command('reload').description(
      're-read the config file the daemon was started with and apply it without dropping requests\n(exit 1, old config still running, when the file has errors)',
    ),
  ).action(async (o: TargetOptions) =>
    runTarget(async () => {
      const session = await ask(o, { cmd: 'reload' }, 120_000);
      session.end();
      const r = session.response;
      if (!r.ok) {
        for (const p of r.error.problems ?? []) process.stderr.write(`${p}\n`);
        process.stderr.write(`fcgi-pm: reload failed, the daemon keeps its previous config: ${r.error.problems ? `${r.error.problems.length} problem(s) in the configuration` : r.error.message}\n`);
        return EXIT_FAILURE;
      }
      const rep = r.result as ReloadReport;
      let out = `reloaded fcgi-pm (${describeDaemon(r.daemon)})\n`;
      out += list('pools added', rep.pools.added) + list('pools removed', rep.pools.removed) + list('pools changed', rep.pools.changed);
      // An older daemon's report has no retuned list.
      out += list('pools retuned in place (workers kept)', rep.pools.retuned ?? []);
      out += list('listeners added', rep.listeners.added) + list('listeners removed', rep.listeners.removed);
      out += list('listeners reopened', rep.listeners.reopened) + list('listeners updated', rep.listeners.updated);
      for (const n of rep.notes) out += `  note: ${n}\n`;
      process.stdout.write(out);
      return EXIT_OK;
    }),
  );
}
