/**
 * Applying a new config to a running daemon without failing a request.
 *
 *  1. plan: which pools are added, removed, changed or unchanged (deep-equal configs;
 *     a preload pool counts as changed, so a reload picks up new application code);
 *     which listeners are added, removed, kept (same address and protocol), and of the
 *     kept ones which take their new settings in place (pool, name, status paths,
 *     status_allow: read per request; allowed_clients: read per connection) and which
 *     must be reopened (anything else).
 *     A pool whose only changes are scaling keys (pool/retune.ts: how many workers, when
 *     they start and stop) is retuned instead: it keeps its workers and takes the new
 *     keys at the commit, as a changed listener's in-place settings do.
 *  2. start new and changed pools (static pools wait for their workers); a changed pool's
 *     new generation first starts as many workers as the old one has ready, a few at a
 *     time (uWSGI's chain reload), so the swap never leaves the pool narrower than it was;
 *  3. bind added listeners. A failure in 2 or 3 undoes them: the old config keeps running.
 *  4. commit, synchronously: the pool registry (which listeners read per request) points to
 *     the new pools; retuned pools and kept listeners get their new settings; so no request
 *     sees a gap.
 *  5. old generations drain in the background: a replaced pool stops (retire reason
 *     'reload') after its queued and running requests finished with its own workers;
 *     a removed listener stops accepting and closes once its connections are idle; a
 *     removed pool keeps serving those closing connections (getPool falls back to it),
 *     and stops when they are gone.
 *  6. reopen listeners that must: close, then bind again at the same address (a brief
 *     gap where connects are refused; avoid by changing those settings at a quiet time,
 *     or by adding a listener next to it).
 */
import { createHash } from 'node:crypto';
import type { Config, ListenerConfig, PoolConfig } from '../config/types.js';
import type { FrontendContext, Listener } from '../frontend/index.js';
import type { Logger } from '../log/log.js';
import type { PoolRegistry } from './pool-registry.js';
import { availableParallelism } from 'node:os';
import type { Pool, WarmStart } from '../pool/types.js';
import { ErrorCodes } from '../errors.js';
import { keysRetuned, retunesInPlace } from '../pool/retune.js';
import { canHandOver, HandoverPool, type HandoverEnd } from '../pool/handover.js';
import { systemClock } from '../util/clock.js';
import { stable } from '../util/stable-json.js';

export { stable };

/** A reload's hand-over (pool/handover.ts) ends after this long without a request, */
const HANDOVER_QUIET_MS = 1000;
/** and after this long at most. */
const HANDOVER_MAX_MS = 10_000;
const HANDOVER_WHY: Record<HandoverEnd, string> = {
  warm: 'each new worker has served',
  quiet: 'no request for a second',
  max: `${HANDOVER_MAX_MS / 1000} s at most`,
  stop: 'the pool was stopped',
  replaced: 'a newer reload replaced it',
  upgrade: 'an upgrade',
  action: 'a drain or restart of the pool',
};

export interface ReloadReport {
  pools: { added: string[]; removed: string[]; changed: string[]; retuned: string[]; unchanged: string[] };
  listeners: { added: string[]; removed: string[]; reopened: string[]; updated: string[]; unchanged: string[] };
  /** Settings that changed but take a restart, and similar notes. */
  notes: string[];
}

/** Listener settings read per request, so a running listener takes them in place. */
export const IN_PLACE_LISTENER_FIELDS = ['pool', 'authorizerPool', 'name', 'statusPath', 'pingPath', 'readyPath', 'pingResponse', 'statusAllow', 'allowedClients'] as const;

type InPlace = (typeof IN_PLACE_LISTENER_FIELDS)[number];

export function samePool(a: PoolConfig, b: PoolConfig): boolean {
  return stable(a) === stable(b);
}

/** A pool's settings as a short digest: what an exec in place compares to adopt the workers of an unchanged pool. */
export function poolFingerprint(p: PoolConfig): string {
  return createHash('sha256').update(stable(p)).digest('base64url').slice(0, 22);
}

function withoutInPlace(l: ListenerConfig): Record<string, unknown> {
  const o: Record<string, unknown> = { ...l, address: l.address.text };
  for (const k of IN_PLACE_LISTENER_FIELDS) delete o[k];
  return o;
}

