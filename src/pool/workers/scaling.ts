/**
 * The scaling policy of a spawned pool, as pure functions of counts and time: how many
 * workers to start and which idle ones to stop. No timers, no I/O; the pool asks again
 * at the `recheckAt` time a plan returns.
 *
 * Modes as PHP-FPM operators know them:
 *   static   — max_children always running; a worker that exits is replaced.
 *   dynamic  — start_children at start; between min_spare and max_spare idle workers,
 *              never more than max_children; spawning is rate limited per one-second
 *              round, the rate doubling each consecutive round of need up to max_spawn_rate
 *              (fpm_process_ctl.c's idle_spawn_rate).
 *   ondemand — no worker until a request waits; one spawn per waiting request that no
 *              starting worker will take, up to max_children.
 */
import type { PmMode } from '../../config/types.js';

export interface ScalingConfig {
  pm: PmMode;
  maxChildren: number;
  startChildren: number;
  minSpare: number;
  maxSpare: number;
  maxSpawnRate: number;
  idleTimeout: number;
}

export interface WorkerCounts {
  idle: number;
  busy: number;
  spawning: number;
  /** Retired workers still alive (draining their request or stopping): they hold a process slot. */
  retiring: number;
  /** Requests waiting in the queue. */
  queued: number;
}

/** Dynamic mode's rate limiter state; carry it from one plan to the next. */
export interface SpawnRound {
  /** Spawns allowed in this round; 0 = no round yet. */
  rate: number;
  spawned: number;
  /** Monotonic ms when the round ends. */
  endsAt: number;
}

export const NO_ROUND: SpawnRound = { rate: 0, spawned: 0, endsAt: -Infinity };
export const ROUND_MS = 1000;
/** A dynamic-mode idle worker above max_spare is stopped after this long idle (FPM checks once a second). */
export const SURPLUS_IDLE_MS = 1000;

export interface SpawnPlan {
  spawn: number;
  round: SpawnRound;
  /** Ask again at this time (a spawn round ends while demand remains). */
  recheckAt: number | undefined;
  /** Workers were wanted but max_children (counting live processes) forbids them. */
  atMaxChildren: boolean;
}

/** Workers to spawn when the pool starts. */
export function initialWorkers(cfg: ScalingConfig): number {
  switch (cfg.pm) {
    case 'static':
      return Math.max(0, cfg.maxChildren);
    case 'dynamic':
      return clamp(cfg.startChildren, 0, cfg.maxChildren);
    case 'ondemand':
      return 0;
  }
}

/** Workers the mode wants started now, before the max_children and rate limits. */
export function workersWanted(cfg: ScalingConfig, c: WorkerCounts): number {
  switch (cfg.pm) {
    case 'static':
      return cfg.maxChildren - (c.idle + c.busy + c.spawning + c.retiring);
    case 'dynamic':
      // Enough to take every waiting request and still leave min_spare idle.
      return cfg.minSpare + c.queued - c.idle - c.spawning;
    case 'ondemand':
      // Each starting worker will take one waiting request.
      return c.queued - c.idle - c.spawning;
  }
}

export function planSpawns(cfg: ScalingConfig, c: WorkerCounts, now: number, round: SpawnRound): SpawnPlan {
  const want = Math.max(0, workersWanted(cfg, c));
  const room = Math.max(0, cfg.maxChildren - (c.idle + c.busy + c.spawning + c.retiring));
  const atMaxChildren = want > room;
  let spawn = Math.min(want, room);
  if (spawn === 0 || cfg.pm !== 'dynamic') return { spawn, round, recheckAt: undefined, atMaxChildren };

  const maxRate = Math.max(1, cfg.maxSpawnRate);
  let r = round;
  if (now >= r.endsAt) {
    // A new round: the rate doubles when need lasted through the previous one.
    const consecutive = r.rate > 0 && now < r.endsAt + ROUND_MS;
    const rate = consecutive ? Math.min(r.rate * 2, maxRate) : 1;
    r = { rate, spawned: 0, endsAt: now + ROUND_MS };
  }
  spawn = Math.max(0, Math.min(spawn, Math.min(r.rate, maxRate) - r.spawned));
  if (spawn > 0) r = { rate: r.rate, spawned: r.spawned + spawn, endsAt: r.endsAt };
  const unmet = Math.min(want, room) - spawn;
  return { spawn, round: r, recheckAt: unmet > 0 ? r.endsAt : undefined, atMaxChildren };
}

