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
import { existsSync, readFileSync, statSync } from 'node:fs';
import * as nodePath from 'node:path';
import { controlSocketPath, isDefaultControlSocket } from '../config/control-path.js';
import { opcacheRoot } from '../config/opcache-path.js';
import { runsPhpCgi } from '../config/schema.js';
import { Problems, type KeyPath } from '../config/problems.js';
import type { Config, PoolConfig, SiteConfig } from '../config/types.js';
import { ConfigError, ErrorCodes } from '../errors.js';
import { workerEnv } from '../pool/worker-spec.js';
import { lookupGroup, lookupUser } from '../config/system-users.js';
import { formatSize } from '../config/units.js';
import { frontEndFor, unreachable, type FrontEnd } from './front-end-reach.js';
import { sitePool } from '../config/site.js';
import { accessAs, credentialsOfSelf, currentIds, resolveIdentity, type Credentials, type Self } from '../worker/identity.js';
import { setsOwnOpcache } from '../worker/php-cache.js';
import { resolveCommand } from '../worker/spawn.js';
import { phpIniAccess, PHP_INI_USER } from '../worker/php-ini-access.js';
import { directSocketSupport } from '../worker/shared-socket.js';

export interface PreflightOptions {
  /** -R / --allow-root: spawned pools without `user` may run as root. */
  allowRoot?: boolean;
  /** Who the daemon runs as (default: this process). */
  self?: Self;
  /** Pool keys the schema refused (ConfigValidation.brokenKeys): not checked again. */
  brokenKeys?: ReadonlyMap<string, ReadonlySet<string>>;
  /**
   * `fcgi-pm check`: a socket the front end the config names cannot reach is a problem
   * (at start and reload, a notice: the daemon serves, and says so).
   */
  strict?: boolean;
  /** The host's facts, for tests (default: /proc and the files of this host). */
  host?: HostFacts;
}

/** What the host has, read once per check. */
export interface HostFacts {
  /** /proc/sys/kernel/pid_max. */
  pidMax?: number | undefined;
  /** MemTotal, bytes. */
  memTotal?: number | undefined;
  /** Whether a program is installed (nginx, apache2: who the front end is). */
  installed?: (file: string) => boolean;
}