function inPlaceOf(l: ListenerConfig): Pick<ListenerConfig, InPlace> {
  const o: Partial<Pick<ListenerConfig, InPlace>> = {};
  for (const k of IN_PLACE_LISTENER_FIELDS) (o as Record<string, unknown>)[k] = l[k];
  return o as Pick<ListenerConfig, InPlace>;
}

export interface ListenerPlan {
  added: ListenerConfig[];
  removed: Listener[];
  /** Same address and settings except those applied in place. */
  updated: Array<{ listener: Listener; next: ListenerConfig }>;
  unchanged: Array<{ listener: Listener; next: ListenerConfig }>;
  reopened: Array<{ listener: Listener; next: ListenerConfig }>;
}

export interface ReloadPlan {
  /** retuned: changed only in scaling keys, and the running pool takes them in place (Pool.retune). */
  pools: { added: PoolConfig[]; removed: string[]; changed: PoolConfig[]; retuned: PoolConfig[]; unchanged: string[] };
  listeners: ListenerPlan;
}

/**
 * What a reload from `cur` to `next` does; pure. Listeners are matched by configured address.
 * Pools named in `restart` count as changed even when their settings are the same (a
 * restart of their workers through the same graceful swap). `retunable`: whether the
 * running pool takes `next` with its workers (Pool.retune; default: none does).
 */
export function planReload(cur: Config, next: Config, running: readonly Listener[], restart: ReadonlySet<string> = new Set(), retunable: (next: PoolConfig) => boolean = () => false): ReloadPlan {
  const pools: ReloadPlan['pools'] = { added: [], removed: [], changed: [], retuned: [], unchanged: [] };
  for (const [name, p] of next.pools) {
    const old = cur.pools.get(name);
    if (old === undefined) pools.added.push(p);
    // A preload pool is renewed even when unchanged: its new parent imports the code as
    // it is now, and the old parent's workers drain.
    else if (p.preload === true || restart.has(name)) pools.changed.push(p);
    else if (samePool(old, p)) pools.unchanged.push(name);
    else if (retunesInPlace(old, p) && retunable(p)) pools.retuned.push(p);
    else pools.changed.push(p);
  }
  for (const name of cur.pools.keys()) if (!next.pools.has(name)) pools.removed.push(name);

  const listeners: ListenerPlan = { added: [], removed: [], updated: [], unchanged: [], reopened: [] };
  const kept = new Set<Listener>();
  for (const n of next.listen) {
    // Same address, the same protocol first (port 0 may be configured several times).
    const same = running.filter((r) => !kept.has(r) && r.config.address.text === n.address.text);
    const l = same.find((r) => r.config.protocol === n.protocol) ?? same[0];
    if (l === undefined) {
      listeners.added.push(n);
      continue;
    }
    kept.add(l);
    if (stable(withoutInPlace(l.config)) !== stable(withoutInPlace(n))) listeners.reopened.push({ listener: l, next: n });
    else if (stable(inPlaceOf(l.config)) !== stable(inPlaceOf(n))) listeners.updated.push({ listener: l, next: n });
    else listeners.unchanged.push({ listener: l, next: n });
  }
  for (const l of running) if (!kept.has(l)) listeners.removed.push(l);
  return { pools, listeners };
}

export interface ReloadTarget {
  /** The running config. */
  current: Config;
  /** The pools listeners read per request (ctx.getPool); changed in place. */
  pools: PoolRegistry;
  /** The daemon's listener list; changed in place. */
  listeners: Listener[];
  ctx: FrontendContext;
  logger: Logger;
  makePool(cfg: PoolConfig): Pool;
  startListener(cfg: ListenerConfig, ctx: FrontendContext): Promise<Listener>;
  /** Addresses taken over from systemd: they cannot be reopened (systemd holds the address). */
  inherited: ReadonlySet<string>;
  /** Called with each listener removed or replaced, so the daemon can await them on stop. */
  closing(p: Promise<void>): void;
  /** Pools to replace even if unchanged (the control socket's restart). */
  restart?: ReadonlySet<string> | undefined;
}

/** The seats a pool has ready (idle or busy workers, a group's each). */
export function readySeats(pool: Pool): number {
  let seats = 0;
  for (const w of pool.snapshot().workers) if (w.state === 'idle' || w.state === 'busy') seats += w.slots ?? 1;
  return seats;
}

