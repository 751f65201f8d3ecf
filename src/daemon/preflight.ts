/**
 * Host checks: what `fcgi-pm run` would hit with a valid config on this host, found
 * before anything starts. `fcgi-pm check`, the daemon's start and every reload run
 * these same checks, each problem as "file:line: key: message":
 *
 *   - `user`/`group` exist (src/worker/identity.ts);
 *   - as root, a spawned pool without `user` is refused (workers would run as root)
 *     unless `user: root` or --allow-root says so; not as root, `user`/`group` naming
 *     someone else are ignored with a notice, as PHP-FPM does;
 *   - `cwd` is a directory the worker can enter;
 *   - the command resolves as spawn resolves it (PATH of the worker's environment) and
 *     the worker may execute it; its inputs named in the arguments (a script or config
 *     file by extension, an interpreter's script) exist, and files named there are
 *     readable by the worker;
 *   - a pool whose user or cwd is wrong is still checked for the rest, so one run of
 *     `check` names every problem (with the schema's: cli/check.ts);
 *   - Unix listener sockets' directories exist and are writable; the directories fcgi-pm
 *     creates (runtime_dir, a configured control socket's, log files') can be created;
 *   - document_root is a directory; a spawned pool's `script` is a file its workers can read;
 *   - php-cgi pools' opcache file cache root (opcache_dir) can be made by fcgi-pm and
 *     entered by each pool's user (src/worker/php-cache.ts makes the directories).
 */
import { statSync } from 'node:fs';
import * as nodePath from 'node:path';
import { controlSocketPath, isDefaultControlSocket } from '../config/control-path.js';
import { opcacheRoot } from '../config/opcache-path.js';
import { runsPhpCgi } from '../config/schema.js';
import { Problems, type KeyPath } from '../config/problems.js';
import type { Config, PoolConfig, SiteConfig } from '../config/types.js';
import { ConfigError, ErrorCodes } from '../errors.js';
import { workerEnv } from '../pool/worker-spec.js';
import { lookupUser } from '../config/system-users.js';
import { sitePool } from '../config/site.js';
import { accessAs, credentialsOfSelf, currentIds, resolveIdentity, type Credentials, type Self } from '../worker/identity.js';
import { setsOwnOpcache } from '../worker/php-cache.js';
import { resolveCommand } from '../worker/spawn.js';
import { directSocketSupport } from '../worker/shared-socket.js';

export interface PreflightOptions {
  /** -R / --allow-root: spawned pools without `user` may run as root. */
  allowRoot?: boolean;
  /** Who the daemon runs as (default: this process). */
  self?: Self;
}

export interface PreflightResult {
  problems: string[];
  /** How many problems are pools whose workers would run as root. */
  rootRefusals: number;
  /** Settings that cannot apply here and are ignored. */
  notices: string[];
}

const QUICK_SOURCE = '<command line>';

/** 127.0.0.0/8, ::1 and localhost: reachable from this host only. */
function isLoopback(host: string): boolean {
  return /^127\./.test(host) || host === '::1' || host === 'localhost' || host === '[::1]';
}

