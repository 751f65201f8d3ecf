/**
 * What the memory governor measures and reports, and the small interface between the
 * host-wide governor (host-governor.ts) and each pool's share of it (src/pool/workers/memory.ts).
 *
 * Sizes are bytes. "value" is the figure caps and budgets use: PSS where the kernel
 * gives it (/proc/PID/smaps_rollup), else RSS, and every figure says which (`measure`).
 */

/** PSS splits shared pages among the processes mapping them; RSS counts them in each. */
export type Measure = 'pss' | 'rss';

export interface MemorySample {
  pid: number;
  /** Monotonic ms when it was read (the caller's clock). */
  at: number;
  rss: number;
  /** Undefined when smaps_rollup is not readable (old kernel, other user, not Linux). */
  pss: number | undefined;
  /** Anonymous memory (heap, stacks), when known. */
  anon: number | undefined;
  /** Percent of one CPU used since the previous sample of this pid (0 on the first). */
  cpu: number;
  /** pss when known, else rss. */
  value: number;
  measure: Measure;
}

/** Per worker, in WorkerSnapshot.memory. */
export interface WorkerMemoryFigures {
  pss: number | undefined;
  rss: number;
  anon: number | undefined;
  cpu: number;
  measure: Measure;
  /** Largest value seen over the worker's life. */
  peak: number;
  /** Epoch ms of the sample. */
  sampledAt: number;
}

/** Per pool, in PoolSnapshot.memory. */
export interface PoolMemoryFigures {
  /** 'pss' when every sampled worker gave PSS. */
  measure: Measure;
  /** Sum of the latest samples of live workers. */
  total: number;
  /** What the governor counts against limits: each live worker at max(sample, estimate). */
  committed: number;
  /** memory_limit, undefined when off. */
  limit: number | undefined;
  /** Expected size of a new worker (p90 of recent worker peaks, or expected_worker_memory). */
  estimate: number;
  estimateSource: 'measured' | 'configured';
  maxMemory: number | undefined;
  maxMemoryHard: number | undefined;
  sampleInterval: number;
  /** max_children that fits the limit / budget at the measured size. */
  recommendedMaxChildren: number | undefined;
  /** Spawns refused for memory (pool limit or host budget), recycles, hard kills, evictions of this pool's workers. */
  refusedSpawns: number;
  recycled: number;
  killed: number;
  evicted: number;
  /** Requests of this pool wait for the host budget. */
  waitingForBudget: boolean;
}

/** The daemon's own memory. */
export interface SelfMemoryFigures {
  pss: number | undefined;
  rss: number;
  anon: number | undefined;
  measure: Measure;
  value: number;
}

/** Daemon-level view of the budget, for status pages. */
export interface BudgetSnapshot {
  /** Bytes; undefined when no memory_budget is set (figures are still reported). */
  budget: number | undefined;
  /** As configured: "512MiB", "50%", "auto", or "off". */
  setting: string;
  /** How `budget` was derived, e.g. "75% of MemAvailable (1.2GiB) at start". */
  derivation: string | undefined;
  measure: Measure;
  sampler: 'proc' | 'pidusage';
  sampleInterval: number;
  daemon: SelfMemoryFigures;
  /** Daemon plus every pool's measured total. */
  used: number;
  /** Daemon plus every pool's committed memory: what spawns are checked against. */
  committed: number;
  /** budget - committed (may be negative), undefined without a budget. */
  available: number | undefined;
  pools: Array<{ name: string; total: number; committed: number; estimate: number; workers: number; waiting: boolean; recommendedMaxChildren: number | undefined }>;
  refusedSpawns: number;
  evictions: number;
  /** Times measured use went over the budget and workers were retired to get back under it. */
  overBudget: number;
  memTotal: number | undefined;
  memAvailableAtStart: number | undefined;
  /** The memory cgroup limit fcgi-pm runs under: where it is set, the limit, the headroom kept, what the kernel cannot reclaim now. */
  cgroup?: { dir: string; limit: number; headroom: number; used: number | undefined } | undefined;
}

/** Monotonic time and one-shot timers; src/pool/clock.ts's Clock has this shape. */
export interface MemoryClock {
  now(): number;
  setTimer(fn: () => void, ms: number): unknown;
  clearTimer(handle: unknown): void;
}

/** A live worker as the governor sees it, for eviction and relief. */
export interface WorkerRef {
  pool: string;
  /** The pool's worker id. */
  id: number;
  pid: number | undefined;
  /** Counted against the budget: max(latest sample, estimate). */
  charge: number;
  /** Latest sample, if any. */
  value: number | undefined;
  /** Monotonic ms it went idle (idle workers) or started its request (busy ones). */
  since: number;
  /** The preload parent of a pool with no worker: under pressure it is given back before any worker. */
  parent?: true;
}

/** One pool's part in the host budget; src/pool/workers/memory.ts implements it. */
export interface BudgetMember {
  readonly name: string;
  /** Sum of charges of live workers (unsampled ones at the estimate). */
  committed(): number;
  /** Sum of latest samples of live workers. */
  measured(): number;
  /** Charge of workers already retiring: memory on its way back. */
  freeing(): number;
  /** Latest samples of retiring workers. */
  freeingMeasured(): number;
  estimate(): number;
  workerCount(): number;
  /** Of those, workers retiring: alive until they exit. */
  leavingCount(): number;
  /** Memory the pool keeps even when idle (static: max_children, dynamic: min_spare workers at the estimate). */
  floor(): number;
  idleWorkers(): WorkerRef[];
  busyWorkers(): WorkerRef[];
  /** Retire (idle: stop now; busy: after its request) to give memory back; logs one line with `fields`. */
  evict(w: WorkerRef, reason: 'memory_budget' | 'host_share', fields: Record<string, unknown>, msg: string): void;
  /** Memory may have come free: try the spawns that waited. */
  retry(): void;
  /** Requests wait in this pool's queue. */
  hasDemand(): boolean;
  /** It has a memory cgroup of its own: the cgroup watch runs for it too. */
  hasCgroup(): boolean;
  /**
   * A tick of the cgroup watch: on fast ticks busy workers are measured now (a request's
   * peak falls between two sampling rounds); idle ones are retired when the pool's own
   * cgroup is inside its headroom. True when that cgroup is above `share` of its limit.
   */
  watchTick(share: number, measureBusy: boolean): boolean;
  figures(): PoolMemoryFigures;
}
