/**
 * vhosts.dir: one NAME.yaml (.yml, .json) per site. Watched with fs.watch, and checked
 * every poll_interval as a safety net (watch events can be lost, and some file systems
 * have none). A rescan stats every file and parses only those whose size, mtime or inode
 * changed. Without a watch every poll is a rescan; while the watch is up a poll stats the
 * directory and a tenth of the files in turn, and rescans only when one of them changed:
 * a thousand stats every two seconds was most of an idle daemon's CPU.
 */
import { readdirSync, readFileSync, statSync, watch, type FSWatcher, type Stats } from 'node:fs';
import * as nodePath from 'node:path';
import { siteFromText } from '../../config/site.js';
import { ConfigError } from '../../errors.js';
import type { SiteBase, SiteConfig } from '../../config/types.js';
import type { SiteSource, SourceRead } from './source.js';

const SITE_FILE = /^([^.].*)\.(ya?ml|json)$/;
const YIELD_EVERY = 100;
/** While watched, every file is stat'ed once in this many polls. */
export const WATCHED_POLL_SPREAD = 10;

/** A file's kind, inode, size and mtime: when all are the same, it was not changed. */
interface Stamp {
  file: boolean;
  ino: number;
  size: number;
  mtimeMs: number;
}

interface Cached {
  stamp: Stamp;
  site: SiteConfig | undefined;
  problems: string[];
}

export class DirSource implements SiteSource {
  readonly label: string;
  private readonly cache = new Map<string, Cached>();
  /** Files parsed so far (read() yields every YIELD_EVERY of them). */
  private parsing = 0;
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  private debounce: NodeJS.Timeout | undefined;
  /** The directory's stamp before the last rescan's readdir, and the site files it found. */
  private dirStamp: Stamp | undefined;
  private files: string[] = [];
  /** Each of `files` joined to the directory once, not at every poll. */
  private paths: string[] = [];
  private cursor = 0;

  constructor(
    private readonly dir: string,
    private readonly base: SiteBase,
    private readonly pollMs: number,
  ) {
    this.label = `vhosts.dir ${dir}`;
  }

  async read(): Promise<SourceRead> {
    const out: SourceRead = { sites: [], broken: [] };
    const seen = new Set<string>();
    let parsed = 0;
    const dirStat = statQuiet(this.dir);
    this.dirStamp = dirStat === undefined ? undefined : stampOf(dirStat);
    const files: string[] = [];
    for (const file of readdirSync(this.dir).sort()) {
      // Parsing is garbage; a turn of the event loop now and then lets it die young
      // instead of growing the old space (RssAnon) for good, and lets requests in.
      if (this.parsing > 0 && this.parsing % YIELD_EVERY === 0 && this.parsing !== parsed) {
        parsed = this.parsing;
        await new Promise((r) => setImmediate(r));
      }
      const m = SITE_FILE.exec(file);
      if (m === null) continue;
      const id = m[1]!;
      if (seen.has(id)) {
        out.broken.push({ id, problems: [`${nodePath.join(this.dir, file)}: site ${id} is defined by another file too; this one is left out`] });
        continue;
      }
      seen.add(id);
      const entry = this.entry(file, id);
      if (entry === undefined) continue; // gone between readdir and stat
      files.push(file);
      if (entry.site !== undefined) out.sites.push(entry.site);
      else out.broken.push({ id, problems: entry.problems });
    }
    for (const file of this.cache.keys()) if (!seen.has(SITE_FILE.exec(file)?.[1] ?? '')) this.cache.delete(file);
    this.files = files;
    this.paths = files.map((f) => nodePath.join(this.dir, f));
    return out;
  }

  /**
   * Whether a rescan may find something new, from the directory's stamp and the next
   * tenth of the files' (each file's in WATCHED_POLL_SPREAD calls): the watch's safety net.
   */
  changedSinceRead(): boolean {
    if (!sameStamp(statQuiet(this.dir), this.dirStamp)) return true;
    const n = this.files.length;
    for (let left = Math.ceil(n / WATCHED_POLL_SPREAD); left > 0; left--) {
      this.cursor = (this.cursor + 1) % n;
      if (!sameStamp(statQuiet(this.paths[this.cursor]!), this.cache.get(this.files[this.cursor]!)?.stamp)) return true;
    }
    return false;
  }

  private entry(file: string, id: string): Cached | undefined {
    const path = nodePath.join(this.dir, file);
    const st = statQuiet(path);
    if (st === undefined) return undefined;
    const hit = this.cache.get(file);
    if (hit !== undefined && sameStamp(st, hit.stamp)) return hit;
    const stamp = stampOf(st);
    if (!stamp.file) {
      const c = { stamp, site: undefined, problems: [`${path}: not a regular file`] };
      this.cache.set(file, c);
      return c;
    }
    let c: Cached;
    this.parsing++;
    try {
      c = { stamp, site: siteFromText(id, readFileSync(path, 'utf8'), this.base, path, this.dir), problems: [] };
    } catch (err) {
      c = { stamp, site: undefined, problems: err instanceof ConfigError ? err.problems : [`${path}: ${(err as Error).message}`] };
    }
    this.cache.set(file, c);
    return c;
  }

  get baseDir(): string {
    return this.dir;
  }

  fileOf(id: string): string | undefined {
    for (const ext of ['yaml', 'yml', 'json']) {
      const path = nodePath.join(this.dir, `${id}.${ext}`);
      try {
        if (statSync(path).isFile()) return path;
      } catch {
        // not this one
      }
    }
    return undefined;
  }

  watch(changed: () => void): void {
    const soon = (): void => {
      // An editor's save is several events; one read after they settle.
      if (this.debounce !== undefined) return;
      this.debounce = setTimeout(() => {
        this.debounce = undefined;
        changed();
      }, 50);
    };
    try {
      this.watcher = watch(this.dir, { persistent: false }, soon);
      this.watcher.on('error', () => {
        this.watcher?.close();
        this.watcher = undefined;
      });
    } catch {
      // no watch here (a missing directory, inotify limits): the rescan still runs
    }
    this.timer = setInterval(() => {
      if (this.watcher === undefined || this.changedSinceRead()) changed();
    }, this.pollMs);
    this.timer.unref();
  }

  close(): void {
    this.watcher?.close();
    clearInterval(this.timer);
    clearTimeout(this.debounce);
  }
}

/** undefined when it is gone (or cannot be stat'ed). */
function statQuiet(path: string): Stats | undefined {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
}

function stampOf(st: Stats): Stamp {
  return { file: st.isFile(), ino: st.ino, size: st.size, mtimeMs: st.mtimeMs };
}

/** Compared in place: a poll makes no stamp of its own. */
function sameStamp(st: Stats | undefined, stamp: Stamp | undefined): boolean {
  return st !== undefined && stamp !== undefined && st.isFile() === stamp.file && st.ino === stamp.ino && st.size === stamp.size && st.mtimeMs === stamp.mtimeMs;
}
