"""--preload (fcgi-pm `preload: true`): a fork server, the second process model.

The application is imported once; then each time fcgi-pm asks for a worker this parent
binds the worker's listening socket and forks a child that serves on it exactly as a
plain worker would. Children share the parent's pages copy-on-write (gc.freeze() keeps
the collector from touching them) and get SIGTERM if the parent dies. Linux only.

The channel uses only file descriptors fcgi-pm hands over at spawn, named by
FCGI_PM_PRELOAD_FDS="COMMANDS,REPLIES,DIR" (fcgi-pm passes "0,3,4"):

    COMMANDS  JSON lines from fcgi-pm: {"fork": id, "socket": NAME}
    REPLIES   JSON lines to fcgi-pm:   {"ready": true, "pid": N}   application imported
                                       {"forked": id, "pid": N}    the child serves
                                       {"failed": id, "errno": E, "message": M}
                                       {"exited": id, "pid": N, "code": C, "signal": S}
    DIR       an open directory (private to the pool's user) where NAME is bound; the
              parent reaches it through /proc/self/fd/DIR, so fcgi-pm's runtime
              directory need not let the pool's user in.

EOF on COMMANDS (fcgi-pm went away) stops the parent.
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


class Channel:
    """The fork server's end of its channel to fcgi-pm: JSON lines in on one fd, out on another."""

    def __init__(self, commands: int, replies: int):
        self.commands = commands
        self.replies = replies
        self.buf = b''

    def fileno(self) -> int:
        return self.commands

    def send(self, msg: dict) -> None:
        data = json.dumps(msg).encode() + b'\n'
        while data:
            data = data[os.write(self.replies, data):]

    def receive(self):
        """Messages that arrived complete; None at EOF."""
        data = os.read(self.commands, 65536)
        if not data:
            return None
        self.buf += data
        out = []
        while b'\n' in self.buf:
            line, self.buf = self.buf.split(b'\n', 1)
            if line:
                out.append(json.loads(line))
        return out

    def close(self) -> None:
        for fd in {self.commands, self.replies}:
            try:
                os.close(fd)
            except OSError:
                pass


def bind_worker_socket(dir_fd: int, name: str) -> socket.socket:
    """The worker's listening Unix socket, bound as NAME in the directory `dir_fd`."""
    if not name or '/' in name or name.startswith('.'):
        raise OSError(errno.EINVAL, f'bad socket name {name!r}')
    path = f'/proc/self/fd/{dir_fd}/{name}'
    try:
        os.unlink(path)  # a stale socket from an earlier worker of that id
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        os.chmod(path, 0o600)
        sock.listen(511)
    except OSError:
        sock.close()
        raise
    return sock


class ForkServer:
    def __init__(self, app, protocol: str, mount, channel: Channel, dir_fd: int):
        self.app = app
        self.protocol = protocol
        self.mount = mount
        self.chan = channel
        self.dir_fd = dir_fd
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
                r, _, _ = select.select([self.chan, self.wake_r], [], [])
            except InterruptedError:
                continue
            if self.wake_r in r:
                try:
                    self.wake_r.recv(4096)
                except BlockingIOError:
                    pass
            self.reap()
            if self.chan in r:
                msgs = self.chan.receive()
                if msgs is None:
                    break  # fcgi-pm went away
                for msg in msgs:
                    self.handle(msg)
        # Children finish their requests on SIGTERM; fcgi-pm stops them itself when it can.
        for pid in list(self.children):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        return 0

    def handle(self, msg) -> None:
        if isinstance(msg, dict) and 'fork' in msg:
            self.fork(int(msg['fork']), str(msg.get('socket', '')))

    def fork(self, wid: int, name: str) -> None:
        parent = os.getpid()
        try:
            listener = bind_worker_socket(self.dir_fd, name)
        except OSError as e:
            self.chan.send({'failed': wid, 'errno': errno.errorcode.get(e.errno, 'EIO'), 'message': f'cannot bind {name}: {e.strerror or e}'})
            return
        # The child closes its end once it leads a session of its own: fcgi-pm hears of it
        # only then, so the group it signals exists.
        started_r, started_w = os.pipe()
        try:
            pid = os.fork()
        except OSError as e:
            os.close(started_r)
            os.close(started_w)
            listener.close()
            self.chan.send({'failed': wid, 'errno': errno.errorcode.get(e.errno, 'EAGAIN'), 'message': str(e)})
            return
        if pid == 0:
            os.close(started_r)
            os._exit(self.child(listener, parent, started_w))
        os.close(started_w)
        try:
            while os.read(started_r, 1):
                pass
        except OSError:
            pass
        os.close(started_r)
        listener.close()
        self.children[pid] = wid
        self.chan.send({'forked': wid, 'pid': pid})

    def child(self, listener: socket.socket, parent: int, started: int) -> int:
        code = 1
        try:
            # A session (and process group) of its own, as an exec'd worker has: the
            # scheduler's autogroups are per session, and children sharing the fork
            # server's would share one worker's CPU time on a busy host (the preload pool
            # fell behind the exec pool under load, and was equal on an idle machine).
            os.setsid()
            os.close(started)
            # Not the fork server's handlers: a SIGTERM before serve() installs its own ends the child.
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
                signal.signal(sig, signal.SIG_DFL)
            signal.set_wakeup_fd(-1)
            die_with_parent(parent)
            self.chan.close()
            os.close(self.dir_fd)
            # The commands were fd 0: an application reading stdin gets EOF, as in a plain worker.
            null = os.open(os.devnull, os.O_RDONLY)  # fd 0 when the commands were there
            if null != 0:
                os.dup2(null, 0)
                os.close(null)
            self.wake_r.close()
            self.wake_w.close()
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
    fds = os.environ.pop('FCGI_PM_PRELOAD_FDS', None)
    try:
        commands, replies, dir_fd = (int(f) for f in (fds or '').split(','))
    except ValueError:
        raise SystemExit(f'{PROG}: --preload needs fcgi-pm (preload: true) to start it: '
                         f'FCGI_PM_PRELOAD_FDS is {fds!r}, not "COMMANDS,REPLIES,DIR"') from None
    warm_django()
    return ForkServer(app, args.protocol, args.script_name, Channel(commands, replies), dir_fd).run()
