/**
 * Whether the front end can reach a Unix socket fcgi-pm will bind: every directory above
 * it must let the front end's user pass (x), and the socket's mode must let it connect
 * (w). Who the front end is: the socket's `owner`/`group` when the config names them,
 * else www-data where nginx, Apache or lighttpd is installed (Debian runs them so).
 * Directories that do not exist yet are fcgi-pm's to make (0755), and /run/fcgi-pm is
 * opened to 0755 by a root daemon at start (runtime-dir.ts): neither is a problem.
 */
import { existsSync, statSync } from 'node:fs';
import * as nodePath from 'node:path';
import { lookupUser } from '../config/system-users.js';
import type { AccountId } from '../config/types.js';
import { allowed, type Credentials, type Self } from '../worker/identity.js';
import { SHARED_RUN_DIR } from './runtime-dir.js';

export interface FrontEnd {
  who: Credentials;
  /** How the problem names it: "group www-data", "nginx's user www-data". */
  name: string;
  /** Named by the config (a sure mistake), or guessed from what is installed (a notice). */
  named: boolean;
}

const WEB_SERVERS: Array<[string, string]> = [['/usr/sbin/nginx', 'nginx'], ['/usr/sbin/apache2', 'Apache'], ['/usr/sbin/lighttpd', 'lighttpd']];

/** Who connects to a socket with this owner and group; undefined when nothing says. */
export function frontEndFor(owner: AccountId | undefined, group: AccountId | undefined, installed: (file: string) => boolean = existsSync): FrontEnd | undefined {
  if (group !== undefined) return { who: { uid: -1, gids: [group.id] }, name: `group ${group.name}`, named: true };
  if (owner !== undefined) {
    const u = lookupUser(owner.id);
    return { who: { uid: owner.id, gids: u === undefined ? [] : [u.gid] }, name: `user ${owner.name}`, named: true };
  }
  const server = WEB_SERVERS.find(([bin]) => installed(bin));
  const www = server === undefined ? undefined : lookupUser('www-data');
  if (server === undefined || www === undefined) return undefined;
  return { who: { uid: www.uid, gids: [www.gid] }, name: `${server[1]}'s user www-data`, named: false };
}

/**
 * Why the front end cannot reach `socketPath` (bound by fcgi-pm as `self` with this
 * owner, group and mode), or undefined.
 */
export function unreachable(socketPath: string, front: FrontEnd, self: Self, socket: { owner?: AccountId | undefined; group?: AccountId | undefined; mode: number }): string | undefined {
  const parts = nodePath.resolve(nodePath.dirname(socketPath)).split('/').filter((p) => p !== '');
  let here = '/';
  for (let i = 0; i <= parts.length; i++) {
    if (i > 0) here = nodePath.join(here, parts[i - 1]!);
    let st;
    try {
      st = statSync(here);
    } catch {
      break; // fcgi-pm makes the rest, 0755
    }
    if (self.uid === 0 && here === SHARED_RUN_DIR) continue;
    if (!allowed(st.mode, st.uid, st.gid, front.who, 'enter')) {
      return `${front.name} cannot pass through ${here} (mode ${octal(st.mode)}, owner uid ${st.uid} gid ${st.gid}) to reach the socket: put it in a directory others may enter (chmod o+x, or a group the front end is in)`;
    }
  }
  const uid = socket.owner?.id ?? self.uid;
  const gid = socket.group?.id ?? self.gid;
  const mode = socket.mode;
  const shift = front.who.uid === uid ? 6 : front.who.gids.includes(gid) ? 3 : 0;
  if (front.who.uid !== 0 && ((mode >> shift) & 2) === 0) {
    return `${front.name} cannot connect: the socket will be uid ${uid} gid ${gid} mode ${octal(mode)}; give it the front end's group and mode "0660" (group: www-data), or mode "0666"`;
  }
  return undefined;
}

function octal(mode: number): string {
  return (mode & 0o7777).toString(8).padStart(4, '0');
}
