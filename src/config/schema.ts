/**
 * Turns a parsed config object (snake_case, as in the file) into a validated Config,
 * driven by the key tables in keys.ts. Every problem is collected (not just the first)
 * and reported as "file:line: key.path: message"; the line comes from a Locator that
 * load.ts builds from the YAML node ranges (objects built in code have no lines).
 *
 * Pure but for user and group names (listener owner/group), looked up through
 * opts.accounts, by default in /etc/passwd and /etc/group. Relative paths are resolved
 * as text against baseDir.
 */
import * as nodePath from 'node:path';
import { isIP } from 'node:net';
import { ConfigError } from '../errors.js';
import { parseAddress, type SocketAddress } from '../protocol/address.js';
import type { AccountId, Config, DashboardConfig, ListenerConfig, MemoryBudgetSetting, PoolConfig, RewriteRule, VhostsConfig } from './types.js';
import type { KeySpec, KeyType } from './key-spec.js';
import { LIMITS_KEYS, LISTENER_KEYS, LOG_KEYS, POOL_KEYS, SECTION_KEYS, TOP_KEYS } from './keys.js';
import { VHOSTS_KEYS } from './vhosts-keys.js';
import { closest, didYouMean, logKeyFor } from './suggest.js';
import { convertOperations } from './operations-keys.js';
import { lookupGroup, lookupUser, type GroupEntry, type UserEntry } from './system-users.js';
import { formatDuration, formatSize, parseDuration, parseSize, show } from './units.js';
import { Problems, type KeyPath, type Locator } from './problems.js';
import { parseCacheKeyPart } from './authorizer-key.js';
import { DASHBOARD_KEYS, PASSWORD_HASH } from './dashboard-keys.js';

export { formatKeyPath, type KeyPath, type Locator } from './problems.js';

export interface FromObjectOptions {
  /** Name used in messages (default: `source`). */
  label?: string;
  locate?: Locator;
  /** Relative paths are resolved against this (default: the directory of `source` when absolute, else the cwd). */
  baseDir?: string;
  /** Where user and group names are looked up (default: this host's /etc/passwd and /etc/group). */
  accounts?: Accounts;
}

export interface Accounts {
  user(nameOrId: string): UserEntry | undefined;
  group(nameOrId: string): GroupEntry | undefined;
}

const SYSTEM_ACCOUNTS: Accounts = { user: (n) => lookupUser(n), group: (n) => lookupGroup(n) };

/** Pool names end up in logs, status output and socket file names. */
const POOL_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

/** The command is php-cgi (php-cgi8.2 …): PHP's defaults, extensions and opcache file cache apply. */
export function runsPhpCgi(command: readonly string[]): boolean {
  return command.length > 0 && nodePath.basename(command[0]!).startsWith('php-cgi');
}

/**
 * Where fcgi-pm's WSGI adapter is in a command: the index of bin/fcgi-pm-wsgi (run
 * directly or by python3) or of `-m fcgi_pm_wsgi`'s module name; -1 if it is not there.
 */
export function wsgiAdapterIndex(command: readonly string[]): number {
  for (let i = 0; i < Math.min(command.length, 3); i++) {
    const a = command[i]!;
    if (nodePath.basename(a) === 'fcgi-pm-wsgi') return i;
    if (a === '-m' && command[i + 1] === 'fcgi_pm_wsgi') return i + 1;
  }
  return -1;
}

/**
 * preload and the adapter's --preload must agree: with preload: true fcgi-pm adds
 * --preload to fcgi-pm-wsgi itself (worker-spec.ts); --preload without preload: true
 * makes a fork server nobody forks from, and preload: true on another program needs
 * one that speaks the fork-server protocol (given --preload).
 */
function checkPreload(pool: PoolConfig, path: KeyPath, ctx: Ctx): void {
  const cmd = pool.command;
  if (cmd === undefined) return;
  const adapter = wsgiAdapterIndex(cmd);
  const flag = cmd.indexOf('--preload');
  if (pool.preload !== true && flag >= 0) {
    ctx.problems.add([...path, 'command', flag], `--preload makes the program a fork server for fcgi-pm, which only a pool with preload: true uses; add preload: true or drop --preload`);
  } else if (pool.preload === true && adapter < 0 && flag < 0) {
    ctx.problems.add([...path, 'preload'], `needs a fork server as command: bin/fcgi-pm-wsgi (fcgi-pm gives it --preload), or a program that speaks fcgi-pm's fork-server protocol given --preload; got ${cmd[0]}`);
  }
}

/**
 * The workers must speak the pool's `backend`, or every request fails 502
 * ERR_BACKEND_PROTOCOL: fcgi-pm-wsgi speaks FastCGI unless given --scgi, php-cgi only
 * FastCGI.
 */
function checkWorkerProtocol(pool: PoolConfig, path: KeyPath, present: ReadonlySet<string>, ctx: Ctx): void {
  const cmd = pool.command;
  if (cmd === undefined || pool.backend === undefined) return;
  let speaks: 'fastcgi' | 'scgi' | undefined;
  let at = -1;
  if (wsgiAdapterIndex(cmd) >= 0) {
    const scgi = cmd.lastIndexOf('--scgi');
    const fcgi = cmd.lastIndexOf('--fastcgi');
    speaks = scgi > fcgi ? 'scgi' : 'fastcgi';
    at = Math.max(scgi, fcgi);
  } else if (runsPhpCgi(cmd)) speaks = 'fastcgi';
  if (speaks === undefined || speaks === pool.backend) return;
  const prog = nodePath.basename(cmd[wsgiAdapterIndex(cmd) >= 0 ? wsgiAdapterIndex(cmd) : 0]!);
  const says = at >= 0 ? `${prog} ${cmd[at]} speaks ${speaks === 'scgi' ? 'SCGI' : 'FastCGI'}` : `${prog} speaks ${speaks === 'scgi' ? 'SCGI' : 'FastCGI'}${speaks === 'fastcgi' && prog !== 'fcgi-pm-wsgi' ? ' only' : ' (without --scgi)'}`;
  const fix = speaks === 'scgi' ? 'set backend: scgi, or drop --scgi' : at >= 0 || prog === 'fcgi-pm-wsgi' ? 'set backend: fastcgi, or give it --scgi' : 'set backend: fastcgi';
  const key = present.has('backend') ? 'backend' : 'command';
  ctx.problems.add(key === 'command' && at >= 0 ? [...path, 'command', at] : [...path, key], `${says} but the pool's backend is ${pool.backend}${key === 'command' ? ' (the default)' : ''}: every request would fail 502 ERR_BACKEND_PROTOCOL; ${fix}`);
}

