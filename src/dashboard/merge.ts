/**
 * The cluster as the page shows it (pure): one entry per daemon, in the order given
 * (ourselves first), a daemon listed twice (by socket and by URL, or ourselves among the
 * peers) shown once, and for each pool name the daemons that have it, for "edit on all".
 */
import type { StatusSnapshot } from '../control/types.js';
import type { PeerRead } from './peers.js';

export interface ClusterDaemon {
  id: string;
  kind: PeerRead['kind'];
  up: boolean;
  reason?: string | undefined;
  /** host-ish label: the config file and pid when up, else the id. */
  label: string;
  snapshot?: StatusSnapshot | undefined;
}

export interface Cluster {
  at: number;
  daemons: ClusterDaemon[];
  /** Pool name → ids of the up daemons that have it. */
  pools: Record<string, string[]>;
}

export function mergeCluster(reads: readonly PeerRead[], at: number): Cluster {
  const daemons: ClusterDaemon[] = [];
  const seen = new Set<string>();
  for (const r of reads) {
    const s = r.snapshot;
    if (r.up && s !== undefined) {
      const who = `${s.daemon.pid}\0${s.daemon.config}`;
      if (seen.has(who)) continue;
      seen.add(who);
      daemons.push({ id: r.id, kind: r.kind, up: true, label: `${s.daemon.config} (pid ${s.daemon.pid})`, snapshot: s });
    } else {
      daemons.push({ id: r.id, kind: r.kind, up: false, reason: r.reason ?? 'no answer', label: r.id });
    }
  }
  const pools: Record<string, string[]> = {};
  for (const d of daemons) for (const p of d.snapshot?.pools ?? []) (pools[p.name] ??= []).push(d.id);
  return { at, daemons, pools };
}
