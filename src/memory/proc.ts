/**
 * Linux /proc readers for one process: /proc/PID/stat (CPU ticks and resident pages,
 * about 4 µs a read) and /proc/PID/smaps_rollup (PSS; the kernel walks the page tables,
 * so a read costs roughly 10 µs per MiB resident). The parsers are pure; ProcHandle keeps
 * both files open and re-reads them with pread at offset 0, which makes the kernel
 * regenerate them: two syscalls per read instead of four, and a handle opened on one
 * process can never report on a later process that got the same pid (reads fail with
 * ESRCH once it exited).
 */
import fs from 'node:fs';

/** USER_HZ: the unit of utime/stime in /proc/PID/stat; 100 on every Linux architecture Node runs on. */
export const CLK_TCK = 100;

export interface StatFields {
  /** utime + stime, in ticks. */
  cpuTicks: number;
  /** Resident pages. */
  rssPages: number;
  /** Page faults (minor + major) since it started: unchanged, no page was mapped in since, so its RSS and its high-water mark cannot have grown. */
  faults: number;
}

/**
 * Parses /proc/PID/stat from its bytes; undefined when it is not one. comm may hold spaces
 * and ')'. Read in place, without a string: rounds read every worker's, and splitting the
 * line made 52 strings each time.
 */
export function parseStat(bytes: Uint8Array, length = bytes.length): StatFields | undefined {
  let close = length - 1;
  while (close >= 0 && bytes[close] !== 0x29) close--;
  if (close < 0) return undefined;
  // Fields after "pid (comm) ": state is [0]; minflt [7], majflt [9], utime [11], stime [12], rss [21].
  let field = 0;
  // -1: no digit yet; -2: not a count.
  let value = -1;
  let minflt = -1;
  let majflt = -1;
  let utime = -1;
  let stime = -1;
  let rss = -1;
  for (let i = close + 2; i <= length && field <= 21; i++) {
    const c = i < length ? bytes[i]! : 0x20;
    if (c === 0x20 || c === 0x0a) {
      if (field === 7) minflt = value;
      else if (field === 9) majflt = value;
      else if (field === 11) utime = value;
      else if (field === 12) stime = value;
      else if (field === 21) rss = value;
      field++;
      value = -1;
    } else if (c >= 0x30 && c <= 0x39) {
      if (value !== -2) value = (value < 0 ? 0 : value * 10) + (c - 0x30);
    } else value = -2;
  }
  if (utime < 0 || stime < 0 || rss < 0 || minflt < 0 || majflt < 0) return undefined;
  return { cpuTicks: utime + stime, rssPages: rss, faults: minflt + majflt };
}

export interface RollupFields {
  rss: number;
  pss: number;
  /** Anonymous pages (private and shared). */
  anon: number | undefined;
  pssAnon: number | undefined;
  pssFile: number | undefined;
  swap: number | undefined;
}

/** Parses /proc/PID/smaps_rollup ("Pss:   1234 kB" lines) into bytes; undefined without Rss/Pss. */
export function parseSmapsRollup(text: string): RollupFields | undefined {
  const kb = kbFields(text);
  const rss = kb.get('Rss');
  const pss = kb.get('Pss');
  if (rss === undefined || pss === undefined) return undefined;
  return { rss, pss, anon: kb.get('Anonymous'), pssAnon: kb.get('Pss_Anon'), pssFile: kb.get('Pss_File'), swap: kb.get('Swap') };
}

export interface StatusFields {
  vmRss: number | undefined;
  rssAnon: number | undefined;
  rssFile: number | undefined;
  rssShmem: number | undefined;
  vmSize: number | undefined;
  /** The kernel's high-water mark of VmRSS over the process's life. */
  vmHwm: number | undefined;
}

/** Parses /proc/PID/status ("VmRSS:	1234 kB") into bytes. */
export function parseStatus(text: string): StatusFields {
  const kb = kbFields(text);
  return { vmRss: kb.get('VmRSS'), rssAnon: kb.get('RssAnon'), rssFile: kb.get('RssFile'), rssShmem: kb.get('RssShmem'), vmSize: kb.get('VmSize'), vmHwm: kb.get('VmHWM') };
}

/** VmHWM of `pid` (/proc/PID/status, ~10 µs); undefined when gone or not Linux. */
export function readHwm(pid: number): number | undefined {
  try {
    return parseStatus(fs.readFileSync(`/proc/${pid}/status`, 'latin1')).vmHwm;
  } catch {
    return undefined;
  }
}

/** "Name:   123 kB" lines as bytes. */
export function kbFields(text: string): Map<string, number> {
  const out = new Map<string, number>();
  const re = /^([A-Za-z_()]+):\s+(\d+) kB$/gm;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) out.set(m[1]!, Number(m[2]) * 1024);
  return out;
}