/** Environment defaults for php-cgi: fcgi-pm runs one process per worker and recycles it itself. */
const PHP_CGI_ENV: Record<string, string> = { PHP_FCGI_CHILDREN: '0', PHP_FCGI_MAX_REQUESTS: '0' };
const PHP_CGI_EXTENSIONS = ['.php', '.phar'];
/** accept: direct's default listen() backlog (PHP-FPM's listen.backlog; the kernel caps it at net.core.somaxconn). */
export const DIRECT_BACKLOG_DEFAULT = 511;

interface Ctx {
  problems: Problems;
  baseDir: string;
  accounts: Accounts;
}

const INVALID: unique symbol = Symbol('invalid');
type Converted = unknown | typeof INVALID;

function isMapping(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function scalarText(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  if (typeof v === 'boolean') return String(v);
  return undefined;
}

function convert(type: KeyType, v: unknown, path: KeyPath, ctx: Ctx): Converted {
  const bad = (msg: string): typeof INVALID => {
    ctx.problems.add(path, msg);
    return INVALID;
  };
  switch (type.kind) {
    case 'int': {
      if (typeof v !== 'number' || !Number.isInteger(v) || v < type.min) return bad(`must be a whole number ≥ ${type.min}, got ${show(v)}`);
      if (type.max !== undefined && v > type.max) return bad(`must be at most ${type.max}, got ${v}`);
      return v;
    }
    case 'duration': {
      const ms = parseDuration(v);
      if (typeof ms === 'string') return bad(ms);
      if (ms < type.min) return bad(type.min === 1 ? `must be longer than 0, got ${show(v)}` : `must be at least ${formatDuration(type.min)}, got ${show(v)}`);
      return ms;
    }
    case 'size': {
      const n = parseSize(v);
      if (typeof n === 'string') return bad(n);
      if (n < type.min || n > type.max) return bad(`must be from ${formatSize(type.min)} to ${formatSize(type.max)}, got ${show(v)}`);
      return n;
    }
    case 'bool':
      if (type.auto === true && typeof v === 'string' && v.trim().toLowerCase() === 'auto') return 'auto';
      return typeof v === 'boolean' ? v : bad(`must be true or false${type.auto === true ? ' or auto' : ''}, got ${show(v)}`);
    case 'string': {
      const s = scalarText(v);
      if (s === undefined || typeof v === 'boolean') return bad(`must be a string, got ${show(v)}`);
      return s === '' ? bad('must not be empty') : s;
    }
    case 'path': {
      if (typeof v !== 'string') return bad(`must be a path (a string), got ${show(v)}`);
      if (v === '' || v.includes('\0')) return bad(`must be a path, got ${show(v)}`);
      return nodePath.resolve(ctx.baseDir, v);
    }
    case 'enum': {
      const s = typeof v === 'string' ? v.toLowerCase() : undefined;
      if (s !== undefined && type.values.includes(s)) return s;
      return bad(`must be one of ${type.values.join(', ')}, got ${show(v)}${s === undefined ? '' : didYouMean(s, type.values)}`);
    }
    case 'address': {
      if (typeof v !== 'string') return bad(`must be an address such as "127.0.0.1:9000" or "unix:/run/app.sock", got ${show(v)}`);
      const a = parseAddress(v);
      return typeof a === 'string' ? bad(a) : a;
    }
    case 'addresses': {
      const list = typeof v === 'string' ? [v] : v;
      if (!Array.isArray(list)) return bad(`must be a list of addresses, got ${show(v)}`);
      if (list.length === 0) return bad('must list at least one address');
      const out: SocketAddress[] = [];
      const seen = new Map<string, number>();
      let ok = true;
      list.forEach((item, i) => {
        const itemPath = typeof v === 'string' ? path : [...path, i];
        const a = convert({ kind: 'address' }, item, itemPath, ctx);
        if (a === INVALID) {
          ok = false;
          return;
        }
        const addr = a as SocketAddress;
        const prev = seen.get(addr.text);
        if (prev !== undefined) {
          ctx.problems.add(itemPath, `${addr.text} is listed twice (also at [${prev}])`);
          ok = false;
        }
        seen.set(addr.text, i);
        out.push(addr);
      });
      return ok ? out : INVALID;
    }
    case 'argv': {
      let argv: string[];
      if (typeof v === 'string') {
        // A string is split at spaces; quoting rules are a shell's business, not ours.
        if (/["'\\]/.test(v)) return bad(`contains quotes or backslashes; write it as a list, e.g. [php-cgi, -d, "memory_limit=256M"]`);
        argv = v.trim().split(/\s+/).filter((s) => s !== '');
      } else if (Array.isArray(v)) {
        argv = [];
        for (let i = 0; i < v.length; i++) {
          const s = scalarText(v[i]);
          if (s === undefined) return bad(`[${i}] must be a string, got ${show(v[i])}`);
          argv.push(s);
        }
      } else {
        return bad(`must be a list of program and arguments, e.g. [php-cgi], got ${show(v)}`);
      }
      if (argv.length === 0 || argv[0] === '') return bad('must name a program');
      // "./app.fcgi" is relative to the config file; "php-cgi" is looked up in PATH.
      if (argv[0]!.includes('/') && !nodePath.isAbsolute(argv[0]!)) argv[0] = nodePath.resolve(ctx.baseDir, argv[0]!);
      return argv;
    }
    case 'string-map': {
      if (!isMapping(v)) return bad(`must be a mapping of names to values, got ${show(v)}`);
      const out: Record<string, string> = {};
      let ok = true;
      for (const [k, val] of Object.entries(v)) {
        if (k === '' || k.includes('=') || k.includes('\0')) {
          ctx.problems.add([...path, k], 'names must not be empty or contain "="');
          ok = false;
          continue;
        }
        const s = val === null ? '' : scalarText(val);
        if (s === undefined) {
          ctx.problems.add([...path, k], `must be a string, got ${show(val)}`);
          ok = false;
          continue;
        }
        out[k] = s;
      }
      return ok ? out : INVALID;
    }
    case 'string-list': {
      const list = typeof v === 'string' ? [v] : v;
      if (!Array.isArray(list)) return bad(`must be a list of strings, got ${show(v)}`);
      const out: string[] = [];
      for (let i = 0; i < list.length; i++) {
        const s = list[i];
        if (typeof s !== 'string' || s === '') return bad(`[${i}] must be a non-empty string, got ${show(s)}`);
        out.push(s);
      }
      return out;
    }
    case 'mode': {
      // YAML reads `mode: 0660` as the decimal number 660; the raw text tells what was meant.
      let text: string | undefined;
      if (typeof v === 'string') text = v.trim();
      else if (typeof v === 'number') {
        const raw = ctx.problems.raw(path);
        if (raw !== undefined && /^0(o?)[0-7]+$/i.test(raw)) text = raw;
      }
      const m = text === undefined ? null : /^(?:0o)?([0-7]{3,4})$/i.exec(text);
      if (!m) return bad(`must be an octal file mode in quotes, e.g. "0660", got ${show(v)}`);
      const mode = parseInt(m[1]!, 8);
      return mode > 0o7777 ? bad(`must be at most "07777", got ${show(v)}`) : mode;
    }
    case 'budget':
      return convertBudget(v, bad);
    case 'user':
    case 'group':
      return convertAccount(type.kind, v, bad, ctx.accounts);
    case 'extensions':
      return convertExtensions(v, bad);
    case 'paths': {
      const list = typeof v === 'string' ? [v] : v;
      if (!Array.isArray(list)) return bad(`must be a list of paths, got ${show(v)}`);
      const out: string[] = [];
      for (let i = 0; i < list.length; i++) {
        const p = convert({ kind: 'path' }, list[i], typeof v === 'string' ? path : [...path, i], ctx);
        if (p === INVALID) return INVALID;
        out.push(p as string);
      }
      return out;
    }
    case 'mapping':
      return isMapping(v) ? v : bad(`must be a mapping, got ${show(v)}`);
    case 'rewrite':
      return convertRewrite(v, path, ctx);
    case 'url-path':
    case 'allow-list':
    case 'client-list':
    case 'access-format':
    case 'path-or-off':
      return convertOperations(type.kind, v, bad, ctx.baseDir);
  }
}

/** Rewrite rules: each a regex that compiles and a "/target", or a "/front-controller"; every bad rule is reported. */
function convertRewrite(v: unknown, path: KeyPath, ctx: Ctx): RewriteRule[] | typeof INVALID {
  if (!Array.isArray(v)) {
    ctx.problems.add(path, `must be a list of rules such as { match: "^/post/(\\d+)$", to: "/post.php?id=$1" } or { front_controller: /index.php }, got ${show(v)}`);
    return INVALID;
  }
  const out: RewriteRule[] = [];
  const before = ctx.problems.count;
  v.forEach((r, i) => {
    const at = [...path, i];
    const keys = isMapping(r) ? Object.keys(r).sort().join(',') : '';
    const o = r as Record<string, unknown>;
    if (keys === 'front_controller' && typeof o.front_controller === 'string' && o.front_controller.startsWith('/')) {
      out.push({ frontController: o.front_controller });
    } else if (keys === 'match,to' && typeof o.match === 'string' && typeof o.to === 'string') {
      try {
        new RegExp(o.match);
      } catch (err) {
        ctx.problems.add([...at, 'match'], `is not a regular expression: ${(err as Error).message}`);
        return;
      }
      if (!o.to.startsWith('/')) ctx.problems.add([...at, 'to'], `must be a path starting with "/", got ${show(o.to)}`);
      else out.push({ match: o.match, to: o.to });
    } else {
      ctx.problems.add(at, `must be { match: REGEX, to: "/path?query" } or { front_controller: "/script" }, got ${show(r)}`);
    }
  });
  return ctx.problems.count > before ? INVALID : out;
}

/** A user or group name that exists here, or a numeric id (which need not have an entry). */
function convertAccount(kind: 'user' | 'group', v: unknown, bad: (msg: string) => typeof INVALID, accounts: Accounts): AccountId | typeof INVALID {
  const s = typeof v === 'number' && Number.isInteger(v) && v >= 0 ? String(v) : typeof v === 'string' ? v.trim() : undefined;
  if (s === undefined || s === '' || s.includes(':')) return bad(`must be a ${kind} name or a numeric id, got ${show(v)}`);
  const found = kind === 'user' ? accounts.user(s) : accounts.group(s);
  if (found !== undefined) return { id: kind === 'user' ? (found as UserEntry).uid : found.gid, name: found.name };
  if (/^\d+$/.test(s)) return { id: Number(s), name: s };
  return bad(`no ${kind} named "${s}" on this host (${kind === 'user' ? '/etc/passwd' : '/etc/group'})`);
}

/** memory_budget: "auto", "50%" (of MemTotal) or a size of at least 1 MiB. */
function convertBudget(v: unknown, bad: (msg: string) => typeof INVALID): MemoryBudgetSetting | typeof INVALID {
  const hint = 'must be a size such as "512MiB", a percentage of MemTotal such as "50%", or auto';
  if (typeof v === 'string') {
    const s = v.trim().toLowerCase();
    if (s === 'auto') return { kind: 'auto' };
    const pct = /^(\d+(?:\.\d+)?)\s*%$/.exec(s);
    if (pct) {
      const percent = Number(pct[1]);
      return percent > 0 && percent <= 100 ? { kind: 'percent', percent } : bad(`percentage must be above 0 and at most 100, got ${show(v)}`);
    }
  }
  const bytes = parseSize(v);
  if (typeof bytes === 'string') return bad(`${hint}, got ${show(v)}`);
  if (bytes < 1024 * 1024) return bad(`must be at least 1MiB, got ${show(v)}`);
  return { kind: 'bytes', bytes };
}

/** limit_extensions: ".php .phar" (PHP-FPM's spelling), [.php, .phar], or off / [] for none. */
function convertExtensions(v: unknown, bad: (msg: string) => typeof INVALID): string[] | typeof INVALID {
  if (v === false || (typeof v === 'string' && v.trim().toLowerCase() === 'off')) return [];
  const list = typeof v === 'string' ? v.trim().split(/\s+/).filter((s) => s !== '') : v;
  if (!Array.isArray(list)) return bad(`must be a list of extensions such as [.php, .phar], or off, got ${show(v)}`);
  for (const e of list) {
    if (typeof e !== 'string' || !/^\.[^/\s\0]+$/.test(e)) return bad(`extensions start with "." and have no "/" or spaces, e.g. .php; got ${show(e)}`);
  }
  return list as string[];
}

/** Where else a key is valid, for "it belongs in ..." hints. */
const KEY_HOMES: Array<[string, readonly KeySpec[]]> = [
  ['listen[]', LISTENER_KEYS],
  ['pools.<name>', POOL_KEYS],
  ['limits', LIMITS_KEYS],
  ['log', LOG_KEYS],
  ['the top level', TOP_KEYS],
  ['dashboard', DASHBOARD_KEYS],
];

function unknownKeyMessage(key: string, here: readonly KeySpec[], extra: readonly string[] = []): string {
  const logKey = here === TOP_KEYS ? logKeyFor(key) : undefined;
  if (logKey !== undefined) return `unknown key (did you mean "${logKey}"?)`;
  const names = [...here.map((k) => k.key), ...extra];
  const near = closest(key, names);
  if (near !== undefined) return `unknown key (did you mean "${near}"?)`;
  for (const [home, specs] of KEY_HOMES) {
    if (specs !== here && specs.some((k) => k.key === key)) return `unknown key here (it belongs in ${home})`;
  }
  return `unknown key; valid keys are: ${names.join(', ')}`;
}

interface Section {
  values: Record<string, unknown>;
  /** Keys the file set (as opposed to defaults). */
  present: Set<string>;
  ok: boolean;
}

const defaultsCache = new Map<KeySpec, unknown>();

function defaultOf(spec: KeySpec): unknown {
  if (spec.default === undefined) return undefined;
  let v = defaultsCache.get(spec);
  if (v === undefined) {
    const problems = new Problems('<defaults>', undefined);
    v = convert(spec.type, spec.default, [spec.key], { problems, baseDir: '/', accounts: SYSTEM_ACCOUNTS });
    if (problems.count > 0) throw new Error(`bad default for ${spec.key}: ${problems.texts().join('; ')}`);
    defaultsCache.set(spec, v);
  }
  // Lists and maps are handed out as copies so one pool's edits cannot leak into another.
  if (Array.isArray(v)) return [...v];
  if (isMapping(v)) return { ...v };
  return v;
}

function readSection(obj: unknown, specs: readonly KeySpec[], path: KeyPath, ctx: Ctx, what: string): Section {
  const section: Section = { values: {}, present: new Set(), ok: true };
  const before = ctx.problems.count;
  let given: Record<string, unknown> = {};
  if (isMapping(obj)) given = obj;
  else if (obj !== undefined && obj !== null) ctx.problems.add(path, `must be a mapping (${what}), got ${show(obj)}`);
  for (const key of Object.keys(given)) {
    if (!specs.some((s) => s.key === key)) ctx.problems.add([...path, key], unknownKeyMessage(key, specs));
  }
  for (const spec of specs) {
    const raw = given[spec.key];
    if (raw === undefined || raw === null) {
      if (spec.required) ctx.problems.add(path, `"${spec.key}" is required (${spec.doc})`);
      section.values[spec.field] = defaultOf(spec);
      continue;
    }
    section.present.add(spec.key);
    const v = convert(spec.type, raw, [...path, spec.key], ctx);
    section.values[spec.field] = v === INVALID ? undefined : v;
  }
  section.ok = ctx.problems.count === before;
  return section;
}

function checkScope(section: Section, specs: readonly KeySpec[], path: KeyPath, allowed: ReadonlySet<string>, message: (scope: string) => string, ctx: Ctx): void {
  for (const spec of specs) {
    if (spec.scope !== undefined && section.present.has(spec.key) && !allowed.has(spec.scope)) {
      ctx.problems.add([...path, spec.key], message(spec.scope));
    }
  }
}

function buildPool(name: string, obj: unknown, ctx: Ctx, path: KeyPath = ['pools', name]): PoolConfig {
  const s = readSection(obj, POOL_KEYS, path, ctx, 'pool settings');
  const v = s.values;
  const spawned = s.present.has('command');
  const external = s.present.has('backends');
  if (!spawned && !external && isMapping(obj)) {
    ctx.problems.add(path, 'needs either "backends" (addresses of running backends) or "command" (a program fcgi-pm spawns)');
  } else if (spawned && external) {
    ctx.problems.add(path, 'has both "backends" and "command"; a pool either proxies to running backends or spawns workers, so make two pools');
  } else {
    checkScope(s, POOL_KEYS, path, new Set([spawned ? 'spawned' : 'external']), (scope) => scope === 'spawned' ? 'only applies to pools with "command" (this pool has "backends")' : 'only applies to pools with "backends" (this pool has "command")', ctx);
  }

  const pool = { name, ...v } as unknown as PoolConfig;
  pool.backends ??= [];

  if (pool.pm === 'dynamic') {
    // Defaults give way to a small max_children; values the file set are checked.
    if (!s.present.has('max_spare')) pool.maxSpare = Math.max(1, Math.min(pool.maxSpare, pool.maxChildren));
    if (!s.present.has('min_spare')) pool.minSpare = Math.min(pool.minSpare, pool.maxSpare);
    if (pool.minSpare > pool.maxSpare) ctx.problems.add([...path, 'min_spare'], `must be ≤ max_spare (${pool.maxSpare}), got ${pool.minSpare}`);
    if (pool.maxSpare > pool.maxChildren) ctx.problems.add([...path, 'max_spare'], `must be ≤ max_children (${pool.maxChildren}), got ${pool.maxSpare}`);
  }
  if (pool.startChildren === undefined) {
    pool.startChildren = pool.pm === 'static' ? pool.maxChildren : pool.pm === 'dynamic' ? pool.minSpare : 0;
  } else if (pool.pm === 'dynamic' && (pool.startChildren < pool.minSpare || pool.startChildren > pool.maxSpare)) {
    ctx.problems.add([...path, 'start_children'], `must be from min_spare (${pool.minSpare}) to max_spare (${pool.maxSpare}) with pm dynamic, got ${pool.startChildren}`);
  } else if (pool.startChildren > pool.maxChildren) {
    ctx.problems.add([...path, 'start_children'], `must be ≤ max_children (${pool.maxChildren}), got ${pool.startChildren}`);
  }
  if (pool.preload === true && (pool.groupSize ?? 1) > 1) {
    ctx.problems.add([...path, 'group_size'], 'a preload pool forks one worker per slot itself; group_size is for php-cgi groups');
  }
  if (pool.preload === true && s.present.has('socket') && pool.socket === 'argv') {
    ctx.problems.add([...path, 'socket'], 'a preload pool hands each fork a listening socket; socket: argv does not apply');
  }
  if ((pool.groupSize ?? 1) > pool.maxChildren) {
    ctx.problems.add([...path, 'group_size'], `must be ≤ max_children (${pool.maxChildren}): max_children counts php processes, group_size of them per worker; got ${pool.groupSize}`);
  }
  checkMemoryKeys(pool, path, s.present, ctx);
  checkAuthorizerCache(pool, path, ctx);
  checkPreload(pool, path, ctx);
  checkWorkerProtocol(pool, path, s.present, ctx);
  for (const key of ['php_value', 'php_admin'] as const) {
    if (s.present.has(key) && pool.command !== undefined && !runsPhpCgi(pool.command)) ctx.problems.add([...path, key], `is for php-cgi pools (given as -d NAME=VALUE); this command is ${nodePath.basename(pool.command[0]!)}`);
  }
  if (pool.residentParent === true) {
    if (pool.command === undefined || !runsPhpCgi(pool.command)) ctx.problems.add([...path, 'resident_parent'], 'is for php-cgi pools: it keeps a php-cgi parent (PHP_FCGI_CHILDREN) paused to fork from; this command is not php-cgi');
    else if (pool.accept === 'direct') ctx.problems.add([...path, 'resident_parent'], 'accept: direct pools exec every worker on the shared socket; resident_parent is for accept: proxy pools');
  }
  if (pool.maxRequests > 0 && pool.maxRequestsJitter >= pool.maxRequests) {
    ctx.problems.add([...path, 'max_requests_jitter'], `must be less than max_requests (${pool.maxRequests}), got ${pool.maxRequestsJitter}`);
  }

  const direct = pool.accept === 'direct';
  if (pool.command !== undefined) {
    if (pool.socket === 'argv' && !pool.command.slice(1).some((a) => a.includes('{socket}') || a.includes('{port}'))) {
      ctx.problems.add([...path, 'command'], 'needs "{socket}" (a Unix socket path) or "{port}" (a loopback port) in its arguments when socket is argv, e.g. [php-cgi, -b, "{socket}"]');
    }
    const phpCgi = runsPhpCgi(pool.command);
    if (pool.env !== undefined && phpCgi) {
      // A direct php-cgi counts its own requests: the pool sets PHP_FCGI_MAX_REQUESTS from max_requests.
      for (const [k, val] of Object.entries(PHP_CGI_ENV)) if (!(k in pool.env) && !(direct && k === 'PHP_FCGI_MAX_REQUESTS')) pool.env[k] = val;
    }
    // php-cgi runs any file it is given as PHP; PHP-FPM's security.limit_extensions default.
    if (!s.present.has('limit_extensions') && phpCgi) pool.limitExtensions = [...PHP_CGI_EXTENSIONS];
    if (direct) checkDirect(pool, path, s.present, phpCgi, ctx);
  } else {
    pool.socket = 'fd0';
  }
  return pool;
}

/**
 * accept: direct: the workers accept on one shared socket, so only what works without a
 * proxy in between may be set: one process per worker serving the shared socket
 * (FastCGI or SCGI, exec'd with it as fd 0 or forked by a preload parent that holds it),
 * and the script guard only where it can run inside the worker (php-cgi's
 * auto_prepend_file).
 */
function checkDirect(pool: PoolConfig, path: KeyPath, present: ReadonlySet<string>, phpCgi: boolean, ctx: Ctx): void {
  const why = 'accept: direct';
  if (pool.directListen === undefined) ctx.problems.add(path, `${why} needs "direct_listen": the socket the workers share and the front end connects to, e.g. "unix:/run/fcgi-pm/site.sock"`);
  else if (pool.directListen.kind === 'tcp' && isIP(pool.directListen.host) === 0) ctx.problems.add([...path, 'direct_listen'], `give a numeric address, e.g. "127.0.0.1:${pool.directListen.port}"`);
  if (pool.socket !== 'fd0') ctx.problems.add([...path, 'socket'], `${why}: the workers get the shared socket as fd 0; socket: argv does not apply`);
  if ((pool.groupSize ?? 1) > 1) ctx.problems.add([...path, 'group_size'], `${why}: every php-cgi accepts on the shared socket already; use max_children instead of groups`);
  if (pool.authorizer !== undefined) ctx.problems.add([...path, 'authorizer'], `${why}: requests reach the workers without fcgi-pm, so no authorizer can be asked first`);
  if (pool.script !== undefined) ctx.problems.add([...path, 'script'], `${why}: the front end sets SCRIPT_FILENAME; fcgi-pm cannot set it on the direct path`);
  const guarded = (pool.limitExtensions?.length ?? 0) > 0 || (pool.scriptRoots?.length ?? 0) > 0;
  if (guarded && !phpCgi) {
    const key = present.has('script_roots') ? 'script_roots' : 'limit_extensions';
    ctx.problems.add([...path, key], `${why}: requests reach the workers without fcgi-pm, and only php-cgi can run the guard itself (auto_prepend_file); set ${key}: [] if this program checks its own scripts, or use accept: proxy`);
  }
  // PHP-FPM's listen.backlog: connections wait in the kernel's queue, in arrival order,
  // served straight from it; a backlog of max_children would send most of a burst
  // through the overflow (proxied, and after fresh connections: docs/direct.md).
  pool.directBacklog ??= DIRECT_BACKLOG_DEFAULT;
}

/** authorizer_cache needs an authorizer and a key to keep grants under. */
function checkAuthorizerCache(pool: PoolConfig, path: KeyPath, ctx: Ctx): void {
  const key = pool.authorizerCacheKey ?? [];
  key.forEach((entry, i) => {
    const part = parseCacheKeyPart(entry);
    if (typeof part === 'string') ctx.problems.add([...path, 'authorizer_cache_key', i], part);
  });
  if ((pool.authorizerCache ?? 0) === 0) return;
  if (pool.authorizer === undefined) ctx.problems.add([...path, 'authorizer_cache'], 'only applies with "authorizer" (the pool whose grants are kept)');
  else if (key.length === 0) ctx.problems.add([...path, 'authorizer_cache_key'], 'a cache needs a key: list the variables the authorizer decides on (e.g. [HTTP_AUTHORIZATION, REQUEST_URI/1]); with none, one grant would let every client in');
}

/**
 * `authorizer` names another pool that has none of its own: a chain would ask one
 * authorizer about another's requests, and a loop would never answer.
 */
function checkAuthorizers(pools: ReadonlyMap<string, PoolConfig>, ctx: Ctx): void {
  const names = [...pools.keys()];
  for (const pool of pools.values()) {
    const name = pool.authorizer;
    if (name === undefined) continue;
    const at: KeyPath = ['pools', pool.name, 'authorizer'];
    const target = pools.get(name);
    if (target === undefined) ctx.problems.add(at, noPoolNamed(name, names));
    else if (name === pool.name) ctx.problems.add(at, 'names this pool itself; the authorizer is another pool (e.g. one running auth.php with script:)');
    else if (target.authorizer !== undefined) ctx.problems.add(at, `pool "${name}" has an authorizer of its own ("${target.authorizer}"); an authorizer pool may not have one (no chains)`);
    // Its requests carry no SCRIPT_FILENAME: php-cgi would answer every one "No input file specified".
    else if (target.script === undefined && target.command !== undefined && runsPhpCgi(target.command)) {
      ctx.problems.add(at, `pool "${name}" runs php-cgi, which runs the file SCRIPT_FILENAME names, and authorizer requests carry none: give "${name}" a script (e.g. script: /srv/auth/auth.php)`);
    }
  }
}

/** Memory caps that contradict each other, or a pool limit no worker fits in. */
function checkMemoryKeys(pool: PoolConfig, path: KeyPath, present: ReadonlySet<string>, ctx: Ctx): void {
  const soft = pool.maxMemory ?? 0;
  const hard = pool.maxMemoryHard ?? 0;
  const limit = pool.memoryLimit ?? 0;
  const expected = pool.expectedWorkerMemory ?? 0;
  if (soft > 0 && hard > 0 && soft >= hard) {
    ctx.problems.add([...path, 'max_memory'], `must be less than max_memory_hard (${formatSize(hard)}), got ${formatSize(soft)}; the hard limit would always act first`);
  }
  if (limit > 0 && expected > limit) {
    const key = present.has('expected_worker_memory') ? 'expected_worker_memory' : 'memory_limit';
    ctx.problems.add([...path, key], `memory_limit (${formatSize(limit)}) is smaller than expected_worker_memory (${formatSize(expected)}): the pool could not start a worker`);
  }
}

/** The one message for a reference to a pool that is not there, with the likely one or the list. */
function noPoolNamed(name: string, poolNames: readonly string[]): string {
  return `no pool named "${name}"${didYouMean(name, poolNames) || ` (pools: ${poolNames.join(', ')})`}`;
}

/** authorizer_pool: a pool's name, on the one listener kind that gets authorizer requests. */
function checkAuthorizerPool(l: ListenerConfig, path: KeyPath, poolNames: readonly string[], ctx: Ctx): void {
  const name = l.authorizerPool!;
  if (l.protocol !== undefined && l.protocol !== 'fastcgi') {
    ctx.problems.add(path, "only applies to fastcgi listeners (SCGI and HTTP have no authorizer requests; a pool's `authorizer` works for any front end)");
  } else if (poolNames.length > 0 && !poolNames.includes(name)) {
    ctx.problems.add(path, noPoolNamed(name, poolNames));
  }
}

function buildListener(obj: unknown, i: number, poolNames: readonly string[], ctx: Ctx, vhosts: boolean): ListenerConfig | undefined {
  const path = ['listen', i];
  if (!isMapping(obj)) {
    ctx.problems.add(path, `must be a mapping such as { protocol: fastcgi, address: "127.0.0.1:9000", pool: php }, got ${show(obj)}`);
    return undefined;
  }
  const s = readSection(obj, LISTENER_KEYS, path, ctx, 'listener settings');
  const l = s.values as unknown as ListenerConfig;
  if (l.protocol !== undefined) {
    checkScope(s, LISTENER_KEYS, path, new Set(l.protocol === 'http' ? ['http'] : []), () => 'only applies to http listeners', ctx);
  }
  if (l.address !== undefined && l.address.kind !== 'unix') {
    for (const [key, value] of [['mode', l.mode], ['owner', l.owner], ['group', l.group]] as const) {
      if (value !== undefined) ctx.problems.add([...path, key], 'only applies to unix: socket addresses');
    }
  }
  if (l.allowedClients !== undefined && l.address?.kind === 'unix') {
    ctx.problems.add([...path, 'allowed_clients'], 'only applies to TCP addresses; on a Unix socket, owner, group and mode say who may connect');
  }
  if (l.vhosts === true && !vhosts) ctx.problems.add([...path, 'vhosts'], 'needs a "vhosts" section (where the sites are defined)');
  if (l.authorizerPool !== undefined) checkAuthorizerPool(l, [...path, 'authorizer_pool'], poolNames, ctx);
  if (l.pool === undefined) {
    if (l.vhosts === true) l.pool = '';
    else if (poolNames.length === 1) l.pool = poolNames[0]!;
    else if (poolNames.length > 1) ctx.problems.add(path, `"pool" is required when there are several pools (${poolNames.join(', ')})`);
  } else if (poolNames.length > 0 && !poolNames.includes(l.pool)) {
    ctx.problems.add([...path, 'pool'], noPoolNamed(l.pool, poolNames));
  }
  return l;
}

function isWildcard(host: string): boolean {
  return host === '0.0.0.0' || host === '::';
}

/** True when binding both would fail (or, for a backend, when it is our own listener). */
function sameSocket(a: SocketAddress, b: SocketAddress): boolean {
  if (a.kind === 'unix' || b.kind === 'unix') return a.kind === 'unix' && b.kind === 'unix' && a.path === b.path;
  if (a.port !== b.port || a.port === 0) return false;
  if (a.host === b.host || a.host === '::' || b.host === '::') return true;
  // 0.0.0.0 takes the port on every IPv4 address.
  return (isWildcard(a.host) && !b.host.includes(':')) || (isWildcard(b.host) && !a.host.includes(':'));
}

function checkAddresses(listeners: Array<ListenerConfig | undefined>, pools: Map<string, PoolConfig>, ctx: Ctx): void {
  listeners.forEach((l, i) => {
    if (!l?.address) return;
    for (let j = 0; j < i; j++) {
      const o = listeners[j];
      if (o?.address && sameSocket(l.address, o.address)) {
        const other = o.address.text === l.address.text ? '' : ` (${o.address.text})`;
        ctx.problems.add(['listen', i, 'address'], `${l.address.text} is already used by listen[${j}]${other}`);
        break;
      }
    }
  });
  for (const pool of pools.values()) {
    pool.backends.forEach((b, k) => {
      const i = listeners.findIndex((l) => l?.address !== undefined && sameSocket(l.address, b));
      if (i >= 0) ctx.problems.add(['pools', pool.name, 'backends', k], `${b.text} is fcgi-pm's own listener (listen[${i}]); requests would loop`);
    });
  }
}

/** The dashboard section: a TCP address, a way to log in, peers that can be read. */
function buildDashboard(s: Section, ctx: Ctx): DashboardConfig {
  const d = s.values as unknown as DashboardConfig;
  const at = (key: string): KeyPath => ['dashboard', key];
  if (d.address?.kind === 'unix') ctx.problems.add(at('address'), 'must be a TCP address such as "127.0.0.1:9910" (put nginx in front for TLS or a Unix socket)');
  if (d.token === undefined && d.users === undefined) ctx.problems.add(['dashboard'], 'needs "token" or "users": the dashboard can change pools, so it is never open to anyone');
  if (d.token !== undefined && d.token.length < 16) ctx.problems.add(at('token'), `must be at least 16 characters (e.g. from "openssl rand -hex 16"), got ${d.token.length}`);
  for (const [name, hash] of Object.entries(d.users ?? {})) {
    if (!PASSWORD_HASH.test(hash)) ctx.problems.add([...at('users'), name], 'must be a hash from "fcgi-pm dashboard --hash-password" (scrypt$N$r$p$salt$hash), not a password');
  }
  d.peers.forEach((p, i) => {
    if (/^https?:\/\//.test(p)) {
      if (d.peerToken === undefined) ctx.problems.add([...at('peers'), i], 'an http:// peer is read with peer_token; set it to the token of that dashboard');
    } else if (!p.startsWith('/') && !p.startsWith('unix:')) {
      ctx.problems.add([...at('peers'), i], `must be a control socket path ("/run/fcgi-pm/web.sock") or a dashboard URL ("http://10.0.0.2:9910"), got ${show(p)}`);
    }
  });
  d.peers = d.peers.map((p) => (p.startsWith('unix:') ? p.slice(5) : p));
  return d;
}

/**
 * Validates a config object in file form (snake_case keys) and returns the Config.
 * Throws ConfigError listing every problem.
 */
export function configFromObject(obj: unknown, source: string, opts: FromObjectOptions = {}): Config {
  const r = validateConfig(obj, source, opts);
  if (r.config === undefined) throw new ConfigError(r.problems.texts());
  return r.config;
}

/** A config's validation: every problem, and what validated even so. */
export interface ConfigValidation {
  /** The Config, when there is no problem. */
  config: Config | undefined;
  /**
   * The parts without problems of their own (pools and top-level sections; the rest left
   * out or at defaults; listeners at their indexes, a value that did not validate
   * undefined), so `check` can run the host checks on them in the same run: a schema
   * problem does not hide a missing cwd. Undefined when nothing is usable.
   */
  valid: Config | undefined;
  /** Every problem found, in file order; the host checks may add theirs. */
  problems: Problems;
  /**
   * Pools in `valid` whose keys had problems of their own: the keys, left at their
   * defaults there, for the host checks to pass over (a bad user: who the workers run as
   * is unknown, but their cwd and command are still checked).
   */
  brokenKeys?: ReadonlyMap<string, ReadonlySet<string>>;
}

export function validateConfig(obj: unknown, source: string, opts: FromObjectOptions = {}): ConfigValidation {
  const problems = new Problems(opts.label ?? source, opts.locate);
  const ctx: Ctx = { problems, baseDir: opts.baseDir ?? (nodePath.isAbsolute(source) ? nodePath.dirname(source) : process.cwd()), accounts: opts.accounts ?? SYSTEM_ACCOUNTS };
  if (!isMapping(obj)) {
    problems.add([], `the configuration must be a mapping with "listen" and "pools", got ${show(obj)}`);
    return { config: undefined, valid: undefined, problems };
  }
  /** Each part with whether it added no problem of its own. */
  const cleanly = <T>(build: () => T): { value: T; clean: boolean } => {
    const before = problems.count;
    const value = build();
    return { value, clean: problems.count === before };
  };
  const cleanPools = new Set<string>();
  /** Pools with problems in some keys only: rebuilt without those keys for the host checks. */
  const partPools = new Map<string, { obj: Record<string, unknown>; broken: Set<string> }>();

  const topNames = [...SECTION_KEYS, ...TOP_KEYS.map((k) => k.key)];
  for (const key of Object.keys(obj)) {
    // "x-" keys are free for YAML anchors (x-php: &php {...}) shared through "<<: *php".
    if (!topNames.includes(key) && !key.startsWith('x-')) problems.add([key], unknownKeyMessage(key, TOP_KEYS, SECTION_KEYS));
  }

  // A vhosts section, even one with problems of its own, stands in for pools.
  const hasVhosts = obj.vhosts !== undefined && obj.vhosts !== null;
  const vhosts = hasVhosts ? buildVhosts(obj.vhosts, ctx) : undefined;
  const pools = new Map<string, PoolConfig>();
  const poolsObj = obj.pools;
  if (poolsObj === undefined || poolsObj === null) {
    if (!hasVhosts) problems.add([], '"pools" is required: at least one pool of backends or workers (or "vhosts")');
  } else if (!isMapping(poolsObj)) problems.add(['pools'], `must be a mapping of pool names to settings, got ${show(poolsObj)}`);
  else if (Object.keys(poolsObj).length === 0 && !hasVhosts) problems.add(['pools'], 'must define at least one pool');
  else {
    for (const [name, p] of Object.entries(poolsObj)) {
      if (!POOL_NAME.test(name)) problems.add(['pools', name], 'pool names may use letters, digits, "_", "-" and "." (and start with a letter or digit)');
      if (!isMapping(p)) {
        problems.add(['pools', name], `must be a mapping with "backends" or "command", got ${show(p)}`);
        continue;
      }
      const before = problems.count;
      const built = cleanly(() => buildPool(name, p, ctx));
      pools.set(name, built.value);
      if (built.clean && POOL_NAME.test(name)) cleanPools.add(name);
      else if (POOL_NAME.test(name)) {
        const keys = problems.pathsSince(before).map((path) => path[2]);
        if (keys.every((k) => typeof k === 'string')) partPools.set(name, { obj: p, broken: new Set(keys as string[]) });
      }
    }
  }
  const poolNames = isMapping(poolsObj) ? Object.keys(poolsObj) : [];

  const listeners: Array<ListenerConfig | undefined> = [];
  const listenObj = obj.listen;
  if (listenObj === undefined || listenObj === null) problems.add([], '"listen" is required: at least one listener');
  else if (!Array.isArray(listenObj)) problems.add(['listen'], `must be a list of listeners, got ${show(listenObj)}`);
  else if (listenObj.length === 0) problems.add(['listen'], 'must list at least one listener');
  else {
    listenObj.forEach((l, i) => listeners.push(buildListener(l, i, poolNames, ctx, hasVhosts)));
  }

  const limits = readSection(obj.limits, LIMITS_KEYS, ['limits'], ctx, 'limits');
  const log = readSection(obj.log, LOG_KEYS, ['log'], ctx, 'log settings');
  const top = readSection(Object.fromEntries(TOP_KEYS.map((k) => [k.key, obj[k.key]])), TOP_KEYS, [], ctx, 'top level');

  const dashboard = obj.dashboard === undefined || obj.dashboard === null ? undefined : buildDashboard(readSection(obj.dashboard, DASHBOARD_KEYS, ['dashboard'], ctx, 'dashboard settings'), ctx);

  checkAddresses(listeners, pools, ctx);
  checkAuthorizers(pools, ctx);

  const config: Config = {
    source,
    listen: listeners as ListenerConfig[],
    pools,
    limits: limits.values as unknown as Config['limits'],
    log: log.values as unknown as Config['log'],
    shutdownTimeout: top.values.shutdownTimeout as number,
    shutdownDelay: top.values.shutdownDelay as number,
    runtimeDir: top.values.runtimeDir as string | undefined,
    opcacheDir: top.values.opcacheDir as string | false | undefined,
    memoryBudget: top.values.memoryBudget as MemoryBudgetSetting | undefined,
    memorySampleInterval: top.values.memorySampleInterval as number,
    maxChildrenTotal: top.values.maxChildrenTotal as number,
    daemonCpuWeight: top.values.daemonCpuWeight as number,
    daemonShortSlice: top.values.daemonShortSlice as boolean,
    oomScoreAdj: top.values.oomScoreAdj as number,
    controlSocket: top.values.controlSocket as string | false | undefined,
    controlSocketMode: top.values.controlSocketMode as number,
    pidFile: top.values.pidFile as string | false | undefined,
    upgrade: top.values.upgrade as 'exec' | 'spawn',
    vhosts,
    dashboard,
    origin: { label: opts.label ?? source, locate: opts.locate },
  };
  if (problems.count === 0) return { config, valid: config, problems };
  // A section with problems is left out (its values may be half read); its keys' own defaults stand in.
  const fallback = (section: Section, specs: readonly KeySpec[]): Record<string, unknown> =>
    section.ok ? section.values : Object.fromEntries(specs.map((k) => [k.field, defaultOf(k)]));
  const topValues = fallback(top, TOP_KEYS);
  const checked = new Map([...pools].filter(([name]) => cleanPools.has(name)));
  const brokenKeys = new Map<string, ReadonlySet<string>>();
  for (const [name, { obj: p, broken }] of partPools) {
    // The other keys as written, the broken ones at their defaults; problems of the rebuild were said already.
    const rest = Object.fromEntries(Object.entries(p).filter(([k]) => !broken.has(k)));
    const scratch: Ctx = { ...ctx, problems: new Problems(opts.label ?? source, undefined) };
    const pool = buildPool(name, rest, scratch);
    if (pool.command === undefined && pool.backends.length === 0) continue;
    checked.set(name, pool);
    brokenKeys.set(name, broken);
  }
  const valid: Config = {
    ...config,
    // At their indexes, so the host checks name the right line; a value that did not validate is undefined.
    listen: listeners.map((l) => l ?? ({} as ListenerConfig)),
    pools: checked,
    log: fallback(log, LOG_KEYS) as unknown as Config['log'],
    runtimeDir: topValues.runtimeDir as string | undefined,
    opcacheDir: topValues.opcacheDir as string | false | undefined,
    controlSocket: topValues.controlSocket as string | false | undefined,
    vhosts: undefined,
  };
  return { config: undefined, valid, problems, brokenKeys };
}

/** The vhosts section: exactly one source; `defaults` are checked as pool keys here, and again under each site. */
function buildVhosts(obj: unknown, ctx: Ctx): VhostsConfig | undefined {
  const path = ['vhosts'];
  const s = readSection(obj, VHOSTS_KEYS, path, ctx, 'where sites are defined');
  const v = s.values;
  const sources = ['dir', 'sqlite', 'postgres'].filter((k) => s.present.has(k));
  if (sources.length !== 1) {
    ctx.problems.add(path, sources.length === 0 ? 'needs "dir" (a directory of site files), "sqlite" (a database file) or "postgres" (a database URL)' : `has ${sources.join(' and ')}; sites come from one source`);
    return undefined;
  }
  if (sources[0] === 'dir' && s.present.has('table')) ctx.problems.add([...path, 'table'], 'only applies to a database source (sqlite, postgres)');
  // It is put into SQL text (and is the NOTIFY channel).
  if (typeof v.table === 'string' && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(v.table)) ctx.problems.add([...path, 'table'], `must be a plain SQL name (letters, digits, "_"), got ${show(v.table)}`);
  const defaults = (v.defaults ?? {}) as Record<string, unknown>;
  readSection(defaults, POOL_KEYS, [...path, 'defaults'], ctx, 'pool settings');
  if (!s.ok) return undefined;
  return {
    source: sources[0] === 'dir' ? { kind: 'dir', dir: v.dir as string } : sources[0] === 'sqlite' ? { kind: 'sqlite', file: v.sqlite as string, table: v.table as string } : { kind: 'postgres', url: v.postgres as string, table: v.table as string },
    idleTimeout: v.idleTimeout as number,
    pollInterval: v.pollInterval as number,
    defaultSite: v.defaultSite as string | undefined,
    siteMaxChildren: v.siteMaxChildren as number,
    defaults,
  };
}

/**
 * For src/config/site.ts: reads a site's keys and builds its pool with the same tables
 * and messages as the main config; problems go to `problems`.
 */
export function readSiteParts(obj: unknown, specs: readonly KeySpec[], problems: Problems, baseDir: string): { values: Record<string, unknown>; present: ReadonlySet<string>; pool(name: string, settings: Record<string, unknown>): PoolConfig } {
  const ctx: Ctx = { problems, baseDir, accounts: SYSTEM_ACCOUNTS };
  const s = readSection(obj, specs, [], ctx, 'site settings');
  return { values: s.values, present: s.present, pool: (name, settings) => buildPool(name, settings, ctx, ['pool']) };
}

/**
 * One validated PoolConfig from file-form settings, with every default applied: handy
 * for tests and tools that need a pool without a whole config. Throws ConfigError.
 */
export function poolConfigFromObject(name: string, obj: Record<string, unknown>, source = '<pool>', baseDir = process.cwd()): PoolConfig {
  const problems = new Problems(source, undefined);
  const pool = buildPool(name, obj, { problems, baseDir, accounts: SYSTEM_ACCOUNTS });
  if (problems.count > 0) throw new ConfigError(problems.texts());
  return pool;
}

/**
 * accept: direct where the native addon is missing: a FastCGI listener for the pool on its
 * own direct_listen, with the direct socket's mode and the pool's user and group, so the
 * front end's address still answers (at proxy speed). Whether it is needed is the host's
 * question (src/daemon/direct-fallback.ts).
 */
export function directFallbackListener(pool: PoolConfig): ListenerConfig {
  const ctx: Ctx = { problems: new Problems('<direct fallback>', undefined), baseDir: '/', accounts: SYSTEM_ACCOUNTS };
  const obj: Record<string, unknown> = { protocol: pool.backend === 'scgi' ? 'scgi' : 'fastcgi', address: pool.directListen!.text, pool: pool.name };
  if (pool.directListen!.kind === 'unix') {
    obj['mode'] = (pool.directSocketMode ?? 0o660).toString(8).padStart(4, '0');
    if (pool.user !== undefined) obj['owner'] = pool.user;
    if (pool.group !== undefined) obj['group'] = pool.group;
  }
  const l = buildListener(obj, 0, [pool.name], ctx, false)!;
  if (ctx.problems.texts().length > 0) throw new ConfigError(ctx.problems.texts());
  return l;
}
