/**
 * Samples the cluster: every sample_interval while at least one page is subscribed
 * (server-sent events), else every idle_sample_interval (a low rate, so a page opened
 * later has history; 0: no work at all while nobody watches). Each tick reads every
 * daemon, merges (merge.ts), adds one chart point per daemon and pool to its ring
 * (bounded: history / sample_interval points, whatever the rate), and hands the result
 * to the subscribers.
 */
import type { PoolStatus, StatusSnapshot } from '../control/types.js';
import { mergeCluster, type Cluster } from './merge.js';
import type { WarningEntry } from '../log/warning-ring.js';
import { readPeer, readWarnings, type ReadWhat } from './peers.js';
import { poolPoint, type PoolPoint } from './points.js';
import { SampleRing } from './ring.js';

export interface SamplerSource {
  /** Ids to read: 'self' (when there is a local daemon) then the peers. */
  ids(): string[];
  peerToken(): string | undefined;
  self?: ((what: ReadWhat) => Promise<StatusSnapshot>) | undefined;
  /** This process's warnings ring, shown as the 'self' daemon's. */
  warnings?: (() => WarningEntry[]) | undefined;
  history(): number;
  interval(): number;
  /** ms between samples while nobody watches; 0: none. */
  idleInterval(): number;
}

export interface Tick {
  cluster: Cluster;
  /** Ring key ("daemon id \0 pool") → the point this tick added. */
  points: Record<string, PoolPoint>;
  /** Every up daemon's recent warnings, newest first, at most MAX_WARNINGS. */
  warnings: ClusterWarning[];
}

export type ClusterWarning = WarningEntry & { daemon: string };

export const MAX_WARNINGS = 100;

export const ringKey = (daemon: string, pool: string): string => `${daemon}\u0000${pool}`;

export class ClusterSampler {
  private readonly rings = new Map<string, SampleRing<PoolPoint>>();
  private readonly prev = new Map<string, { t: number; pool: PoolStatus }>();
  private readonly subscribers = new Set<(t: Tick) => void>();
  private timer: NodeJS.Timeout | undefined;
  /** ms between samples now (0: not sampling). */
  rate = 0;
  private running: Promise<Tick> | undefined;
  latest: Tick | undefined;

  constructor(private readonly src: SamplerSource) {}

  /** The daemons shown: 'self' (when there is one) and the peers. */
  ids(): string[] {
    return this.src.ids();
  }

  get watching(): boolean {
    return this.subscribers.size > 0;
  }

  /** The low-rate sampling while nobody watches (call once the dashboard is open). */
  start(): void {
    this.pace();
  }

  /** The timer at the rate for who watches now. */
  private pace(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    const ms = this.subscribers.size > 0 ? this.src.interval() : this.src.idleInterval();
    this.rate = Math.max(0, ms);
    if (ms <= 0) return;
    this.timer = setInterval(() => void this.tick(), ms);
    this.timer.unref();
  }

  subscribe(fn: (t: Tick) => void): () => void {
    const first = this.subscribers.size === 0;
    this.subscribers.add(fn);
    // The page draws its first screen from the last sample (the idle rate's, when it is the
    // first page), not after a read of every daemon; the fresh read follows.
    if (this.latest !== undefined) fn(this.latest);
    if (first) {
      this.pace();
      void this.tick();
    }
    return () => {
      if (this.subscribers.delete(fn) && this.subscribers.size === 0) this.pace();
    };
  }

  history(): Record<string, PoolPoint[]> {
    return Object.fromEntries([...this.rings].map(([k, r]) => [k, r.toArray()]));
  }

  /** One pool's points (the page's details on demand). */
  pointsOf(daemon: string, pool: string): PoolPoint[] {
    return this.rings.get(ringKey(daemon, pool))?.toArray() ?? [];
  }

  /** Reads the cluster now (one read at a time: a slow peer does not pile up reads). */
  tick(): Promise<Tick> {
    this.running ??= this.read().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  /** The cluster without adding chart points (API calls while nobody watches). */
  async cluster(only?: string, what: ReadWhat = {}): Promise<Cluster> {
    const ids = only === undefined ? this.src.ids() : [only];
    const reads = await Promise.all(ids.map((id) => readPeer(id, this.src.peerToken(), this.src.self, what)));
    return mergeCluster(reads, Date.now());
  }

  private async read(): Promise<Tick> {
    const cluster = await this.cluster(undefined, { sample: true });
    const points: Record<string, PoolPoint> = {};
    const cap = Math.max(1, Math.ceil(this.src.history() / this.src.interval()));
    const live = new Set<string>();
    for (const d of cluster.daemons) {
      for (const p of d.snapshot?.pools ?? []) {
        const key = ringKey(d.id, p.name);
        live.add(key);
        const t = d.snapshot!.daemon.now;
        const pt = poolPoint(this.prev.get(key), t, p);
        this.prev.set(key, { t, pool: p });
        let ring = this.rings.get(key);
        if (ring === undefined || ring.capacity !== cap) {
          const old = ring?.toArray() ?? [];
          ring = new SampleRing<PoolPoint>(cap);
          for (const o of old) ring.push(o);
          this.rings.set(key, ring);
        }
        ring.push(pt);
        points[key] = pt;
      }
    }
    // Pools gone from a daemon that answered: their history goes too.
    const upIds = new Set(cluster.daemons.filter((d) => d.up).map((d) => d.id));
    for (const k of this.rings.keys()) {
      if (!live.has(k) && upIds.has(k.split('\u0000')[0]!)) {
        this.rings.delete(k);
        this.prev.delete(k);
      }
    }
    const lists = await Promise.all(cluster.daemons.filter((d) => d.up).map(async (d) => (await readWarnings(d.id, this.src.peerToken(), this.src.warnings)).map((w) => ({ ...w, daemon: d.id }))));
    const warnings = lists.flat().sort((x, y) => y.last - x.last).slice(0, MAX_WARNINGS);
    const tick = { cluster, points, warnings };
    this.latest = tick;
    for (const fn of this.subscribers) fn(tick);
    return tick;
  }

  stop(): void {
    clearInterval(this.timer);
    this.rate = 0;
    this.timer = undefined;
    this.subscribers.clear();
  }
}

