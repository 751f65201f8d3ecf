/** `fcgi-pm check -c FILE`: validate a config file without starting anything. */
import { Command } from 'commander';
import { loadConfig } from '../config/load.js';
import { EXIT_OK, reportError } from './report.js';

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

export function checkCommand(): Command {
  return new Command('check')
    .description('check a config file and report every problem with its line (exit 0 when valid, 1 if not)')
    .requiredOption('-c, --config <file>', 'config file (YAML or JSON)')
    .addHelpText('after', '\nExample:\n  fcgi-pm check -c /etc/fcgi-pm/fcgi-pm.yaml\n')
    .action((opts: { config: string }) => {
      try {
        const cfg = loadConfig(opts.config);
        process.stdout.write(`config OK: ${plural(cfg.listen.length, 'listener')}, ${plural(cfg.pools.size, 'pool')}\n`);
        process.exitCode = EXIT_OK;
      } catch (err) {
        process.exitCode = reportError(err);
      }
    });
}
