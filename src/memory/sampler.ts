/**
 * Samples the memory and CPU of worker processes and of the daemon itself.
 *
 * Linux ('proc'): reads /proc directly, spawning nothing. pidusage's
 * Linux mode also reads /proc/PID/stat, but it runs `getconf CLK_TCK` and `getconf
 * PAGESIZE` through a shell on its first call, switches to spawning `ps` on every call
 * when PIDUSAGE_USE_PS=true is in the environment, keeps one descriptor per pid open for
 * a minute after the process is gone (pidusage.clear() drops them without closing), and
 * gives no PSS. Per worker and sample: one pread of /proc/PID/stat (CPU, RSS: counters,
 * a few µs, read in place); PSS from /proc/PID/smaps_rollup is re-read only when RSS
 * moved by more than 1 MiB or 5 % since the last PSS read, or every PSS_REFRESH_SAMPLES
 * samples of a process that mapped pages since (a page fault: /proc/PID/stat counts
 * them; PSS also drifts when other processes start or stop sharing pages), every
 * PSS_QUIET_REFRESH_SAMPLES of one that did not (an idle worker of an idle site: only
 * that drift moves it); in between it is carried forward with the RSS change. Its RSS
 * high-water mark (/proc/PID/status) is read again only after a fault too. So a round
 * over 200 idle workers costs 200 stat reads and a few rollups, not 40 rollups and 200
 * status reads. A forced read (`fresh`) always reads it. A round's rollups (`read`) go
 * through the libuv threadpool, so the page-table walk behind smaps_rollup (~0.4 ms for a
 * php-cgi worker, ~1 ms for a Node one) never stalls the event loop; `readNow` is for one
 * worker right after its request.
 *
 * Elsewhere ('pidusage'): one batched pidusage call per round (one `ps` for all pids on
 * macOS/BSD), RSS only, and no synchronous reads, so no re-check right after a request.
 */
import { CLK_TCK, pageSize, ProcHandle, readHwm, type RollupFields, type StatFields } from './proc.js';
import type { MemorySample, Measure } from './types.js';

export interface MemorySampler {
  readonly kind: 'proc' | 'pidusage';
  /** readNow works (Linux): caps can be re-checked right after a request. */
  readonly sync: boolean;
  /** What this sampler gives where it can: pss on Linux with smaps_rollup, else rss. */
  readonly measure: Measure;
  /** One process, now; `fresh` forces a PSS read. undefined when gone or not readable synchronously. */
  readNow(pid: number, now: number, fresh?: boolean): MemorySample | undefined;
  /** Many processes; resolves with those that could be read. */
  read(pids: readonly number[], now: number): Promise<Map<number, MemorySample>>;
  /**
   * A round's read of one process without waiting, where the sampler can: its sample when
   * its counters are all that is due, LATER when its PSS is due (read() it then, off the
   * event loop), undefined when it is gone.
   */
  readCounters?(pid: number, now: number): MemorySample | typeof LATER | undefined;
  /** Rounds may use readNow instead of read (samplers whose reads cost nothing: tests). */
  readonly syncRounds?: boolean;
  /** The daemon itself, now. */
  self(now: number): MemorySample;
  selfAsync(now: number): Promise<MemorySample>;
  /** The kernel's high-water mark of its RSS (VmHWM), where the sampler can read it. */
  hwm?(pid: number): number | undefined;
  /** The process exited: drop its state (and descriptors). */
  forget(pid: number): void;
  close(): void;
}

/** readCounters: this process's PSS is due; read() it. */
export const LATER = 'later';

export const PSS_REFRESH_SAMPLES = 5;
/** Samples between PSS reads of a process that has mapped no page since the last one. */
export const PSS_QUIET_REFRESH_SAMPLES = 30;
const PSS_REREAD_BYTES = 1024 * 1024;
const PSS_REREAD_SHARE = 0.05;
const MS_PER_TICK = 1000 / CLK_TCK;

interface Tracked {
  handle: ProcHandle;
  lastTicks: number;
  lastAt: number | undefined;
  pss: number | undefined;
  anon: number | undefined;
  /** RSS when pss was read. */
  rssAtPss: number;
  /** Page faults at the last sample, and when pss and hwm were read: unchanged, no page was mapped in since. */
  lastFaults: number;
  faultsAtPss: number;
  hwm: number | undefined;
  faultsAtHwm: number;
  samplesSincePss: number;
  /** The asynchronous read in flight. */
  pending: Promise<MemorySample | undefined> | undefined;
}

