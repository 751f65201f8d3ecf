/**
 * Users and groups of this host, by name or numeric id: /etc/passwd and /etc/group
 * first (node has no getpwnam), then `getent` for accounts only NSS knows (LDAP, sssd,
 * systemd-userdb), where getent exists. Used for pool `user`/`group` and Unix socket
 * `owner`/`group`, so both find the same accounts.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import * as nodePath from 'node:path';

export interface UserEntry {
  uid: number;
  /** The user's primary group. */
  gid: number;
  name: string;
}

export interface GroupEntry {
  gid: number;
  name: string;
}

export interface AccountFiles {
  passwd: string;
  group: string;
}

const SYSTEM_FILES: AccountFiles = { passwd: '/etc/passwd', group: '/etc/group' };

type Db = 'passwd' | 'group';

/** The record for `key` (a name, or digits matched against the id field) in colon-separated lines. */
function findRecord(text: string, key: string): string[] | undefined {
  const numeric = /^\d+$/.test(key);
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const f = line.split(':');
    if (f.length < 3) continue;
    if (numeric ? Number(f[2]) === Number(key) : f[0] === key) return f;
  }
  return undefined;
}

function readText(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

/** getent: NSS sources. Exit 2 = not found; no getent = not found. */
function getent(db: Db, key: string): string[] | undefined {
  try {
    return findRecord(execFileSync('getent', [db, key], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 5000 }), key);
  } catch {
    return undefined;
  }
}

/** Only the real host's files fall back to getent; given files are all there is. */
function lookup(db: Db, nameOrId: string | number, files: AccountFiles): string[] | undefined {
  const key = String(nameOrId).trim();
  return findRecord(readText(files[db]), key) ?? (files === SYSTEM_FILES ? getent(db, key) : undefined);
}

/** The user named `nameOrId`, or with that uid (a number or digits); undefined when none is known. */
export function lookupUser(nameOrId: string | number, files: AccountFiles = SYSTEM_FILES): UserEntry | undefined {
  const f = lookup('passwd', nameOrId, files);
  return f === undefined || f.length < 4 ? undefined : { uid: Number(f[2]), gid: Number(f[3]), name: f[0]! };
}

/** The group named `nameOrId`, or with that gid; undefined when none is known. */
export function lookupGroup(nameOrId: string | number, files: AccountFiles = SYSTEM_FILES): GroupEntry | undefined {
  const f = lookup('group', nameOrId, files);
  return f === undefined ? undefined : { gid: Number(f[2]), name: f[0]! };
}

let getentSeen: boolean | undefined;
/** For messages: whether a failed lookup also asked getent. */
export function hasGetent(): boolean {
  if (getentSeen === undefined) {
    const dirs = (process.env['PATH'] ?? '/usr/bin:/bin').split(':');
    getentSeen = dirs.some((d) => {
      try {
        return statSync(nodePath.join(d, 'getent')).isFile();
      } catch {
        return false;
      }
    });
  }
  return getentSeen;
}