/**
 * Whether a pool is serving: it runs a request, or one of its workers served within the
 * hand-over's quiet time. Under load a commit may find every worker between two requests
 * of its client: the next ones come at once, and a warm worker serves them better than a
 * new one's first request.
 */
function servingLately(pool: Pool): boolean {
  const s = pool.snapshot();
  const now = Date.now();
  return s.active > 0 || s.workers.some((w) => (w.state === 'idle' || w.state === 'busy') && now - w.lastUsedAt < HANDOVER_QUIET_MS);
}

/** A start that brings `seats` up before the first request; undefined for none. */
export function warmStartOf(seats: number): WarmStart | undefined {
  // A step per core: the replacements' start-up shares the cores with the requests the old ones serve.
  return seats > 0 ? { seats, step: Math.max(1, Math.floor(availableParallelism() / 2)) } : undefined;
}

/** What the generation a pool replaces has ready; undefined for a new pool. */
export function warmStart(old: Pool | undefined): WarmStart | undefined {
  return old === undefined ? undefined : warmStartOf(readySeats(old));
}

/**
 * A changed pool's new generation: as wide as the old one has ready, and, while the old one
 * serves (it will hand over), paced by first requests (WarmStart.afterServed): under load a
 * generation's cold workers then load the application a step at a time beside the old
 * workers' requests, and one that a newer reload replaces has not started workers in vain.
 */
export function reloadStart(cur: Pool | undefined): WarmStart | undefined {
  // During a hand-over, as wide as its old generation (the one that serves), not its new one still starting.
  const from = cur instanceof HandoverPool ? cur.prev : cur;
  const w = warmStart(from);
  return w !== undefined && from !== undefined && servingLately(from) && from.warmth?.() !== undefined ? { ...w, afterServed: true } : w;
}

function name(l: Listener | ListenerConfig): string {
  const cfg = 'config' in l ? l.config : l;
  return `${cfg.protocol} ${cfg.address.text}`;
}

