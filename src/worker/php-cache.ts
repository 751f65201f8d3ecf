/**
 * A php-cgi pool's opcache file cache (opcache.file_cache): compiled scripts outlive the
 * worker that compiled them, so a new worker (after scale to zero, a recycle, a reload)
 * loads them instead of compiling the application again. One directory per pool, owned
 * by the pool's user, mode 0700: one site's compiled code must not be readable by another
 * user, nor may another user plant code that this pool would load.
 *
 * opcache still checks timestamps against the source (opcache.validate_timestamps, from
 * the ini as usual), and its file cache lives in a subdirectory per PHP build.
 */
import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync, type Stats } from 'node:fs';
import * as nodePath from 'node:path';
import { accessAs, type Credentials } from './identity.js';

/** Under the daemon's private runtime directory when no cache root is configured. */
export const RUNTIME_CACHE_SUBDIR = 'opcache';

const OWN_SETTING = /^\s*opcache\.(file_cache|file_cache_only|enable)\s*=/;

/** The command sets opcache's file cache, or turns opcache on or off, itself (-d): it is left alone. */
export function setsOwnOpcache(argv: readonly string[]): boolean {
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i]!;
    const setting = a === '-d' ? argv[i + 1] : a.startsWith('-d') ? a.slice(2) : undefined;
    if (setting !== undefined && OWN_SETTING.test(setting)) return true;
  }
  return false;
}

/** The command with the file cache set (-d beats php.ini, so it goes right after the program). */
export function withFileCache(argv: readonly string[], dir: string): string[] {
  return [argv[0]!, '-d', `opcache.file_cache=${dir}`, ...argv.slice(1)];
}

export type PoolCacheDir = { ok: true; dir: string } | { ok: false; dir: string; message: string };

export interface CacheOwner {
  /** Who the workers run as (src/worker/identity.ts). */
  runsAs: Credentials;
  /** The ids to chown to; undefined when fcgi-pm is not root (it then owns what it makes). */
  uid: number | undefined;
  gid: number | undefined;
}

/**
 * Makes <root>/<pool> a 0700 directory owned by the workers' user. One found with another
 * owner, other mode bits, or that is not a plain directory is removed first and made
 * anew: a cache is only ever reused by the user that wrote it. The root is made 0711, so
 * each user reaches its own directory without listing the others.
 */
export function preparePoolCacheDir(root: string, pool: string, owner: CacheOwner): PoolCacheDir {
  const dir = nodePath.join(root, pool);
  try {
    const made = mkdirSync(root, { recursive: true, mode: 0o711 });
    // The mode given to mkdir passes through the umask; 0711 is what lets users in.
    if (made !== undefined) for (let d = root; d.length >= made.length; d = nodePath.dirname(d)) chmodSync(d, 0o711);
    const st = lstatOrUndefined(dir);
    if (st !== undefined && (!st.isDirectory() || st.uid !== owner.runsAs.uid || (st.mode & 0o7777) !== 0o700)) {
      rmSync(dir, { recursive: true, force: true });
    }
    if (st === undefined || lstatOrUndefined(dir) === undefined) {
      mkdirSync(dir, { mode: 0o700 });
      if (owner.uid !== undefined || owner.gid !== undefined) chownSync(dir, owner.uid ?? -1, owner.gid ?? -1);
    }
  } catch (err) {
    return { ok: false, dir, message: `cannot make ${dir}: ${(err as NodeJS.ErrnoException).code ?? String(err)}` };
  }
  const why = accessAs(dir, owner.runsAs, 'write');
  if (why !== undefined) return { ok: false, dir, message: `the workers' user (uid ${owner.runsAs.uid}) ${why}` };
  return { ok: true, dir };
}

function lstatOrUndefined(p: string): Stats | undefined {
  try {
    return lstatSync(p);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** In each default cache root (/var/cache/fcgi-pm/<name>-<hash>): the config file it is for. */
const CONFIG_MARK = '.config';

/**
 * A root daemon's cache roots are named after config files (src/config/opcache-path.ts),
 * so every config ever run as root would leave one. Each root records its config file;
 * at start the daemon marks its own and removes the roots whose config file is gone
 * (as the runtime directories of dead daemons are swept). Roots without a mark (made
 * before marks) are left alone. Returns the roots removed.
 */
export function sweepCacheRoots(parent: string, own: { root: string; source: string }): string[] {
  try {
    mkdirSync(own.root, { recursive: true, mode: 0o711 });
    writeFileSync(nodePath.join(own.root, CONFIG_MARK), `${own.source}\n`, { mode: 0o644 });
  } catch {
    return []; // the pools say why their caches cannot be made
  }
  const swept: string[] = [];
  let names: string[];
  try {
    names = readdirSync(parent);
  } catch {
    return swept;
  }
  for (const name of names) {
    const root = nodePath.join(parent, name);
    if (root === own.root) continue;
    let source: string;
    try {
      source = readFileSync(nodePath.join(root, CONFIG_MARK), 'utf8').trim();
    } catch {
      continue;
    }
    if (source === '' || !nodePath.isAbsolute(source) || existsSync(source)) continue;
    rmSync(root, { recursive: true, force: true });
    swept.push(root);
  }
  return swept;
}
