"""--preload (fcgi-pm `preload: true`): a fork server, the second process model. The application is imported once;
then each time fcgi-pm asks for a worker (a message with a listening socket on the
Node IPC channel, NODE_CHANNEL_FD) this parent forks a child that serves on that
socket exactly as a plain worker would, and reports {"forked": id, "pid": N}. It reaps
its children and reports {"exited": id, ...}. Children share the parent's pages
copy-on-write (gc.freeze() keeps the collector from touching them) and get SIGTERM if
the parent dies. Linux only.

"""

import ctypes
import errno
import gc
import json
import os
import select
import signal
import socket
import sys
import traceback
from collections import deque

from .errors import PROG, log
from .server import serve



PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """SIGTERM when the fork server goes (the child finishes its request, then exits)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        # It died between the fork and the prctl: the signal will not come.
        raise SystemExit(0)


class IpcChannel:
    """fcgi-pm's end of Node's IPC channel (JSON lines; handles as SCM_RIGHTS fds)."""

    def __init__(self, fd: int):
        self.sock = socket.socket(fileno=fd)
        self.sock.setblocking(True)
        self.buf = b''
        self.fds = deque()

    def send(self, msg: dict) -> None:
        self.sock.sendall(json.dumps(msg).encode() + b'\n')

    def receive(self):
        """Messages that arrived complete, each with its fd (or None); None at EOF."""
        data, anc, _, _ = self.sock.recvmsg(65536, socket.CMSG_SPACE(16 * 4))
        for level, kind, raw in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                n = len(raw) - len(raw) % 4
                self.fds.extend(int.from_bytes(raw[i:i + 4], sys.byteorder) for i in range(0, n, 4))
        if not data:
            return None
        self.buf += data
        out = []
        while b'\n' in self.buf:
            line, self.buf = self.buf.split(b'\n', 1)
            if not line:
                continue
            msg = json.loads(line)
            fd = None
            if isinstance(msg, dict) and msg.get('cmd') == 'NODE_HANDLE':
                # Node sends the next handle only after this acknowledgement.
                fd = self.fds.popleft() if self.fds else None
                self.send({'cmd': 'NODE_HANDLE_ACK'})
                msg = msg.get('msg')
            elif isinstance(msg, dict) and str(msg.get('cmd', '')).startswith('NODE_'):
                continue  # Node's own housekeeping
            out.append((msg, fd))
        return out


class ForkServer:
    def __init__(self, app, protocol: str, mount, channel: IpcChannel):
        self.app = app
        self.protocol = protocol
        self.mount = mount
        self.chan = channel
        self.children = {}  # pid -> worker id
        self.wake_r, self.wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self.wake_w.setblocking(False)
        self.stopping = False

    def on_signal(self, signum, frame) -> None:
        if signum != signal.SIGCHLD:
            self.stopping = True

    def run(self) -> int:
        signal.set_wakeup_fd(self.wake_w.fileno())
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(sig, self.on_signal)
        # Objects imported so far stay where they are: the collector would otherwise
        # write to every page of them in each child and undo the sharing.
        gc.collect()
        gc.freeze()
        self.chan.send({'ready': True, 'pid': os.getpid()})
        while not self.stopping:
            try:
                r, _, _ = select.select([self.chan.sock, self.wake_r], [], [])
            except InterruptedError:
                continue
            if self.wake_r in r:
                try:
                    self.wake_r.recv(4096)
                except BlockingIOError:
                    pass
            self.reap()
            if self.chan.sock in r:
                msgs = self.chan.receive()
                if msgs is None:
                    break  # fcgi-pm went away
                for msg, fd in msgs:
                    self.handle(msg, fd)
        # Children finish their requests on SIGTERM; fcgi-pm stops them itself when it can.
        for pid in list(self.children):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        return 0

    def handle(self, msg, fd) -> None:
        if isinstance(msg, dict) and 'fork' in msg and fd is not None:
            self.fork(int(msg['fork']), fd)
        elif fd is not None:
            os.close(fd)

    def fork(self, wid: int, fd: int) -> None:
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError as e:
            os.close(fd)
            self.chan.send({'failed': wid, 'errno': errno.errorcode.get(e.errno, 'EAGAIN'), 'message': str(e)})
            return
        if pid == 0:
            os._exit(self.child(fd, parent))
        try:
            # Here too (as shells do): the group exists before fcgi-pm hears of the child.
            os.setpgid(pid, pid)
        except OSError:
            pass  # the child did it first
        os.close(fd)
        self.children[pid] = wid
        self.chan.send({'forked': wid, 'pid': pid})

    def child(self, fd: int, parent: int) -> int:
        code = 1
        try:
            # Not the fork server's handlers: a SIGTERM before serve() installs its own ends the child.
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
                signal.signal(sig, signal.SIG_DFL)
            signal.set_wakeup_fd(-1)
            os.setpgid(0, 0)  # fcgi-pm signals the child's group, as for any worker
            die_with_parent(parent)
            self.chan.sock.close()
            self.wake_r.close()
            self.wake_w.close()
            listener = socket.socket(fileno=fd)
            listener.setblocking(True)
            code = serve(self.app, listener, self.protocol, self.mount)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 0
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        return code

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            wid = self.children.pop(pid, None)
            if wid is None:
                continue
            sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
            self.chan.send({
                'exited': wid, 'pid': pid,
                'code': os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                'signal': signal.Signals(sig).name if sig is not None else None,
            })


def warm_django() -> None:
    """What Django loads on its first request and every worker would load again: the
    URLconf with its views (and what they import), and the template engines. Nothing
    here opens a database connection, which a child must not inherit."""
    if 'django' not in sys.modules:
        return
    try:
        from django.template import engines
        from django.urls import get_resolver
        get_resolver().url_patterns
        for engine in engines.all():
            inner = getattr(engine, 'engine', None)  # DjangoTemplates: its loaders, made once
            if inner is not None:
                inner.template_loaders
    except Exception as e:  # the first request will say it again, in a worker
        log(f'preload: warming Django up failed: {e!r}')


def preload_main(app, args) -> int:
    fd = os.environ.pop('NODE_CHANNEL_FD', None)
    os.environ.pop('NODE_CHANNEL_SERIALIZATION_MODE', None)
    if fd is None:
        raise SystemExit(f'{PROG}: --preload needs fcgi-pm (preload: true) to start it: no NODE_CHANNEL_FD')
    warm_django()
    return ForkServer(app, args.protocol, args.script_name, IpcChannel(int(fd))).run()
