/**
 * `fcgi-pm check -c FILE`: validate a config file without starting anything, then run
 * the host checks `run` would (src/daemon/preflight.ts) as the user running check.
 */
import { Command } from 'commander';
import { validateConfigFile } from '../config/load.js';
import type { Config } from '../config/types.js';
import { ConfigError, ErrorCodes } from '../errors.js';
import { preflight, preflightSite } from '../daemon/preflight.js';
import { checkAddressesFree } from '../daemon/address-check.js';
import { controlSocketPath } from '../config/control-path.js';
import { whoAnswers } from '../control/client.js';
import { openSiteSource } from '../daemon/vhosts/open-source.js';
import { judgeSites } from '../daemon/vhosts/sites.js';
import { cpuCgroupsAtStart } from '../memory/cpu-cgroup.js';
import { EXIT_OK, reportError } from './report.js';

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** Reads the vhosts sites as run would and checks each; throws ConfigError listing every broken one. */
async function checkSites(cfg: Config, allowRoot: boolean): Promise<number> {
  const source = openSiteSource(cfg.vhosts!);
  try {
    let read;
    try {
      read = await source.read();
    } catch (err) {
      throw new ConfigError([(err as Error).message], ErrorCodes.VHOST_SOURCE);
    }
    const { good, problems } = await judgeSites(read, new Set(cfg.pools.keys()), (site, memo) => preflightSite(site, { allowRoot }, memo).problems);
    if (problems.size > 0) throw new ConfigError([...problems.values()].flat(), ErrorCodes.VHOST_INVALID);
    return good.size;
  } finally {
    source.close();
  }
}

/**
 * The file's schema problems, the host checks (on what validated, and on the other keys
 * of a pool with a bad one) and the addresses run would bind, in one list in file order:
 * a typo in one pool does not hide a missing cwd in it or in another, nor a port in use.
 * Throws ConfigError.
 */
async function checkFile(file: string, allowRoot: boolean): Promise<Config> {
  const v = validateConfigFile(file);
  const notice = (line: string): boolean => process.stderr.write(`notice: ${line}\n`);
  const cfg = v.config ?? v.valid;
  if (cfg === undefined) throw new ConfigError(v.problems.texts());
  const schemaProblems = v.problems.count;
  const r = preflight(cfg, { allowRoot, brokenKeys: v.brokenKeys, strict: true }, v.problems);
  r.notices.forEach(notice);
  if (v.config !== undefined) cpuSharesNotice(v.config, notice);
  if (!(await ownDaemonAnswers(cfg))) await checkAddressesFree(cfg, v.problems);
  if (v.problems.count === 0) return cfg;
  const code = schemaProblems > 0 ? undefined : r.rootRefusals > 0 ? ErrorCodes.ROOT_WORKERS : ErrorCodes.HOST_CHECK;
  throw new ConfigError(v.problems.texts(), code);
}

/** This config's daemon runs (a check before a reload): the addresses it holds are its own. */
async function ownDaemonAnswers(cfg: Config): Promise<boolean> {
  const path = controlSocketPath(cfg);
  if (path === undefined) return false;
  const who = await whoAnswers(path, 2000).catch(() => undefined);
  return who !== undefined && (who.config === undefined || who.config === cfg.source);
}

/** Pools with workers share the CPU by cpu_weight only in CPU cgroups; where fcgi-pm may make none, say so (run says it once at start). */
function cpuSharesNotice(cfg: Config, notice: (line: string) => void): void {
  if (![...cfg.pools.values()].some((p) => p.command !== undefined)) return;
  const cpu = cpuCgroupsAtStart();
  if (!cpu.ok) notice(`pools share the CPU as plain processes: fcgi-pm can make no CPU cgroup here (${cpu.why}), so cpu_weight has no effect`);
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
are found (PATH) and executable by the workers' user, the scripts they are given exist,
socket directories are writable and the front end can reach the sockets (their owner or
group, else www-data where nginx or Apache is installed), the addresses are free (unless
this config's daemon holds them), max_children fits pid_max and a static pool's memory,
and as root that every spawned pool has a user. Every problem of the file comes out in
one run, in file order, each with its line. With vhosts it reads the sites as run
would and checks each the same way (a broken file by file:line, a broken row by its id).

Example:
  fcgi-pm check -c /etc/fcgi-pm/fcgi-pm.yaml
`,
    )
    .action(async (opts: { config: string; allowRoot?: boolean }) => {
      try {
        const cfg = await checkFile(opts.config, opts.allowRoot === true);
        const sites = cfg.vhosts === undefined ? '' : `, ${plural(await checkSites(cfg, opts.allowRoot === true), 'site')}`;
        process.stdout.write(`config OK: ${plural(cfg.listen.length, 'listener')}, ${plural(cfg.pools.size, 'pool')}${sites}\n`);
        process.exitCode = EXIT_OK;
      } catch (err) {
        process.exitCode = reportError(err);
      }
    });
}