/** `into`: a list that already holds the file's schema problems (check), so all come out in file order. */
export function preflight(cfg: Config, opts: PreflightOptions = {}, into?: Problems): PreflightResult {
  const label = cfg.origin?.label ?? cfg.source;
  const problems = into ?? new Problems(label, cfg.origin?.locate);
  const notices = new Problems(label, cfg.origin?.locate);
  const self = opts.self ?? currentIds();
  const daemon = credentialsOfSelf(self);
  let rootRefusals = 0;

  for (const pool of cfg.pools.values()) {
    if (checkPool(pool, ['pools', pool.name], self, opts.allowRoot === true, cfg.source === QUICK_SOURCE, problems, notices)) rootRefusals++;
    const direct = pool.accept === 'direct' ? pool.directListen : undefined;
    if (direct?.kind === 'unix') {
      const why = dirProblem(nodePath.dirname(direct.path), cfg.runtimeDir, daemon);
      if (why !== undefined) problems.add(['pools', pool.name, 'direct_listen'], `cannot create ${direct.text}: ${why}`);
    }
  }

  cfg.listen.forEach((l, i) => {
    // `?.`: on a config with schema problems (validateConfig's `valid`) an invalid address is undefined.
    if (l.address?.kind === 'unix') {
      const why = dirProblem(nodePath.dirname(l.address.path), cfg.runtimeDir, daemon);
      if (why !== undefined) problems.add(['listen', i, 'address'], `cannot create ${l.address.text}: ${why}`);
    }
    if (l.documentRoot !== undefined) {
      const why = notDirectory(l.documentRoot);
      if (why !== undefined) problems.add(['listen', i, 'document_root'], why);
    }
  });

  if (cfg.runtimeDir !== undefined) {
    const why = creatable(cfg.runtimeDir, daemon);
    if (why !== undefined) problems.add(['runtime_dir'], why);
  }
  // Log files are opened with mkdir -p.
  for (const [key, file] of [['file', cfg.log.file], ['access_file', cfg.log.accessFile]] as const) {
    const why = file === undefined ? undefined : creatable(nodePath.dirname(file), daemon);
    if (why !== undefined) problems.add(['log', key], `cannot create ${file}: ${why}`);
  }
  const control = controlSocketPath(cfg);
  // The derived default is best effort (a warning at run time); a configured one must work.
  if (control !== undefined && !isDefaultControlSocket(cfg)) {
    const why = creatable(nodePath.dirname(control), daemon);
    if (why !== undefined) problems.add(['control_socket'], `cannot create ${control}: ${why}`);
  }

  checkOpcacheRoot(cfg, self, problems);
  const dash = cfg.dashboard?.address;
  if (dash !== undefined && dash.kind === 'tcp' && !isLoopback(dash.host)) {
    notices.add(['dashboard', 'address'], `the dashboard answers plain HTTP on ${dash.text}, not only on this host: its token, passwords and session cookie cross the network in clear; bind it to 127.0.0.1 and put a TLS proxy (nginx) in front (docs/dashboard.md)`);
  }

  return { problems: problems.texts(), rootRefusals, notices: notices.texts() };
}

/**
 * The cache root must be makeable by fcgi-pm, and each php-cgi pool's user must be able
 * to pass through it to the 0700 directory fcgi-pm makes for it there; else that pool
 * runs without a file cache (ERR_OPCACHE_DIR at start). The default under the private
 * runtime directory is fcgi-pm's own and needs no check.
 */
function checkOpcacheRoot(cfg: Config, self: Self, problems: Problems): void {
  const root = opcacheRoot(cfg, self.uid);
  if (typeof root !== 'string') return;
  const pools = [...cfg.pools.values()].filter((p) => p.command !== undefined && p.opcacheFileCache !== false && runsPhpCgi(p.command) && !setsOwnOpcache(p.command));
  if (pools.length === 0) return;
  const why = creatable(root, credentialsOfSelf(self));
  if (why !== undefined) {
    problems.add(['opcache_dir'], `cannot make the opcache file cache root ${root}: ${why}`);
    return;
  }
  // What exists of it now; fcgi-pm makes the rest 0711.
  let there = nodePath.resolve(root);
  while (!exists(there)) there = nodePath.dirname(there);
  for (const pool of pools) {
    const who = resolveIdentity(pool.user, pool.group, self);
    if (!who.ok || who.runsAs.uid === self.uid) continue;
    const closed = accessAs(there, who.runsAs, 'enter');
    if (closed !== undefined) problems.add(['pools', pool.name, 'opcache_file_cache'], `the workers' user (uid ${who.runsAs.uid}) ${closed}, so it cannot reach its opcache file cache under ${root}; set opcache_dir elsewhere or opcache_file_cache: false`);
  }
}

function exists(p: string): boolean {
  try {
    statSync(p);
    return true;
  } catch {
    return false;
  }
}

/** Runs the checks; hands notices to `notice` and throws ConfigError (ERR_ROOT_WORKERS or ERR_HOST_CHECK) on problems. */
export function assertPreflight(cfg: Config, opts: PreflightOptions, notice: (line: string) => void): void {
  const r = preflight(cfg, opts);
  for (const n of r.notices) notice(n);
  if (r.problems.length > 0) throw new ConfigError(r.problems, r.rootRefusals > 0 ? ErrorCodes.ROOT_WORKERS : ErrorCodes.HOST_CHECK);
}

/**
 * One vhost site's host checks, as a pool's: its user (as root each site needs one, or
 * --allow-root), command and cwd, and its document_root. Problems name the site's file or row.
 */