type Host = { pidMax: number | undefined; memTotal: number | undefined; installed: (file: string) => boolean };

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

  const host = readHostFacts(opts.host);
  const front = frontEndFor(undefined, undefined, host.installed);
  /** A socket the front end cannot reach: a problem for check when the config names the front end. */
  const reach = (path: KeyPath, socketPath: string, named: FrontEnd | undefined, socket: Parameters<typeof unreachable>[3]): void => {
    const who = named ?? front;
    const why = who === undefined ? undefined : unreachable(socketPath, who, self, socket);
    if (why !== undefined) (opts.strict === true && who!.named ? problems : notices).add(path, why);
  };

  for (const pool of cfg.pools.values()) {
    const broken = opts.brokenKeys?.get(pool.name);
    if (checkPool(pool, ['pools', pool.name], self, opts.allowRoot === true, cfg.source === QUICK_SOURCE, problems, notices, broken)) rootRefusals++;
    checkPoolSize(pool, ['pools', pool.name], host, problems);
    if (broken?.has('command') !== true) checkPhpAdmin(pool, ['pools', pool.name], problems, notices);
    const direct = pool.accept === 'direct' ? pool.directListen : undefined;
    if (direct?.kind === 'unix') {
      const why = dirProblem(nodePath.dirname(direct.path), cfg.runtimeDir, daemon);
      if (why !== undefined) problems.add(['pools', pool.name, 'direct_listen'], `cannot create ${direct.text}: ${why}`);
      else if (broken === undefined || !(broken.has('user') || broken.has('group'))) {
        // The socket belongs to the workers' user and group (the native addon chowns it).
        const u = pool.user === undefined ? undefined : lookupUser(pool.user);
        const g = pool.group === undefined ? undefined : lookupGroup(pool.group);
        const owner = u === undefined ? undefined : { id: u.uid, name: u.name };
        const group = g !== undefined ? { id: g.gid, name: g.name } : u !== undefined ? { id: u.gid, name: String(u.gid) } : undefined;
        reach(['pools', pool.name, 'direct_listen'], direct.path, undefined, { owner: self.uid === 0 ? owner : undefined, group: self.uid === 0 ? group : undefined, mode: pool.directSocketMode ?? 0o660 });
      }
    }
  }
  const total = cfg.maxChildrenTotal ?? 0;
  if (total > 0 && host.pidMax !== undefined && total > host.pidMax) {
    problems.add(['max_children_total'], `${total} is above this host's pid_max (${host.pidMax}, /proc/sys/kernel/pid_max): that many processes cannot exist`);
  }

  cfg.listen.forEach((l, i) => {
    // `?.`: on a config with schema problems (validateConfig's `valid`) an invalid address is undefined.
    if (l.address?.kind === 'unix') {
      const why = dirProblem(nodePath.dirname(l.address.path), cfg.runtimeDir, daemon);
      if (why !== undefined) problems.add(['listen', i, 'address'], `cannot create ${l.address.text}: ${why}`);
      else reach(['listen', i, 'address'], l.address.path, l.owner !== undefined || l.group !== undefined ? frontEndFor(l.owner, l.group) : undefined, { owner: l.owner, group: l.group, mode: l.mode ?? 0o600 });
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
 * php_admin holds what php-cgi keeps from scripts (src/pool/php-settings.ts): each name
 * must be a setting the pool's php-cgi knows that no script may set (access without
 * PHP_INI_USER), or open_basedir, which a script may only narrow.
 */
function checkPhpAdmin(pool: PoolConfig, path: KeyPath, problems: Problems, notices: Problems): void {
  const names = Object.keys(pool.phpAdmin ?? {});
  if (names.length === 0 || pool.command === undefined || !runsPhpCgi(pool.command)) return;
  const cmd = resolveCommand(pool.command[0]!, workerEnv(pool), pool.cwd);
  if (!cmd.ok) return; // said by checkPoolFiles
  const access = phpIniAccess(cmd.file);
  if (typeof access === 'string') {
    notices.add([...path, 'php_admin'], `could not ask php-cgi which settings it can keep from scripts (${access}); not checked`);
    return;
  }
  for (const name of names) {
    const bits = access.get(name);
    if (bits === undefined) problems.add([...path, 'php_admin', name], `${cmd.file} has no setting named ${name} (a typo, or an extension it does not load)`);
    else if ((bits & PHP_INI_USER) !== 0 && name !== 'open_basedir') {
      problems.add([...path, 'php_admin', name], `a script may change ${name} with ini_set (PHP_INI_ALL), and php-cgi cannot lock a setting as php-fpm's php_admin_value does: set it in php_value (a default scripts may change)${/memory/.test(name) ? ', and cap memory with max_memory_hard or rlimit_as, which no script can change' : ''}`);
    }
  }
}

/** A size as written when whole (4GiB), else to a tenth of a GiB or a MiB (MemTotal). */
function roughSize(bytes: number): string {
  const exact = formatSize(bytes);
  if (!/KiB$|\dB$/.test(exact)) return exact;
  return bytes >= 2 ** 30 ? `${(bytes / 2 ** 30).toFixed(1)}GiB` : `${Math.round(bytes / 2 ** 20)}MiB`;
}

function readHostFacts(given: HostFacts | undefined): Host {
  return {
    pidMax: given?.pidMax ?? readNumber('/proc/sys/kernel/pid_max'),
    memTotal: given?.memTotal ?? readMemTotal(),
    installed: given?.installed ?? ((f: string) => existsSync(f)),
  };
}

function readNumber(file: string): number | undefined {
  try {
    const n = Number(readFileSync(file, 'utf8').trim());
    return Number.isFinite(n) && n > 0 ? n : undefined;
  } catch {
    return undefined;
  }
}

function readMemTotal(): number | undefined {
  try {
    const m = /^MemTotal:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'));
    return m === null ? undefined : Number(m[1]) * 1024;
  } catch {
    return undefined;
  }
}

/**
 * max_children that cannot be: more processes than the kernel's pid_max, or a static pool
 * (all its workers at once, from the start) whose workers at expected_worker_memory each
 * need more than its memory_limit or this host's memory.
 */
function checkPoolSize(pool: PoolConfig, path: KeyPath, host: Host, problems: Problems): void {
  if (pool.command === undefined) return;
  const n = pool.maxChildren;
  if (host.pidMax !== undefined && n > host.pidMax) {
    problems.add([...path, 'max_children'], `${n} is above this host's pid_max (${host.pidMax}, /proc/sys/kernel/pid_max): that many processes cannot exist`);
    return;
  }
  if (pool.pm !== 'static') return;
  const workers = Math.ceil(n / (pool.groupSize ?? 1));
  const each = pool.expectedWorkerMemory ?? 32 * 1024 * 1024;
  const need = workers * each;
  const limit = pool.memoryLimit ?? 0;
  const [room, what] = limit > 0 && (host.memTotal === undefined || limit < host.memTotal) ? [limit, 'its memory_limit'] : [host.memTotal, "this host's memory (MemTotal)"];
  if (room !== undefined && need > room) {
    problems.add([...path, 'max_children'], `pm static starts all ${workers} workers at once: at expected_worker_memory (${formatSize(each)}) each that is ${roughSize(need)}, more than ${what} (${roughSize(room)}); lower max_children or use pm: dynamic or ondemand`);
  }
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
 * --allow-root), command and cwd, its size, its php_admin settings, and its document_root. Problems name the site's file or row.
 */
export function preflightSite(site: SiteConfig, opts: PreflightOptions = {}, memo?: SiteCheckMemo): { problems: string[]; notices: string[] } {
  const pool = sitePool(site);
  // Everything checkPool looks at; sites sharing vhosts.defaults share one check.
  const key = JSON.stringify([pool.command, pool.user, pool.group, pool.cwd, pool.env, pool.inheritEnv, pool.phpAdmin, pool.pm, pool.maxChildren, pool.expectedWorkerMemory]);
  let checked = memo?.get(key);
  if (checked === undefined) {
    const p = new Problems(ANY_SITE, undefined);
    const n = new Problems(ANY_SITE, undefined);
    checkPool(pool, ['pool'], opts.self ?? currentIds(), opts.allowRoot === true, false, p, n);
    checkPoolSize(pool, ['pool'], readHostFacts(opts.host), p);
    checkPhpAdmin(pool, ['pool'], p, n);
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

/**
 * A spawned pool's user, root policy and files; true when it was refused for running as
 * root. `broken`: keys the schema refused, said already (a bad user: who the workers run
 * as is unknown, so the files are checked as fcgi-pm's user).
 */
function checkPool(pool: PoolConfig, path: KeyPath, self: Self, allowRoot: boolean, quick: boolean, problems: Problems, notices: Problems, broken?: ReadonlySet<string>): boolean {
  if (pool.command === undefined) return false;
  const unknown = broken !== undefined && (broken.has('user') || broken.has('group'));
  const who = unknown ? undefined : resolveIdentity(pool.user, pool.group, self);
  if (who === undefined || !who.ok) {
    if (who !== undefined) problems.add([...path, who.key], who.message);
    // The rest is still checked, as fcgi-pm itself: one run reports every problem.
    const asSelf = credentialsOfSelf(self);
    checkPoolFiles(pool, path, asSelf, self, problems, broken?.has('cwd') !== true);
    checkScript(pool, path, asSelf, self, problems);
    return false;
  }
  if (who.ignored) {
    notices.add(path, `user/group ignored: fcgi-pm is not running as root, so workers run as uid ${self.uid} (as PHP-FPM does)`);
  }
  const refused = self.uid === 0 && who.runsAs.uid === 0 && pool.user === undefined && !allowRoot;
  if (refused) problems.add(path, rootAdvice(quick));
  checkPoolFiles(pool, path, who.runsAs, self, problems, broken?.has('cwd') !== true);
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

function checkPoolFiles(pool: PoolConfig, path: KeyPath, runsAs: Credentials, self: Self, problems: Problems, cwdKnown = true): void {
  const other = runsAs.uid !== self.uid;
  let cwdOk = cwdKnown;
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