export interface IdleStopPlan {
  /** Stop this many of the longest-idle workers (a prefix of the oldest-first list). */
  stop: number;
  /** When the next idle worker becomes due, if any. */
  recheckAt: number | undefined;
}

/**
 * Which idle workers to stop. `idleSince` lists the idle workers' idle-start times,
 * longest idle first (the bottom of the LIFO idle stack). Never below min_spare
 * (dynamic) or max_children (static); busy workers are not in the list at all.
 */
export function planIdleStops(cfg: ScalingConfig, idleSince: readonly number[], now: number): IdleStopPlan {
  const n = idleSince.length;
  let floor: number;
  switch (cfg.pm) {
    case 'static':
      return { stop: 0, recheckAt: undefined };
    case 'dynamic':
      floor = Math.max(0, cfg.minSpare);
      break;
    case 'ondemand':
      floor = 0;
      break;
  }
  const candidates = n - floor;
  if (candidates <= 0) return { stop: 0, recheckAt: undefined };
  // Dynamic: the oldest (idle - max_spare) are surplus and go after SURPLUS_IDLE_MS.
  const surplus = cfg.pm === 'dynamic' ? Math.max(0, n - Math.max(cfg.maxSpare, floor)) : 0;
  // idle_timeout 0 = never, like the other 0-means-off durations.
  const idleTimeout = cfg.idleTimeout > 0 ? cfg.idleTimeout : Infinity;
  const surplusAfter = Math.min(SURPLUS_IDLE_MS, idleTimeout);
  let stop = 0;
  for (; stop < candidates; stop++) {
    const after = stop < surplus ? surplusAfter : idleTimeout;
    const due = idleSince[stop]! + after;
    if (due > now) return { stop, recheckAt: due === Infinity ? undefined : due };
  }
  return { stop, recheckAt: undefined };
}

function clamp(v: number, lo: number, hi: number): number {
  return v < lo ? lo : v > hi ? hi : v;
}

/** What the measured scale-down rule (planMeasuredStops) reads. */
export interface MeasuredLoad {
  /** Workers up and wanted (not retiring or stopping). */
  live: number;
  /** Of those, the ones idle now (blocked in accept()). */
  idle: number;
  /**
   * The most work seen at once over the last idle_timeout: workers busy or that used CPU
   * within a sample, plus connections waiting in the accept queue.
   */
  peak: number;
  /** The samples cover a whole idle_timeout (not just after the pool started). */
  covered: boolean;
}

/**
 * Scale-down from measured concurrency, for pools whose workers accept on one socket
 * themselves. The kernel wakes workers blocked in accept() first-in first-out, so a
 * trickle visits every worker in turn and none is ever idle for idle_timeout by itself
 * (PHP-FPM's ondemand has that flaw: php-src bug #77959). The rule instead: keep as many
 * workers as the most work seen at once within the last idle_timeout (plus min_spare,
 * dynamic), and stop idle workers beyond that. After a burst, the burst leaves the window
 * idle_timeout later and the pool shrinks to what the load since needs; an idle pool
 * (peak 0) goes down to its floor after idle_timeout, as per-worker idle time would.
 * Returns how many idle workers to stop now.
 */
export function planMeasuredStops(cfg: ScalingConfig, load: MeasuredLoad): number {
  if (cfg.pm === 'static' || !(cfg.idleTimeout > 0) || !load.covered) return 0;
  const spare = cfg.pm === 'dynamic' ? Math.max(0, cfg.minSpare) : 0;
  const keep = Math.ceil(load.peak) + spare;
  return Math.max(0, Math.min(load.idle, load.live - keep));
}
