/**
 * Who a worker runs as: `user`/`group` (names or numeric ids) looked up as
 * src/config/system-users.ts does, and whether it may use a path.
 *
 * Only root can switch users. Like PHP-FPM, a daemon that is not root ignores `user`
 * and `group` naming someone else (the caller logs a notice) and runs workers as itself.
 */
import { statSync } from 'node:fs';
import * as nodePath from 'node:path';
import { hasGetent, lookupGroup, lookupUser } from '../config/system-users.js';

/** A process's identity as far as file permissions go. */
export interface Credentials {
  uid: number;
  /** Primary group first, then supplementary ones. */
  gids: number[];
}

export type WorkerIdentity =
  /** Spawn with these ids (undefined: keep the daemon's). */
  | { ok: true; uid: number | undefined; gid: number | undefined; runsAs: Credentials; ignored: boolean }
  | { ok: false; key: 'user' | 'group'; message: string };

/** The daemon's own ids (effective), with its supplementary groups. */
export interface Self {
  uid: number;
  gid: number;
  groups?: number[];
}

export function credentialsOfSelf(self: Self): Credentials {
  return { uid: self.uid, gids: [self.gid, ...(self.groups ?? [])] };
}

export function currentIds(): Self {
  return { uid: process.geteuid?.() ?? 0, gid: process.getegid?.() ?? 0, groups: process.getgroups?.() };
}

/**
 * What a pool's `user`/`group` mean on this host for a daemon running as `self`.
 * `ignored`: they name someone else but the daemon is not root, so workers run as it.
 */
export function resolveIdentity(user: string | undefined, group: string | undefined, self: Self = currentIds()): WorkerIdentity {
  let uid: number | undefined;
  let gid: number | undefined;
  if (user !== undefined) {
    const u = lookupUser(user);
    if (u === undefined) return { ok: false, key: 'user', message: `no such user "${user}" (looked up in /etc/passwd${hasGetent() ? ' and with getent' : ''})` };
    uid = u.uid;
    gid = u.gid;
  }
  if (group !== undefined) {
    const g = lookupGroup(group);
    if (g === undefined) return { ok: false, key: 'group', message: `no such group "${group}" (looked up in /etc/group${hasGetent() ? ' and with getent' : ''})` };
    gid = g.gid;
  }
  if (self.uid !== 0) {
    const ignored = (uid !== undefined && uid !== self.uid) || (gid !== undefined && gid !== self.gid);
    return { ok: true, uid: undefined, gid: undefined, runsAs: credentialsOfSelf(self), ignored };
  }
  // libuv's spawn drops supplementary groups (setgroups(0)) when it sets ids.
  const switched = uid !== undefined || gid !== undefined;
  const runsAs = switched ? { uid: uid ?? self.uid, gids: [gid ?? self.gid] } : credentialsOfSelf(self);
  return { ok: true, uid, gid, runsAs, ignored: false };
}

/** What a path must allow: enter a directory, read a file, execute a program, make files in a directory. */
export type Want = 'enter' | 'read' | 'execute' | 'write';

/** rwx bits needed (write into a directory takes w and x). */
const BITS: Record<Want, number> = { enter: 1, read: 4, execute: 1, write: 3 };

/**
 * Why `who` could not use `path` as `want`s, or undefined when it can: every directory on
 * the way needs x, the last component r or x. By mode bits only (ACLs and capabilities
 * are not looked at); root may do anything but execute a file without an x bit.
 */
export function accessAs(path: string, who: Credentials, want: Want): string | undefined {
  const parts = nodePath.resolve(path).split('/').filter((p) => p !== '');
  let here = '/';
  for (let i = 0; i <= parts.length; i++) {
    if (i > 0) here = nodePath.join(here, parts[i - 1]!);
    const last = i === parts.length;
    let st;
    try {
      st = statSync(here);
    } catch (err) {
      return `${here}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`;
    }
    const w: Want = last ? want : 'enter';
    if (!allowed(st.mode, st.uid, st.gid, who, w)) {
      return `cannot ${w === 'write' ? 'write in' : w} ${here} (mode ${(st.mode & 0o7777).toString(8).padStart(4, '0')}, owner uid ${st.uid} gid ${st.gid})`;
    }
  }
  return undefined;
}

/** Whether `who` may `want` a file of this mode and owner, by its mode bits alone. */
export function allowed(mode: number, ownerUid: number, ownerGid: number, who: Credentials, want: Want): boolean {
  if (who.uid === 0) return want !== 'execute' || (mode & 0o111) !== 0;
  const shift = who.uid === ownerUid ? 6 : who.gids.includes(ownerGid) ? 3 : 0;
  return ((mode >> shift) & BITS[want]) === BITS[want];
}