export class ProcSampler implements MemorySampler {
  readonly kind = 'proc' as const;
  readonly sync = true;
  readonly measure: Measure;
  private readonly tracked = new Map<number, Tracked>();
  private readonly page = pageSize();
  /** Rollup reads done, for the bench and tests. */
  rollupReads = 0;
  statReads = 0;

  constructor() {
    const me = new ProcHandle(process.pid);
    this.measure = me.hasRollup ? 'pss' : 'rss';
    me.close();
  }

  /** VmHWM, read again only when the process faulted a page in since the last read (a tracked process: after its sample). */
  hwm(pid: number): number | undefined {
    const t = this.tracked.get(pid);
    if (t === undefined) return readHwm(pid);
    if (t.hwm === undefined || t.faultsAtHwm !== t.lastFaults) {
      t.hwm = readHwm(pid);
      t.faultsAtHwm = t.lastFaults;
    }
    return t.hwm;
  }

  readNow(pid: number, now: number, fresh = false): MemorySample | undefined {
    const t = this.track(pid);
    const st = this.counters(t, pid);
    if (st === undefined) return undefined;
    let rss = st.rssPages * this.page;
    if (t.handle.hasRollup && this.rollupDue(t, rss, st.faults, fresh)) {
      this.rollupReads++;
      const r = t.handle.readRollup();
      if (r !== undefined) rss = this.rolledUp(t, r, st.faults);
    }
    return this.sample(t, pid, now, st, rss);
  }

  readCounters(pid: number, now: number): MemorySample | typeof LATER | undefined {
    const t = this.track(pid);
    if (t.pending !== undefined) return LATER; // a read in flight: the round shares it
    const st = this.counters(t, pid);
    if (st === undefined) return undefined;
    const rss = st.rssPages * this.page;
    // A due rollup is left for read(), which reads the counters again with it: a sample's
    // RSS and PSS come from the same moment.
    if (t.handle.hasRollup && this.rollupDue(t, rss, st.faults, false)) return LATER;
    return this.sample(t, pid, now, st, rss);
  }

  read(pids: readonly number[], now: number): Promise<Map<number, MemorySample>> {
    return Promise.all(pids.map((pid) => this.readAsync(pid, now))).then((samples) => {
      const out = new Map<number, MemorySample>();
      for (const s of samples) if (s !== undefined) out.set(s.pid, s);
      return out;
    });
  }

  self(now: number): MemorySample {
    return this.readNow(process.pid, now) ?? nodeSelf(now);
  }

  async selfAsync(now: number): Promise<MemorySample> {
    return (await this.readAsync(process.pid, now)) ?? nodeSelf(now);
  }

  private readAsync(pid: number, now: number): Promise<MemorySample | undefined> {
    const t = this.track(pid);
    // One read at a time per process: a round that finds one in flight shares it.
    t.pending ??= this.readTracked(t, pid, now).finally(() => (t.pending = undefined));
    return t.pending;
  }

  private async readTracked(t: Tracked, pid: number, now: number): Promise<MemorySample | undefined> {
    // In place: counters, no page-table walk (a trip through the threadpool would cost more).
    const st = this.counters(t, pid);
    if (st === undefined) return undefined;
    let rss = st.rssPages * this.page;
    if (t.handle.hasRollup && this.rollupDue(t, rss, st.faults, false)) {
      this.rollupReads++;
      const r = await t.handle.readRollupAsync();
      if (r !== undefined) rss = this.rolledUp(t, r, st.faults);
    }
    return this.sample(t, pid, now, st, rss);
  }

  /** /proc/PID/stat, read in place; undefined once the process is gone (then forgotten). */
  private counters(t: Tracked, pid: number): StatFields | undefined {
    this.statReads++;
    const st = t.handle.readStat();
    if (st === undefined && this.tracked.get(pid) === t) this.forget(pid);
    return st;
  }

  private track(pid: number): Tracked {
    let t = this.tracked.get(pid);
    if (t === undefined) {
      t = { handle: new ProcHandle(pid), lastTicks: 0, lastAt: undefined, pss: undefined, anon: undefined, rssAtPss: 0, lastFaults: -1, faultsAtPss: -1, hwm: undefined, faultsAtHwm: -1, samplesSincePss: 0, pending: undefined };
      this.tracked.set(pid, t);
    }
    return t;
  }

