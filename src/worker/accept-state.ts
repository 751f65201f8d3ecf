/**
 * What a worker that accepts on a shared socket is doing, read from /proc without asking
 * it (PHP-FPM reads its scoreboard; a php-cgi worker has none, but the kernel knows):
 *   - /proc/PID/syscall: "43 0x0 …" (accept) or "288 0x0 …" (accept4) on fd 0, or on
 *     another fd that is the listening socket (fcgi-pm-wsgi moves it off fd 0, so that
 *     an application reading stdin gets EOF) = it waits for a connection: idle;
 *   - /proc/PID/schedstat: CPU time in ns, so two idle samples with the same time mean
 *     it served nothing in between;
 *   - /proc/PID/fd: a socket other than the listening one = the connection it serves;
 *     its inode changes with every request, so one seen for longer than
 *     request_timeout is one request running that long.
 * /proc/PID/syscall needs ptrace access (root, or the workers' own user).
 */
import fs from 'node:fs';

const ACCEPT = 43;
const ACCEPT4 = 288;

export interface AcceptSample {
  /** Gone (or never readable). */
  gone: boolean;
  /** Blocked in accept() on fd 0; undefined when /proc/PID/syscall cannot be read. */
  accepting: boolean | undefined;
  /** CPU time so far, ns. */
  cpuNs: number;
  /** Inode of the connection it serves (not accepting), if it holds one. */
  conn: number | undefined;
}

const GONE: AcceptSample = Object.freeze({ gone: true, accepting: undefined, cpuNs: 0, conn: undefined });

/**
 * Pure: the fd a /proc/PID/syscall line waits in accept() or accept4() on; false for any
 * other state, undefined when the line cannot be read.
 */
export function acceptFd(line: string): number | false | undefined {
  const t = line.trim();
  if (t === '') return undefined;
  if (t === 'running') return false;
  const sp = t.indexOf(' ');
  const nr = Number(sp < 0 ? t : t.slice(0, sp));
  if (!Number.isInteger(nr)) return undefined;
  if (nr !== ACCEPT && nr !== ACCEPT4) return false;
  const fd = Number.parseInt(t.slice(sp + 1).split(' ', 1)[0] ?? '', 16);
  return Number.isInteger(fd) && fd >= 0 ? fd : undefined;
}

/**
 * What a process is blocked in, for a log line: the syscall number and its first
 * argument from /proc/PID/syscall ("0 0x5": read() on fd 5), and what that fd is
 * ("socket:[1234]"). A php-cgi that sits out SIGTERM is one waiting in read() on a
 * connection kept open to it (it retries a read interrupted by a signal). Undefined when
 * the process is gone or the file is not readable.
 */
export function blockedIn(pid: number): { syscall: string; fd?: string } | undefined {
  let line: string;
  try {
    line = fs.readFileSync(`/proc/${pid}/syscall`, 'latin1').trim();
  } catch {
    return undefined;
  }
  const [nr, arg0] = line.split(' ', 2);
  const fdNum = arg0 === undefined ? NaN : Number.parseInt(arg0, 16);
  let fd: string | undefined;
  if (Number.isInteger(fdNum) && fdNum >= 0 && fdNum < 1 << 20) {
    try {
      fd = fs.readlinkSync(`/proc/${pid}/fd/${fdNum}`);
    } catch {
      fd = undefined;
    }
  }
  return { syscall: arg0 === undefined ? nr! : `${nr} ${arg0}`, ...(fd === undefined ? {} : { fd }) };
}

/** Pure: whether a /proc/PID/syscall line is a wait in accept() on fd 0. */
export function parseSyscall(line: string): boolean | undefined {
  const fd = acceptFd(line);
  return fd === undefined ? undefined : fd === 0;
}

/** /proc/PID/syscall (for acceptFd); undefined when the process is gone or the file is not readable. */
export function readSyscall(pid: number): string | undefined {
  return readText(`/proc/${pid}/syscall`);
}

/** Inode of the socket `fd` of `pid`; undefined when it is not a socket (or gone). */
function socketInode(pid: number, fd: number): number | undefined {
  let target: string;
  try {
    target = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
  } catch {
    return undefined;
  }
  return target.startsWith('socket:[') ? Number(target.slice(8, -1)) : undefined;
}

function readText(p: string): string | undefined {
  try {
    return fs.readFileSync(p, 'latin1');
  } catch {
    return undefined;
  }
}

/** The socket the worker holds besides fd 0..2 and the listening one (inode `listenIno`). */
function connectionOf(pid: number, listenIno: number): number | undefined {
  let names: string[];
  try {
    names = fs.readdirSync(`/proc/${pid}/fd`);
  } catch {
    return undefined;
  }
  for (const n of names) {
    if (n === '0' || n === '1' || n === '2') continue;
    let target: string;
    try {
      target = fs.readlinkSync(`/proc/${pid}/fd/${n}`);
    } catch {
      continue;
    }
    if (!target.startsWith('socket:[')) continue;
    const ino = Number(target.slice(8, -1));
    if (ino !== listenIno) return ino;
  }
  return undefined;
}

export function readAcceptState(pid: number, listenIno: number): AcceptSample {
  const sched = readText(`/proc/${pid}/schedstat`);
  if (sched === undefined) return GONE;
  const cpuNs = Number(sched.slice(0, sched.indexOf(' ')));
  const sc = readText(`/proc/${pid}/syscall`);
  const fd = sc === undefined ? undefined : acceptFd(sc);
  // fd 0 is the shared socket as fcgi-pm hands it over; another fd must be that socket.
  const accepting = fd === undefined ? undefined : fd !== false && (fd === 0 || socketInode(pid, fd) === listenIno);
  return { gone: false, accepting, cpuNs, conn: accepting === true ? undefined : connectionOf(pid, listenIno) };
}
