/**
 * Reads the process table from /proc: who is whose child, what each runs, and whether
 * a pid is still a live (non-zombie) process. Used to count workers the daemon spawned.
 */
import { readdirSync, readFileSync } from 'node:fs';

export interface ProcInfo {
  pid: number;
  ppid: number;
  /** One-letter state from /proc/PID/stat (R, S, D, Z, ...). */
  state: string;
  /** argv joined by spaces. */
  cmdline: string;
}

function readProc(pid: number): ProcInfo | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    // "pid (comm) state ppid ..."; comm may hold spaces and parentheses.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'latin1').replace(/\0+$/, '').split('\0').join(' ');
    return { pid, ppid: Number(rest[1]), state: rest[0]!, cmdline };
  } catch {
    return undefined; // exited while we looked
  }
}

export function listProcesses(): ProcInfo[] {
  const out: ProcInfo[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const p = readProc(Number(name));
    if (p) out.push(p);
  }
  return out;
}

/** Live (non-zombie) descendants of `ancestor` whose command line contains `needle`. */
export function descendantsMatching(ancestor: number, needle: string): ProcInfo[] {
  const procs = listProcesses();
  const byPid = new Map(procs.map((p) => [p.pid, p]));
  const out: ProcInfo[] = [];
  for (const p of procs) {
    if (p.state === 'Z' || !p.cmdline.includes(needle)) continue;
    let cur = byPid.get(p.ppid);
    for (let hops = 0; cur && hops < 64; hops++) {
      if (cur.pid === ancestor) {
        out.push(p);
        break;
      }
      cur = byPid.get(cur.ppid);
    }
  }
  return out;
}

/** Pids of descendants of `ancestor` whose command line contains `needle`, sorted. */
export function descendantPids(ancestor: number, needle: string): number[] {
  return descendantsMatching(ancestor, needle).map((p) => p.pid).sort((a, b) => a - b);
}

/** Live (non-zombie) processes anywhere whose command line contains `needle`. */
export function processesMatching(needle: string): ProcInfo[] {
  return listProcesses().filter((p) => p.state !== 'Z' && p.cmdline.includes(needle));
}

/** True if the pid exists and is not a zombie. */
export function isAlive(pid: number): boolean {
  const p = readProc(pid);
  return p !== undefined && p.state !== 'Z';
}

/** The state letter of /proc/PID/stat (R, S, T stopped, Z...); undefined once gone. */
export function processState(pid: number): string | undefined {
  return readProc(pid)?.state;
}

export interface TcpConn {
  localPort: number;
  remotePort: number;
  /** Kernel state name: ESTABLISHED, CLOSE_WAIT, FIN_WAIT2, TIME_WAIT, LISTEN, ... */
  state: string;
}

const TCP_STATES: Record<string, string> = {
  '01': 'ESTABLISHED', '02': 'SYN_SENT', '03': 'SYN_RECV', '04': 'FIN_WAIT1', '05': 'FIN_WAIT2',
  '06': 'TIME_WAIT', '07': 'CLOSE', '08': 'CLOSE_WAIT', '09': 'LAST_ACK', '0A': 'LISTEN', '0B': 'CLOSING',
};

/** IPv4 TCP sockets (from /proc/net/tcp) whose local or remote port is `port`. */
export function tcpConnections(port: number): TcpConn[] {
  const out: TcpConn[] = [];
  const lines = readFileSync('/proc/net/tcp', 'latin1').split('\n').slice(1);
  for (const line of lines) {
    const f = line.trim().split(/\s+/);
    if (f.length < 4) continue;
    const localPort = parseInt(f[1]!.split(':')[1]!, 16);
    const remotePort = parseInt(f[2]!.split(':')[1]!, 16);
    if (localPort !== port && remotePort !== port) continue;
    out.push({ localPort, remotePort, state: TCP_STATES[f[3]!] ?? f[3]! });
  }
  return out;
}