  private rollupDue(t: Tracked, rss: number, faults: number, fresh: boolean): boolean {
    const moved = Math.abs(rss - t.rssAtPss);
    const every = faults === t.faultsAtPss ? PSS_QUIET_REFRESH_SAMPLES : PSS_REFRESH_SAMPLES;
    if (fresh || t.pss === undefined || t.samplesSincePss >= every - 1 || (moved > PSS_REREAD_BYTES && moved > t.rssAtPss * PSS_REREAD_SHARE)) return true;
    t.samplesSincePss++;
    return false;
  }

  /**
   * Keeps a rollup's PSS with the RSS of the same read, and returns that RSS as the
   * sample's: the stat read came first, and a request may have allocated in between. A
   * PSS from after an allocation beside an RSS from before it would read the allocation
   * twice over (PSS above RSS, and carried forward so until the next rollup).
   */
  private rolledUp(t: Tracked, r: RollupFields, faults: number): number {
    t.pss = r.pss;
    t.anon = r.anon;
    t.rssAtPss = r.rss;
    t.faultsAtPss = faults;
    t.samplesSincePss = 0;
    return r.rss;
  }

  private sample(t: Tracked, pid: number, now: number, st: StatFields, rss: number): MemorySample {
    const cpu = t.lastAt !== undefined && now > t.lastAt ? (((st.cpuTicks - t.lastTicks) * MS_PER_TICK) / (now - t.lastAt)) * 100 : 0;
    t.lastTicks = st.cpuTicks;
    t.lastFaults = st.faults;
    t.lastAt = now;
    const pss = t.pss !== undefined && t.handle.hasRollup ? Math.max(0, t.pss + (rss - t.rssAtPss)) : undefined;
    const anon = t.anon !== undefined ? Math.max(0, t.anon + (rss - t.rssAtPss)) : undefined;
    return { pid, at: now, rss, pss, anon, cpu, value: pss ?? rss, measure: pss !== undefined ? 'pss' : 'rss' };
  }

  forget(pid: number): void {
    const t = this.tracked.get(pid);
    if (t === undefined) return;
    t.handle.close();
    this.tracked.delete(pid);
  }

  close(): void {
    for (const pid of [...this.tracked.keys()]) this.forget(pid);
  }
}

type Pidusage = (pids: number[]) => Promise<Record<string, { memory: number; cpu: number } | undefined>>;

export class PidusageSampler implements MemorySampler {
  readonly kind = 'pidusage' as const;
  readonly sync = false;
  readonly measure = 'rss' as const;
  private lib: Promise<{ stat: Pidusage; clear: () => void }> | undefined;

  readNow(): MemorySample | undefined {
    return undefined;
  }

  async read(pids: readonly number[], now: number): Promise<Map<number, MemorySample>> {
    const out = new Map<number, MemorySample>();
    if (pids.length === 0) return out;
    const lib = await this.load();
    let stats: Awaited<ReturnType<Pidusage>>;
    try {
      stats = await lib.stat([...pids]);
    } catch {
      // ps exits 1 when one of the pids is gone: read them one by one.
      stats = {};
      for (const pid of pids) {
        try {
          Object.assign(stats, await lib.stat([pid]));
        } catch {
          /* gone */
        }
      }
    }
    for (const pid of pids) {
      const s = stats[String(pid)];
      if (s === undefined || s === null) continue;
      out.set(pid, { pid, at: now, rss: s.memory, pss: undefined, anon: undefined, cpu: s.cpu, value: s.memory, measure: 'rss' });
    }
    return out;
  }

  self(now: number): MemorySample {
    return nodeSelf(now);
  }

  selfAsync(now: number): Promise<MemorySample> {
    return Promise.resolve(nodeSelf(now));
  }

  forget(): void {}

  close(): void {
    void this.lib?.then((l) => l.clear());
  }

  private load(): Promise<{ stat: Pidusage; clear: () => void }> {
    this.lib ??= import('pidusage').then((m) => {
      const p = m.default;
      return { stat: (pids: number[]) => p(pids) as ReturnType<Pidusage>, clear: () => p.clear() };
    });
    return this.lib;
  }
}

function nodeSelf(now: number): MemorySample {
  const rss = process.memoryUsage.rss();
  return { pid: process.pid, at: now, rss, pss: undefined, anon: undefined, cpu: 0, value: rss, measure: 'rss' };
}

/** /proc where it works (Linux), else pidusage. */
export function createSampler(): MemorySampler {
  if (process.platform === 'linux') {
    const me = new ProcHandle(process.pid);
    const readable = me.readStat() !== undefined;
    me.close();
    if (readable) return new ProcSampler();
  }
  return new PidusageSampler();
}
