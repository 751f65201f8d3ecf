/**
 * Users and groups of this host, by name or numeric id, read from /etc/passwd and
 * /etc/group (node has no getpwnam). Accounts only NSS knows (LDAP, systemd's
 * DynamicUser) are not found here; a numeric id still works for those where the caller
 * accepts one.
 */
import { readFileSync } from 'node:fs';

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

/** Lines of a colon-separated account file, split into fields; an unreadable file has none. */
function records(file: string): string[][] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  return text.split('\n').filter((l) => l !== '' && !l.startsWith('#')).map((l) => l.split(':'));
}

function idOf(nameOrId: string | number): number | undefined {
  const s = String(nameOrId).trim();
  return /^\d+$/.test(s) ? Number(s) : undefined;
}

/** The user named `nameOrId`, or with that uid (a number or digits); undefined when /etc/passwd has none. */
export function lookupUser(nameOrId: string | number, files: AccountFiles = SYSTEM_FILES): UserEntry | undefined {
  const id = idOf(nameOrId);
  for (const f of records(files.passwd)) {
    if (f.length < 4) continue;
    const uid = Number(f[2]);
    if (id === undefined ? f[0] === String(nameOrId).trim() : uid === id) return { uid, gid: Number(f[3]), name: f[0]! };
  }
  return undefined;
}

/** The group named `nameOrId`, or with that gid; undefined when /etc/group has none. */
export function lookupGroup(nameOrId: string | number, files: AccountFiles = SYSTEM_FILES): GroupEntry | undefined {
  const id = idOf(nameOrId);
  for (const f of records(files.group)) {
    if (f.length < 3) continue;
    const gid = Number(f[2]);
    if (id === undefined ? f[0] === String(nameOrId).trim() : gid === id) return { gid, name: f[0]! };
  }
  return undefined;
}
