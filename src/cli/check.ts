/**
 * `fcgi-pm check -c FILE`: validate a config file without starting anything, then run
 * the host checks `run` would (src/daemon/preflight.ts) as the user running check.
 */
import { Command } from 'commander';
import { loadConfig } from '../config/load.js';
import { assertPreflight } from '../daemon/preflight.js';
import { EXIT_OK, reportError } from './report.js';

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

export function checkCommand(): Command {
  return new Command('check')
    .description('check a config file and report every problem with its line (exit 0 when valid, 1 if not)')
    .requiredOption('-c, --config <file>', 'config file (YAML or JSON)')
    .option('-R, --allow-root', 'as with run: pools without "user" may run their workers as root')
    .addHelpText(
      'after',
      `
Besides the file itself it checks what "run" would hit on this host, as the user
running check: users and groups exist, cwd and document_root are directories, commands
are found (PATH) and executable by the workers' user, socket directories are writable,
and as root that every spawned pool has a user.

Example:
  fcgi-pm check -c /etc/fcgi-pm/fcgi-pm.yaml
`,
    )
    .action((opts: { config: string; allowRoot?: boolean }) => {
      try {
        const cfg = loadConfig(opts.config);
        assertPreflight(cfg, { allowRoot: opts.allowRoot === true }, (line) => process.stderr.write(`notice: ${line}\n`));
        process.stdout.write(`config OK: ${plural(cfg.listen.length, 'listener')}, ${plural(cfg.pools.size, 'pool')}\n`);
        process.exitCode = EXIT_OK;
      } catch (err) {
        process.exitCode = reportError(err);
      }
    });
}
