/**
 * Readiness for systemd (Type=notify): READY=1 once serving, RELOADING=1 ... READY=1
 * around a reload, STOPPING=1 when a stop begins, each one datagram to $NOTIFY_SOCKET.
 *
 * Node has no AF_UNIX SOCK_DGRAM sockets and fcgi-pm takes no native module, so a tiny
 * helper sends the datagram: python3 (this script) if installed, else systemd-notify.
 * A helper's pid is not the service's main pid, which systemd checks:
 *  - Run as root, the python helper claims the daemon's pid in SCM_CREDENTIALS (allowed
 *    with CAP_SYS_ADMIN), which NotifyAccess=main accepts on systemd before v256; v256+
 *    identifies senders by pidfd, which cannot be claimed.
 *  - So examples/systemd/fcgi-pm.service sets NotifyAccess=all: any process of the
 *    service's cgroup may notify. (Workers could too; they can at most send a misleading
 *    status, not stop or restart the service.)
 *  - Both helpers then wait for systemd to have read the message (BARRIER=1, as
 *    sd_notify_barrier does), so it is not dropped because the sender exited first.
 * Messages are sent one at a time, in order. Without NOTIFY_SOCKET this does nothing.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { ErrorCodes } from '../errors.js';
import type { Logger } from '../log/log.js';

const PYTHON_SENDER = `
import os, select, socket, struct, sys
msg, pid = sys.argv[1].encode(), int(sys.argv[2])
addr = os.environ['NOTIFY_SOCKET']
if addr.startswith('@'):
    addr = '\\0' + addr[1:]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.connect(addr)
creds = [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, struct.pack('3i', pid, os.getuid(), os.getgid()))]
def send(data, anc):
    try:
        s.sendmsg([data], anc + creds)
    except PermissionError:
        s.sendmsg([data], anc)
send(msg, [])
r, w = os.pipe()
try:
    send(b'BARRIER=1', [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack('i', w))])
    os.close(w)
    p = select.poll()
    p.register(r, select.POLLHUP)
    p.poll(5000)
except OSError:
    pass
`;

const PYTHONS = ['/usr/bin/python3', '/usr/local/bin/python3', '/bin/python3'];
const SYSTEMD_NOTIFY = ['/usr/bin/systemd-notify', '/bin/systemd-notify'];

export interface NotifyHelper {
  command: string;
  args: (message: string, pid: number) => string[];
}

/** The helper to use, or undefined when neither python3 nor systemd-notify exists. */
export function findNotifyHelper(exists: (p: string) => boolean = existsSync): NotifyHelper | undefined {
  const py = PYTHONS.find(exists);
  if (py !== undefined) return { command: py, args: (m, pid) => ['-c', PYTHON_SENDER, m, String(pid)] };
  const sn = SYSTEMD_NOTIFY.find(exists);
  if (sn !== undefined) return { command: sn, args: (m, pid) => [`--pid=${pid}`, ...m.split('\n').filter((l) => l !== '')] };
  return undefined;
}

export class SystemdNotifier {
  private readonly socket: string | undefined;
  private readonly helper: NotifyHelper | undefined;
  private chain: Promise<void> = Promise.resolve();
  private warned = false;

  constructor(
    private readonly logger: Logger,
    env: NodeJS.ProcessEnv = process.env,
    helper: NotifyHelper | undefined = findNotifyHelper(),
  ) {
    const s = env['NOTIFY_SOCKET'];
    this.socket = s !== undefined && s !== '' ? s : undefined;
    this.helper = helper;
  }

  get enabled(): boolean {
    return this.socket !== undefined;
  }

  ready(status: string): Promise<void> {
    return this.send(`READY=1\nSTATUS=${status}\nMAINPID=${process.pid}`);
  }

  reloading(): Promise<void> {
    // MONOTONIC_USEC lets Type=notify-reload match it to its reload; CLOCK_MONOTONIC in µs.
    return this.send(`RELOADING=1\nMONOTONIC_USEC=${process.hrtime.bigint() / 1000n}\nSTATUS=reloading`);
  }

  stopping(): Promise<void> {
    return this.send('STOPPING=1\nSTATUS=stopping');
  }

  /** Resolves once this and every earlier message was handed over (or failed, logged). */
  send(message: string): Promise<void> {
    const socket = this.socket;
    if (socket === undefined) return Promise.resolve();
    const helper = this.helper;
    if (helper === undefined) {
      if (!this.warned) {
        this.warned = true;
        this.logger.warn({ code: ErrorCodes.SYSTEMD_NOTIFY, kind: 'systemd' }, 'NOTIFY_SOCKET is set but neither python3 nor systemd-notify is installed; systemd will not hear that fcgi-pm is ready (use Type=simple, or install one)');
      }
      return Promise.resolve();
    }
    this.chain = this.chain.then(
      () =>
        new Promise<void>((resolve) => {
          let stderr = '';
          const child = spawn(helper.command, helper.args(message, process.pid), {
            env: { NOTIFY_SOCKET: socket, PATH: process.env['PATH'] ?? '/usr/bin:/bin' },
            stdio: ['ignore', 'ignore', 'pipe'],
          });
          child.stderr?.setEncoding('utf8').on('data', (s: string) => (stderr += s));
          const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
          const done = (code: number | null, err?: Error): void => {
            clearTimeout(timer);
            if (err !== undefined || code !== 0) {
              this.logger.warn({ code: ErrorCodes.SYSTEMD_NOTIFY, kind: 'systemd', helper: helper.command, exitCode: code, err: err?.message, stderr: stderr.trim().slice(0, 500) }, `could not notify systemd (${message.split('\n')[0]})`);
            } else {
              this.logger.debug({ kind: 'systemd', message: message.replace(/\n/g, ' ') }, 'notified systemd');
            }
            resolve();
          };
          child.once('error', (err) => done(null, err));
          child.once('exit', (code) => done(code));
        }),
    );
    return this.chain;
  }
}