/** Bytes per page, from the first KernelPageSize line of /proc/self/smaps; 4096 if that cannot be read. */
export function pageSize(): number {
  if (pageSizeCache !== undefined) return pageSizeCache;
  pageSizeCache = 4096;
  let fd: number | undefined;
  try {
    fd = fs.openSync('/proc/self/smaps', 'r');
    const buf = Buffer.alloc(4096);
    const n = fs.readSync(fd, buf, 0, buf.length, 0);
    const m = /KernelPageSize:\s+(\d+) kB/.exec(buf.toString('latin1', 0, n));
    if (m) pageSizeCache = Number(m[1]) * 1024;
  } catch {
    // not Linux, or no smaps: keep the common size
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
  return pageSizeCache;
}
let pageSizeCache: number | undefined;

/** One buffer for every synchronous read: the event loop reads one file at a time. 8 KiB holds any of these files. */
const syncBuf = Buffer.alloc(8192);

function preadText(fd: number): string {
  const n = fs.readSync(fd, syncBuf, 0, syncBuf.length, 0);
  return syncBuf.toString('latin1', 0, n);
}

/**
 * /proc/PID/stat and smaps_rollup of one process, kept open while it is sampled.
 * Reads are synchronous (one worker, right after its request) or asynchronous (rounds:
 * smaps_rollup costs ~0.4 ms for a php-cgi worker, kept off the event loop). A
 * descriptor is never closed while an asynchronous read on it is in flight: its number
 * could be reused by a new socket before the read runs.
 */
export class ProcHandle {
  readonly pid: number;
  private statFd: number | undefined;
  /** undefined: not tried yet; -1: not readable (other user, old kernel). */
  private rollupFd: number | undefined;
  private closed = false;
  private inflight = 0;

  constructor(pid: number) {
    this.pid = pid;
  }

  /** Whether PSS can be read for this process (opens smaps_rollup on first use). */
  get hasRollup(): boolean {
    if (this.rollupFd === undefined) this.rollupFd = this.closed ? -1 : (openQuiet(`/proc/${this.pid}/smaps_rollup`) ?? -1);
    return this.rollupFd >= 0;
  }

  /** undefined once the process is gone (the handle is then closed). */
  readStat(): StatFields | undefined {
    if (this.closed) return undefined;
    try {
      this.statFd ??= fs.openSync(`/proc/${this.pid}/stat`, 'r');
      const s = parseStat(syncBuf, fs.readSync(this.statFd, syncBuf, 0, syncBuf.length, 0));
      if (s === undefined) this.close();
      return s;
    } catch {
      this.close();
      return undefined;
    }
  }

  readRollup(): RollupFields | undefined {
    for (let again = true; !this.closed && this.hasRollup; again = false) {
      try {
        return parseSmapsRollup(preadText(this.rollupFd!));
      } catch (e) {
        if (!(again && this.reopenAfter((e as NodeJS.ErrnoException).code))) break;
      }
    }
    this.dropRollup();
    return undefined;
  }

  async readRollupAsync(): Promise<RollupFields | undefined> {
    for (let again = true; !this.closed && this.hasRollup; again = false) {
      const got = await this.preadAsync(this.rollupFd!);
      if (typeof got === 'string') return parseSmapsRollup(got);
      if (!(again && this.reopenAfter(got.code))) break;
    }
    this.dropRollup();
    return undefined;
  }

  /**
   * smaps_rollup's descriptor holds the address space the process had when it was opened.
   * A worker is first setpriv (or prlimit, or a shell) that exec()s the program: a
   * descriptor opened before that exec reads ESRCH from then on, though the process lives.
   * One fresh open answers for the new image; a process that is gone (or a zombie) fails
   * again and is dropped. EACCES (the ptrace check at read time) stops at once.
   */
  private reopenAfter(code: string | undefined): boolean {
    if (code !== 'ESRCH' || this.closed) return false;
    this.dropRollup();
    this.rollupFd = openQuiet(`/proc/${this.pid}/smaps_rollup`) ?? -1;
    return this.rollupFd >= 0;
  }

  close(): void {
    this.closed = true;
    if (this.inflight > 0) return; // the last read in flight closes them
    this.closeFds();
  }

  private preadAsync(fd: number): Promise<string | NodeJS.ErrnoException> {
    this.inflight++;
    // A buffer per read, not per handle: PSS is read rarely, and 200 idle workers' handles held 800 KiB.
    const buf = Buffer.allocUnsafe(4096);
    return new Promise((resolve) => {
      fs.read(fd, buf, 0, buf.length, 0, (err, n) => {
        const got = err ?? buf.toString('latin1', 0, n);
        if (--this.inflight === 0 && this.closed) this.closeFds();
        resolve(got);
      });
    });
  }

  private dropRollup(): void {
    const fd = this.rollupFd;
    this.rollupFd = -1;
    if (fd !== undefined && fd >= 0 && this.inflight === 0) closeQuiet(fd);
    else if (fd !== undefined && fd >= 0) this.lateClose.push(fd);
  }

  private readonly lateClose: number[] = [];

  private closeFds(): void {
    if (this.statFd !== undefined) closeQuiet(this.statFd);
    this.statFd = undefined;
    if (this.rollupFd !== undefined && this.rollupFd >= 0) closeQuiet(this.rollupFd);
    this.rollupFd = -1;
    for (const fd of this.lateClose.splice(0)) closeQuiet(fd);
  }
}

function openQuiet(path: string): number | undefined {
  try {
    return fs.openSync(path, 'r');
  } catch {
    return undefined;
  }
}

function closeQuiet(fd: number): void {
  try {
    fs.closeSync(fd);
  } catch {
    /* already closed */
  }
}

/** /proc/self/status of this process: RssAnon/RssFile for the daemon's own figures. */
export function readSelfStatus(): StatusFields | undefined {
  try {
    return parseStatus(fs.readFileSync('/proc/self/status', 'latin1'));
  } catch {
    return undefined;
  }
}