export function preflightSite(site: SiteConfig, opts: PreflightOptions = {}, memo?: SiteCheckMemo): { problems: string[]; notices: string[] } {
  const pool = sitePool(site);
  // Everything checkPool looks at; sites sharing vhosts.defaults share one check.
  const key = JSON.stringify([pool.command, pool.user, pool.group, pool.cwd, pool.env, pool.inheritEnv]);
  let checked = memo?.get(key);
  if (checked === undefined) {
    const p = new Problems(ANY_SITE, undefined);
    const n = new Problems(ANY_SITE, undefined);
    checkPool(pool, ['pool'], opts.self ?? currentIds(), opts.allowRoot === true, false, p, n);
    checked = { problems: p.texts(), notices: n.texts() };
    memo?.set(key, checked);
  }
  const mine = (t: string): string => site.origin + t.slice(ANY_SITE.length);
  const problems = checked.problems.map(mine);
  const why = notDirectory(site.documentRoot);
  if (why !== undefined) problems.push(`${site.origin}: document_root: ${why}`);
  return { problems, notices: checked.notices.map(mine) };
}

/** Pool checks made during one read of the sites, by what they look at (preflightSite). */
export type SiteCheckMemo = Map<string, { problems: string[]; notices: string[] }>;

/** Stands for the site's label in a memo's texts. */
const ANY_SITE = '\0';

/** A spawned pool's user, root policy and files; true when it was refused for running as root. */
function checkPool(pool: PoolConfig, path: KeyPath, self: Self, allowRoot: boolean, quick: boolean, problems: Problems, notices: Problems): boolean {
  if (pool.command === undefined) return false;
  const who = resolveIdentity(pool.user, pool.group, self);
  if (!who.ok) {
    problems.add([...path, who.key], who.message);
    // The rest is still checked, as fcgi-pm itself: one run reports every problem.
    const asSelf = credentialsOfSelf(self);
    checkPoolFiles(pool, path, asSelf, self, problems);
    checkScript(pool, path, asSelf, self, problems);
    return false;
  }
  if (who.ignored) {
    notices.add(path, `user/group ignored: fcgi-pm is not running as root, so workers run as uid ${self.uid} (as PHP-FPM does)`);
  }
  const refused = self.uid === 0 && who.runsAs.uid === 0 && pool.user === undefined && !allowRoot;
  if (refused) problems.add(path, rootAdvice(quick));
  checkPoolFiles(pool, path, who.runsAs, self, problems);
  checkScript(pool, path, who.runsAs, self, problems);
  if (pool.accept === 'direct') {
    const unavailable = directSocketSupport();
    if (unavailable !== undefined) notices.add([...path, 'accept'], `accept: direct is not available here (${unavailable}); in fallback: fcgi-pm will listen on ${pool.directListen?.text} itself and proxy to the workers (ERR_DIRECT_SOCKET, docs/direct.md)`);
  }
  return refused;
}

/** A spawned pool's `script` runs for every request: a regular file its workers can read. */
function checkScript(pool: PoolConfig, path: KeyPath, runsAs: Credentials, self: Self, problems: Problems): void {
  const file = pool.script;
  if (file === undefined) return;
  if (!isFile(file)) problems.add([...path, 'script'], `${file} is not a regular file (every request of this pool runs it)`);
  else if (runsAs.uid !== self.uid) {
    const read = accessAs(file, runsAs, 'read');
    if (read !== undefined) problems.add([...path, 'script'], `the workers' user (uid ${runsAs.uid}) ${read}`);
  }
}

function rootAdvice(quick: boolean): string {
  const user = lookupUser('www-data') !== undefined ? 'www-data' : 'nobody';
  return quick
    ? `workers would run as root; add --user ${user} (or --user root to allow it, or run with --allow-root)`
    : `workers would run as root; add user: ${user} (or user: root to allow it, or run with --allow-root)`;
}

