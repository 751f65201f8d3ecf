/**
 * Reading a daemon's status snapshot: our own (a function the daemon hands in), a peer's
 * control socket on this host, or a peer's dashboard over HTTP with peer_token. A peer
 * that does not answer yields `{ up: false, reason }`, never a throw.
 */
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { controlRequest } from '../control/client.js';
import type { StatusSnapshot } from '../control/types.js';
import type { WarningEntry } from '../log/warning-ring.js';

export type PeerKind = 'self' | 'socket' | 'http';

export interface PeerRead {
  /** 'self', a control socket path or a dashboard URL: how the page names the daemon in requests. */
  id: string;
  kind: PeerKind;
  up: boolean;
  reason?: string | undefined;
  snapshot?: StatusSnapshot | undefined;
}

export const PEER_TIMEOUT_MS = 3000;

export function peerKind(id: string): PeerKind {
  return id === 'self' ? 'self' : /^https?:\/\//.test(id) ? 'http' : 'socket';
}

/** One JSON request to a peer's dashboard; rejects with a message fit for the page. */
export function httpJson(url: string, token: string | undefined, body?: unknown, timeoutMs = PEER_TIMEOUT_MS): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const headers: Record<string, string> = { accept: 'application/json' };
    if (token !== undefined) headers.authorization = `Bearer ${token}`;
    if (data !== undefined) Object.assign(headers, { 'content-type': 'application/json', 'content-length': String(data.length) });
    const req = (u.protocol === 'https:' ? httpsRequest : httpRequest)(u, { method: data ? 'POST' : 'GET', headers, timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        if (res.statusCode === 401) return reject(new Error('401: peer_token is not accepted there'));
        let v: unknown;
        try {
          v = JSON.parse(text);
        } catch {
          return reject(new Error(`HTTP ${res.statusCode}: not JSON: ${text.slice(0, 120)}`));
        }
        if ((res.statusCode ?? 500) >= 400) return reject(new Error(`HTTP ${res.statusCode}: ${(v as { error?: string }).error ?? text.slice(0, 120)}`));
        resolve(v);
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs / 1000} s`)));
    req.on('error', (err: NodeJS.ErrnoException) => reject(new Error(err.code === 'ECONNREFUSED' ? 'connection refused' : err.message)));
    req.end(data);
  });
}

/** What a read asks beyond the pools: every worker's CPU and memory sampled (a pool's details), every defined vhosts site (the page's search). */
export interface ReadWhat {
  processes?: boolean;
  allSites?: boolean;
  /** A sample of the sampler's: this daemon may keep its idle pools' statuses from the last one (StatusReuse); peers are read whole. */
  sample?: boolean;
}

export async function readPeer(id: string, peerToken: string | undefined, self?: (what: ReadWhat) => Promise<StatusSnapshot>, what: ReadWhat = {}): Promise<PeerRead> {
  const kind = peerKind(id);
  try {
    let snapshot: StatusSnapshot;
    if (kind === 'self') {
      if (self === undefined) throw new Error('no local daemon');
      snapshot = await self(what);
    } else if (kind === 'http') {
      const q = [what.processes === true ? 'processes=1' : '', what.allSites === true ? 'all_sites=1' : ''].filter((x) => x !== '').join('&');
      snapshot = (await httpJson(new URL(`api/snapshot${q === '' ? '' : `?${q}`}`, id.endsWith('/') ? id : id + '/').href, peerToken)) as StatusSnapshot;
    } else {
      const s = await controlRequest(id, { cmd: 'status', processes: what.processes === true, all_sites: what.allSites === true }, PEER_TIMEOUT_MS);
      s.end();
      const r = s.response;
      if (!r.ok) throw new Error(r.error.message);
      snapshot = r.result as StatusSnapshot;
    }
    if (snapshot?.format !== 'fcgi-pm-status/1') throw new Error(`answered with an unknown status format ${JSON.stringify(snapshot?.format)}`);
    return { id, kind, up: true, snapshot };
  } catch (err) {
    return { id, kind, up: false, reason: (err as Error).message };
  }
}

/** A daemon's recent warnings; [] when it cannot say (down, or too old for the verb). */
export async function readWarnings(id: string, peerToken: string | undefined, self?: () => WarningEntry[]): Promise<WarningEntry[]> {
  try {
    const kind = peerKind(id);
    if (kind === 'self') return self?.() ?? [];
    if (kind === 'http') return (await httpJson(new URL('api/warnings', id.endsWith('/') ? id : id + '/').href, peerToken)) as WarningEntry[];
    const s = await controlRequest(id, { cmd: 'warnings' }, PEER_TIMEOUT_MS);
    s.end();
    return s.response.ok && Array.isArray(s.response.result) ? (s.response.result as WarningEntry[]) : [];
  } catch {
    return [];
  }
}