/** Applies `next`; on failure before the commit nothing changed and the error is thrown. */
export async function applyReload(t: ReloadTarget, next: Config): Promise<ReloadReport> {
  // A pool that takes the change in place says so now, and takes it at the commit.
  const retunes = new Map<string, () => void>();
  const plan = planReload(t.current, next, t.listeners, t.restart, (p) => {
    const commit = t.pools.pools.get(p.name)?.retune?.(p);
    if (commit !== undefined) retunes.set(p.name, commit);
    return commit !== undefined;
  });
  const log = t.logger;
  const notes: string[] = [];
  const drainMs = next.shutdownTimeout;

  // 2. New pools.
  const fresh = new Map<string, Pool>();
  const undoPools = async (): Promise<void> => {
    await Promise.allSettled([...fresh.values()].map((p) => p.stop(0, 'reload')));
  };
  try {
    for (const p of [...plan.pools.added, ...plan.pools.changed]) {
      const pool = t.makePool(p);
      fresh.set(p.name, pool);
    }
    await Promise.all([...fresh.values()].map((p) => p.start(reloadStart(t.pools.get(p.name)))));
  } catch (err) {
    await undoPools();
    throw err;
  }

  // 3. New listeners.
  const opened: Listener[] = [];
  try {
    for (const l of plan.listeners.added) opened.push(await t.startListener(l, t.ctx));
  } catch (err) {
    await Promise.allSettled(opened.map((l) => l.close(0)));
    await undoPools();
    throw err;
  }

  // 4. Commit. A changed pool whose old generation is serving hands over from it
  // (pool/handover.ts): the new workers' first requests do not all come at once.
  for (const pool of fresh.values()) {
    const cur = t.pools.pools.get(pool.name);
    // Two generations serve at most: a hand-over still running is replaced, and the newest
    // hands over from its old generation, the warm one (its new one has not warmed yet).
    const from = cur instanceof HandoverPool ? cur.prev : cur;
    if (from !== undefined && plan.pools.changed.some((p) => p.name === pool.name) && servingLately(from) && canHandOver(from, pool)) {
      const cores = availableParallelism();
      const chain: HandoverPool = new HandoverPool(pool, from, {
        clock: systemClock,
        firstAtOnce: Math.max(1, Math.floor(cores / 2)),
        quietMs: HANDOVER_QUIET_MS,
        maxMs: HANDOVER_MAX_MS,
        ...(cur instanceof HandoverPool ? { since: cur.since } : {}),
        ended: (why, ms) => {
          t.pools.swap(chain, pool);
          log.info({ kind: 'reload', pool: pool.name, handoverMs: ms, why }, `pool ${pool.name}: the new generation serves alone after a hand-over of ${ms} ms (${HANDOVER_WHY[why]}); the old one drains`);
        },
      });
      // Ends the replaced hand-over; the registry then holds its new generation, which drains now.
      if (cur instanceof HandoverPool) cur.passPrevTo(chain);
      t.pools.put(chain, (o) => (o === from ? chain.released.then(() => o.stop(drainMs, 'reload')) : o.stop(drainMs, 'reload')));
    } else {
      if (cur instanceof HandoverPool) cur.end('replaced');
      t.pools.put(pool, (o) => o.stop(drainMs, 'reload'));
    }
  }
  for (const p of plan.pools.retuned) {
    retunes.get(p.name)!();
    const keys = keysRetuned(t.current.pools.get(p.name)!, p);
    log.info({ kind: 'reload', pool: p.name, retuned: keys }, `pool ${p.name}: ${keys.join(', ')} changed in place; its workers serve on`);
  }
  for (const { listener, next: n } of plan.listeners.updated) Object.assign(listener.config, inPlaceOf(n));
  t.listeners.push(...opened);
  const removedListeners = plan.listeners.removed;
  for (const l of removedListeners) t.listeners.splice(t.listeners.indexOf(l), 1);

  // 5. Drain what left.
  const closed = removedListeners.map((l) => {
    const p = l.close(drainMs).catch((err: unknown) => log.error({ code: ErrorCodes.STOP_FAILED, err, listener: l.address }, 'closing a removed listener failed'));
    t.closing(p);
    return p;
  });
  const listenersGone = Promise.all(closed);
  for (const poolName of plan.pools.removed) {
    // Until the removed listeners are closed, their connections may still send requests here.
    t.pools.retire(poolName, (old) => listenersGone.then(() => old.stop(drainMs, 'reload')));
  }

  // 6. Reopen.
  const reopened: string[] = [];
  for (const { listener, next: n } of plan.listeners.reopened) {
    if (t.inherited.has(listener.config.address.text)) {
      Object.assign(listener.config, inPlaceOf(n));
      notes.push(`listener ${name(listener)} came from systemd (socket activation): only pool, status and name settings change without a restart`);
      continue;
    }
    const closing = listener.close(drainMs);
    t.closing(closing);
    t.listeners.splice(t.listeners.indexOf(listener), 1);
    try {
      t.listeners.push(await t.startListener(n, t.ctx));
      reopened.push(name(n));
    } catch (err) {
      log.error({ code: ErrorCodes.LISTEN_FAILED, err, listener: n.address.text }, 'reopening a listener with its new settings failed; trying the old ones');
      notes.push(`listener ${name(n)} could not be reopened: ${(err as Error).message}`);
      try {
        t.listeners.push(await t.startListener(listener.config, t.ctx));
      } catch (err2) {
        log.error({ code: ErrorCodes.LISTEN_FAILED, err: err2, listener: n.address.text }, 'the listener is closed');
      }
    }
  }

  if (next.runtimeDir !== t.current.runtimeDir) notes.push('runtime_dir changed: that takes a restart');
  if (next.opcacheDir !== t.current.opcacheDir) notes.push('opcache_dir changed: pools started after this reload use it; running ones keep their cache until they are replaced');

  return {
    pools: {
      added: plan.pools.added.map((p) => p.name),
      removed: plan.pools.removed,
      changed: plan.pools.changed.map((p) => p.name),
      retuned: plan.pools.retuned.map((p) => p.name),
      unchanged: plan.pools.unchanged,
    },
    listeners: {
      added: opened.map(name),
      removed: removedListeners.map(name),
      reopened,
      updated: plan.listeners.updated.map((u) => name(u.listener)),
      unchanged: plan.listeners.unchanged.map((u) => name(u.listener)),
    },
    notes,
  };
}