function checkPoolFiles(pool: PoolConfig, path: KeyPath, runsAs: Credentials, self: Self, problems: Problems): void {
  const other = runsAs.uid !== self.uid;
  let cwdOk = true;
  if (pool.cwd !== undefined) {
    const missing = notDirectory(pool.cwd);
    const closed = missing === undefined && other ? accessAs(pool.cwd, runsAs, 'enter') : undefined;
    if (missing !== undefined || closed !== undefined) {
      problems.add([...path, 'cwd'], missing ?? `the workers' user (uid ${runsAs.uid}) ${closed}`);
      cwdOk = false;
    }
  }
  const argv = pool.command!;
  // A relative command or argument names a file under cwd: with a bad cwd that is said already.
  const underCwd = (p: string): boolean => !nodePath.isAbsolute(p) && p.includes('/');
  if (cwdOk || !underCwd(argv[0]!)) {
    const cmd = resolveCommand(argv[0]!, workerEnv(pool), pool.cwd);
    if (!cmd.ok) problems.add([...path, 'command'], cmd.message);
    else if (other) {
      const exec = accessAs(cmd.file, runsAs, 'execute');
      if (exec !== undefined) problems.add([...path, 'command'], `${cmd.file}: the workers' user (uid ${runsAs.uid}) ${exec}`);
    }
  }
  // A script or config file the program is given must exist, and be readable by the worker.
  const base = pool.cwd ?? process.cwd();
  argv.slice(1).forEach((arg, i) => {
    if (!mayNameFile(arg) || (!cwdOk && underCwd(arg))) return;
    const file = nodePath.resolve(base, arg);
    const missing = pathProblem(file);
    if (missing !== undefined) {
      // Only what surely names an input: a script or config file, or an interpreter's script.
      if (!FILE_ARG.test(arg) && !(i === 0 && INTERPRETER.test(nodePath.basename(argv[0]!)))) return;
      const from = nodePath.isAbsolute(arg) ? '' : ` (relative to ${pool.cwd !== undefined ? 'cwd' : "fcgi-pm's working directory"} ${base})`;
      problems.add([...path, 'command', i + 1], `${arg}${from}: ${missing}`);
      return;
    }
    if (!other || !isFile(file)) return;
    const read = accessAs(file, runsAs, 'read');
    if (read !== undefined) problems.add([...path, 'command', i + 1], `the workers' user (uid ${runsAs.uid}) ${read}; make ${arg} readable to it, or pick another user`);
  });
}

/** Script and config-file extensions: an argument ending so is an input that must exist. */
const FILE_ARG = /\.(php|phar|py|pyz|pl|rb|js|mjs|cjs|lua|sh|ini|conf|cfg|ya?ml|json|toml)$/i;

/** Programs whose first argument is the script they run (python3 ../bin/fcgi-pm-wsgi). */
const INTERPRETER = /^(python|php|perl|ruby|node|nodejs|bash|sh|dash|lua)[\d.]*$/;

/**
 * An argument that may name a file: a path ("../bin/fcgi-pm-wsgi", "/etc/php.ini") or a
 * script name ("app.py"). Not an option, a "key=value" (php -d), a URL, a placeholder
 * ({socket}) or a module or address ("mysite.wsgi:application", "127.0.0.1:9000").
 */
function mayNameFile(arg: string): boolean {
  if (arg.startsWith('-') || arg.includes('{') || arg.includes('=') || arg.includes(':')) return false;
  return arg.includes('/') || FILE_ARG.test(arg);
}

/** Why `p` cannot be opened (missing, or a parent not a directory), or undefined. */
function pathProblem(p: string): string | undefined {
  try {
    statSync(p);
    return undefined;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'ENOENT' ? 'no such file (ENOENT)' : code === 'EACCES' ? 'permission denied (EACCES)' : code ?? String(err);
  }
}

function isFile(p: string): boolean {
  try {
    return statSync(p).isFile();
  } catch {
    return false;
  }
}

function notDirectory(dir: string): string | undefined {
  try {
    return statSync(dir).isDirectory() ? undefined : `${dir} is not a directory (ENOTDIR)`;
  } catch (err) {
    return `${dir}: ${describe(err)}`;
  }
}

function describe(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ENOENT' ? 'no such directory (ENOENT)' : code === 'EACCES' ? 'permission denied (EACCES)' : code ?? String(err);
}

/** A directory we will bind in: it must exist (unless fcgi-pm makes it) and take new files. */
function dirProblem(dir: string, runtimeDir: string | undefined, daemon: Credentials): string | undefined {
  if (runtimeDir !== undefined && nodePath.resolve(dir) === nodePath.resolve(runtimeDir)) return creatable(dir, daemon);
  return notDirectory(dir) ?? writable(dir, daemon);
}

function writable(dir: string, daemon: Credentials): string | undefined {
  const why = accessAs(dir, daemon, 'write');
  return why === undefined ? undefined : `fcgi-pm (uid ${daemon.uid}) ${why} (EACCES)`;
}

/** fcgi-pm creates it (mkdir -p): it exists as a writable directory, or its nearest existing parent does. */
function creatable(dir: string, daemon: Credentials): string | undefined {
  let d = nodePath.resolve(dir);
  for (;;) {
    let st;
    try {
      st = statSync(d);
    } catch (err) {
      const up = nodePath.dirname(d);
      const code = (err as NodeJS.ErrnoException).code;
      if ((code !== 'ENOENT' && code !== 'ENOTDIR') || up === d) return `${d}: ${describe(err)}`;
      d = up;
      continue;
    }
    if (!st.isDirectory()) return `${d} is not a directory (ENOTDIR)`;
    return writable(d, daemon);
  }
}
