/**
 * `fcgi-pm check`: the addresses `run` would bind, tried now, so a port in use fails the
 * check rather than the start. A TCP address is bound and closed at once; a Unix socket
 * file is in use when something listens on it. Not wrong, so passed over: an address held
 * by this config's own running daemon (a check before a reload), one held by systemd
 * (socket activation hands it to fcgi-pm), and ports this user may not bind (a check as
 * another user than the daemon's).
 */
import { lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import * as nodePath from 'node:path';
import * as net from 'node:net';
import type { Problems, KeyPath } from '../config/problems.js';
import type { Config } from '../config/types.js';
import type { SocketAddress } from '../protocol/address.js';

/** Every address the config binds, with the key that names it. */
function boundAddresses(cfg: Config): Array<{ path: KeyPath; address: SocketAddress }> {
  const out: Array<{ path: KeyPath; address: SocketAddress }> = [];
  cfg.listen.forEach((l, i) => {
    if (l.address !== undefined) out.push({ path: ['listen', i, 'address'], address: l.address });
  });
  for (const pool of cfg.pools.values()) {
    if (pool.accept === 'direct' && pool.directListen !== undefined) out.push({ path: ['pools', pool.name, 'direct_listen'], address: pool.directListen });
  }
  if (cfg.dashboard?.address !== undefined) out.push({ path: ['dashboard', 'address'], address: cfg.dashboard.address });
  return out;
}

export async function checkAddressesFree(cfg: Config, problems: Problems): Promise<void> {
  for (const { path, address } of boundAddresses(cfg)) {
    const why = address.kind === 'tcp' ? await tcpInUse(address) : await unixInUse(address.path);
    if (why !== undefined) problems.add(path, why);
  }
}

async function tcpInUse(a: { host: string; port: number; text: string }): Promise<string | undefined> {
  const code = await new Promise<string | undefined>((resolve) => {
    const server = net.createServer();
    server.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'EINVAL'));
    server.listen({ host: a.host === '' ? undefined : a.host, port: a.port, exclusive: true }, () => server.close(() => resolve(undefined)));
  });
  if (code === undefined || code === 'EACCES') return undefined;
  if (code === 'EADDRNOTAVAIL') return `${a.text}: no interface of this host has that address (EADDRNOTAVAIL)`;
  if (code !== 'EADDRINUSE') return `${a.text}: cannot bind (${code})`;
  const owner = tcpOwner(a.port);
  if (owner?.pid === 1) return undefined;
  return `${a.text} is in use (EADDRINUSE)${owner === undefined ? '' : ` by pid ${owner.pid} (${owner.comm})`}: run would fail to bind it; stop that program or pick another port`;
}

async function unixInUse(path: string): Promise<string | undefined> {
  const listening = listeningUnixPaths();
  const answers = listening === undefined ? await connects(path) : listening.has(nodePath.resolve(path)) && isSocket(path);
  return answers ? `unix:${path}: another program answers on this socket: run would fail to bind it (EADDRINUSE)` : undefined;
}

/**
 * Paths with a listening Unix socket, from /proc/net/unix (undefined where it cannot be
 * read). Looked up rather than connected to: a connection would wake what listens there
 * (an ondemand direct pool starts a worker for it). fcgi-pm binds at a temporary name
 * (.NAME.PID.tmp) and renames it into place; the kernel keeps the name bound, so that
 * stands for NAME too.
 */
function listeningUnixPaths(): Set<string> | undefined {
  let text: string;
  try {
    text = readFileSync('/proc/net/unix', 'utf8');
  } catch {
    return undefined;
  }
  const out = new Set<string>();
  for (const line of text.split('\n').slice(1)) {
    // Num RefCount Protocol Flags Type St Inode Path; flag 00010000 is __SO_ACCEPTCON (listening).
    const f = line.trim().split(/\s+/);
    if (f.length < 8 || f[3] !== '00010000' || !f[7]!.startsWith('/')) continue;
    const bound = f.slice(7).join(' ');
    out.add(bound);
    const temp = /^\.(.+)\.\d+\.tmp$/.exec(nodePath.basename(bound));
    if (temp !== null) out.add(nodePath.join(nodePath.dirname(bound), temp[1]!));
  }
  return out;
}

function isSocket(path: string): boolean {
  try {
    return lstatSync(path).isSocket();
  } catch {
    return false;
  }
}

function connects(path: string): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const s = net.connect({ path });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** The process holding a listening TCP socket on `port`, from /proc (root sees every process). */
function tcpOwner(port: number): { pid: number; comm: string } | undefined {
  const inodes = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // local_address is HEX_IP:HEX_PORT; st 0A is LISTEN; inode is the 10th field.
      if (f.length < 10 || f[3] !== '0A') continue;
      if (parseInt(f[1]!.split(':')[1]!, 16) === port) inodes.add(`socket:[${f[9]}]`);
    }
  }
  if (inodes.size === 0) return undefined;
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      let target: string;
      try {
        target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        continue;
      }
      if (inodes.has(target)) {
        let comm = '?';
        try {
          comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
        } catch {
          // gone meanwhile
        }
        return { pid: Number(pid), comm };
      }
    }
  }
  return undefined;
}
