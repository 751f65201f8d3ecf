/**
 * max_children_total (PHP-FPM's process.max): the most workers alive at once across all
 * pools, divided fairly. PHP-FPM caps the total but not the shares, so one busy pool can
 * hold every process while another's requests wait; here each active pool (one with
 * workers or waiting requests) can always reach its share, max_children_total ÷ active
 * pools, and a pool below its share that needs a worker while the host is full takes it
 * from a pool above its share: an idle worker now (least recently used first), or, when
 * it has no worker at all, a busy one after its request. Spawns beyond the share (spare
 * workers, or demand above the share) take only free room, never the places a pool below
 * its share waits for. When workers come free, the waiting pool with the fewest workers is
 * asked first (host-governor.ts).
 *
 * Pure: counts in, a decision out; host-governor.ts gathers and carries out.
 */
import type { WorkerRef } from './types.js';

export interface ShareMember<M> {
  member: M;
  /** Live workers that are not retiring. */
  count: number;
  /** Workers retiring (alive until they exit: they hold their place until then). */
  leaving: number;
  /** Its requests wait for a place. */
  waiting: boolean;
  idle: readonly WorkerRef[];
  busy: readonly WorkerRef[];
}

export interface ShareAsk<M> {
  /** Workers the pool may start as far as its own limits and memory go. */
  want: number;
  /** Of those, for requests waiting in its queue. */
  demand: number;
  /** The asking pool's live workers that are not retiring, and those retiring. */
  mine: number;
  mineLeaving: number;
  /** max_children_total. */
  max: number;
  /** Every other pool that has workers or waiting requests. */
  others: ReadonlyArray<ShareMember<M>>;
}

export interface ShareDecision<M> {
  admit: number;
  /** Idle workers of pools above their share, to stop now. */
  evict: Array<{ member: M; ref: WorkerRef }>;
  /** A busy worker of a pool above its share, to retire after its request (this pool has none). */
  retire: Array<{ member: M; ref: WorkerRef }>;
  /** Demand spawns that must wait for a place. */
  unmet: number;
  /** The asking pool's fair share now. */
  share: number;
}

export function decideShare<M>(ask: ShareAsk<M>): ShareDecision<M> {
  const active = ask.others.length + 1;
  const share = Math.max(1, Math.floor(ask.max / active));
  const leaving = ask.mineLeaving + ask.others.reduce((n, o) => n + o.leaving, 0);
  const total = ask.mine + leaving + ask.others.reduce((n, o) => n + o.count, 0);
  // A pool at its share or above does not take the places a pool below its share waits for
  // (the worker it gave up exits, and its own replacement would otherwise take the place back).
  const reserved =
    ask.mine + ask.mineLeaving >= share
      ? ask.others.filter((o) => o.waiting && o.count + o.leaving < share).reduce((n, o) => n + share - o.count - o.leaving, 0)
      : 0;
  const free = Math.max(0, ask.max - total - reserved);
  const demand = Math.min(ask.demand, ask.want);
  const admitDemand = Math.min(demand, free);
  const admit = admitDemand + Math.min(ask.want - demand, free - admitDemand);
  const unmet = demand - admitDemand;
  const none = { admit, evict: [], retire: [], unmet, share };
  if (unmet === 0) return none;
  // Places this pool may claim from others: up to its share, less those on their way back.
  let claim = Math.min(unmet, share - ask.mine - admitDemand) - leaving;
  if (claim <= 0) return none;
  const over = ask.others.filter((o) => o.count > share);
  const evict: ShareDecision<M>['evict'] = [];
  // Least recently used first, never taking a pool below its share.
  const candidates = over
    .flatMap((o) => o.idle.filter((w) => !w.parent).map((ref) => ({ member: o.member, ref, owner: o })))
    .sort((a, b) => a.ref.since - b.ref.since);
  const taken = new Map<ShareMember<M>, number>();
  for (const c of candidates) {
    if (claim === 0) break;
    const t = taken.get(c.owner) ?? 0;
    if (c.owner.count - t <= share) continue;
    taken.set(c.owner, t + 1);
    evict.push({ member: c.member, ref: c.ref });
    claim--;
  }
  const retire: ShareDecision<M>['retire'] = [];
  if (evict.length === 0 && ask.mine === 0 && leaving === 0) {
    // No worker of our own to wait for and nothing idle to take: the pool most above its
    // share steps down one worker after its request.
    const most = [...over].sort((a, b) => b.count - a.count)[0];
    const victim = most && [...most.busy].sort((a, b) => a.since - b.since)[0];
    if (most && victim) retire.push({ member: most.member, ref: victim });
  }
  return { admit, evict, retire, unmet, share };
}
