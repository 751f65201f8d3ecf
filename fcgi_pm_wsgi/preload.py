"""--preload (fcgi-pm `preload: true`): a fork server, the second process model.

The application is imported and warmed up once (warm.py: what a first request would
build lazily); then each time fcgi-pm asks for a worker this parent binds the worker's
listening socket and hands it to a child that serves on it exactly as a plain worker
would. Children share the parent's pages copy-on-write (gc.freeze() keeps the collector
from touching them) and get SIGTERM if the parent dies. Linux only.

The spare (--spares 1, the default): a child forked ahead of need that has set itself
up and run the warm-up again, so the pages a request writes are already its own copies
(each copy-on-write fault costs microseconds, and a Django request's first run makes
hundreds). Asked for a worker, the parent passes the spare the listening socket
(SCM_RIGHTS over their socketpair) and it serves at once; the next spare is forked as
soon as no command waits. Without a warm spare (it is still warming up, it died,
or --spares 0) the worker is forked on the spot. A spare costs its private pages (about what one request writes).

The channel uses only file descriptors fcgi-pm hands over at spawn, named by
FCGI_PM_PRELOAD_FDS="COMMANDS,REPLIES,DIR" (fcgi-pm passes "0,3,4"):

    COMMANDS  JSON lines from fcgi-pm: {"fork": id, "socket": NAME}
                                       {"fork": id, "shared": true, "max_requests": N}
    REPLIES   JSON lines to fcgi-pm:   {"ready": true, "pid": N}   application imported
                                       {"spare": N | null}   the spare forked (or died)
                                       {"forked": id, "pid": N}    the child serves
                                       {"failed": id, "errno": E, "message": M}
                                       {"exited": id, "pid": N, "code": C, "signal": S}
    DIR       an open directory (private to the pool's user) where NAME is bound; the
              parent reaches it through /proc/self/fd/DIR, so fcgi-pm's runtime
              directory need not let the pool's user in.
    SHARED    (optional, "COMMANDS,REPLIES,DIR,SHARED") the listening socket of an
              `accept: direct` pool: a "shared" fork serves on it, as every worker of
              the pool does, and exits after max_requests (0: never); the parent never
              accepts on it.

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
import time
import traceback

from .errors import PROG, log
from .server import serve
from .warm import threads_besides_main, warm_up



PR_SET_PDEATHSIG = 1
# Seconds after a fork before the next spare is forked (once no command waits).
REFILL_DELAY = 0.0


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


class Spare:
    """A child forked ahead of need (the parent's end of it): it has done what a fresh
    fork does before serving (its own session, the copy-on-write faults of a request's
    pages) and waits on `sock` for its listening socket (SCM_RIGHTS)."""

    def __init__(self, pid: int, sock: socket.socket):
        self.pid = pid
        self.sock = sock

    def warmed(self) -> bool:
        """It finished its warm-up (it says so with one byte) and waits for a socket."""
        r, _, _ = select.select([self.sock], [], [], 0)
        return bool(r)

    def hand(self, listener: socket.socket, max_requests: int) -> bool:
        """Gives it the listener; True once it took it (it acknowledges with one byte)."""
        try:
            if self.sock.recv(1) != b'W':
                return False  # it died
            socket.send_fds(self.sock, [b'%d' % max_requests], [listener.fileno()])
            return self.sock.recv(1) == b'S'
        except OSError:
            return False
        finally:
            self.sock.close()


class ForkServer:
    def __init__(self, app, protocol: str, mount, channel: Channel, dir_fd: int, warm=None, spares: int = 1, shared_fd=None):
        self.app = app
        self.protocol = protocol
        self.mount = mount
        self.chan = channel
        self.dir_fd = dir_fd
        self.shared_fd = shared_fd
        # Run again in each spare, so that it faults in the pages a request writes.
        self.warm = warm
        self.spares = spares
        self.spare = None
        self.refill_at = None  # time.monotonic() when the next spare is due
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
        threads = threads_besides_main()
        if threads:
            # fork() copies only this thread: a lock another one holds stays held in every child.
            log(f'preload: the application started threads before the fork ({", ".join(threads)}); '
                f'children get none of them, and a lock one of them held stays locked in every child')
        # Objects imported so far stay where they are: the collector would otherwise
        # write to every page of them in each child and undo the sharing.
        gc.collect()
        gc.freeze()
        self.refill()
        self.chan.send({'ready': True, 'pid': os.getpid()})
        while not self.stopping:
            timeout = None if self.refill_at is None else max(0.0, self.refill_at - time.monotonic())
            try:
                r, _, _ = select.select([self.chan, self.wake_r], [], [], timeout)
            except InterruptedError:
                continue
            if not r:
                # Due, and no command waits (a burst's forks come first).
                self.refill_at = None
                self.refill()
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
        self.drop_spare()
        for pid in list(self.children):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        return 0

    def handle(self, msg) -> None:
        if isinstance(msg, dict) and 'fork' in msg:
            self.fork(int(msg['fork']), str(msg.get('socket', '')), msg.get('shared') is True, int(msg.get('max_requests') or 0))

    def fork(self, wid: int, name: str, shared: bool = False, max_requests: int = 0) -> None:
        if shared:
            if self.shared_fd is None:
                self.chan.send({'failed': wid, 'errno': 'EINVAL', 'message': 'a shared fork, but no shared socket was handed over (FCGI_PM_PRELOAD_FDS)'})
                return
            listener = socket.socket(fileno=os.dup(self.shared_fd))
        else:
            try:
                listener = bind_worker_socket(self.dir_fd, name)
            except OSError as e:
                self.chan.send({'failed': wid, 'errno': errno.errorcode.get(e.errno, 'EIO'), 'message': f'cannot bind {name}: {e.strerror or e}'})
                return
        pid = self.take_spare(listener, max_requests)
        if pid is None:
            try:
                pid = self.fork_child(listener, max_requests)
            except OSError as e:
                listener.close()
                self.chan.send({'failed': wid, 'errno': errno.errorcode.get(e.errno, 'EAGAIN'), 'message': str(e)})
                return
        listener.close()
        self.children[pid] = wid
        self.chan.send({'forked': wid, 'pid': pid})
        # The next spare at once, unless more commands wait (the forks of a burst first):
        # the next worker asked for soon after this one (a burst, a second busy worker)
        # should find it warm.
        self.refill_at = time.monotonic() + REFILL_DELAY

    def take_spare(self, listener: socket.socket, max_requests: int):
        """The spare's pid once it serves on `listener`; None without a spare that is
        warm (one still warming up stays the spare: a fork now is the quicker worker)."""
        spare = self.spare
        if spare is None or not spare.warmed():
            return None
        self.spare = None
        if spare.hand(listener, max_requests):
            return spare.pid
        self.reap()  # it died waiting: the fork below replaces it
        return None

    def fork_child(self, listener: socket.socket, max_requests: int) -> int:
        """A child serving on `listener` now; its pid once it leads a session of its own
        (fcgi-pm hears of it only then, so the group it signals exists)."""
        parent = os.getpid()
        started_r, started_w = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(started_r)
            os.close(started_w)
            raise
        if pid == 0:
            os.close(started_r)
            os._exit(self.child(parent, started_w, lambda: (listener, max_requests)))
        os.close(started_w)
        wait_closed(started_r)
        return pid

    def refill(self) -> None:
        """Forks the spare when there is none (and spares are on)."""
        if self.spares <= 0 or self.spare is not None or self.stopping:
            return
        parent = os.getpid()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            pid = os.fork()
        except OSError as e:
            for s in (ours, theirs):
                s.close()
            log(f'preload: cannot fork a spare: {e}')
            return
        if pid == 0:
            ours.close()
            os._exit(self.child(parent, None, lambda: self.await_listener(theirs)))
        # Not waited for (a command may come meanwhile): its W, after its own session
        # and its warm-up, says when it can be handed out.
        theirs.close()
        self.spare = Spare(pid, ours)
        self.chan.send({'spare': pid})

    def await_listener(self, sock: socket.socket):
        """In a spare: warm up, then wait for the listening socket and the requests it may
        serve (None: not wanted, exit)."""
        if self.warm is not None:
            try:
                self.warm()
            except Exception as e:
                log(f'preload: a spare\'s warm-up failed: {e!r}')
        try:
            sock.sendall(b'W')
            data, fds, _, _ = socket.recv_fds(sock, 32, 1)
        except OSError:
            data, fds = b'', []
        if not fds:
            return None  # the parent dropped the spare (stopping)
        listener = socket.socket(fileno=fds[0])
        try:
            sock.sendall(b'S')
        except OSError:
            pass
        sock.close()
        return listener, int(data or b'0')

    def drop_spare(self) -> None:
        spare, self.spare = self.spare, None
        if spare is not None:
            spare.sock.close()  # it reads EOF and exits

    def child(self, parent: int, started, listener_of) -> int:
        code = 1
        try:
            # A session (and process group) of its own, as an exec'd worker has: the
            # scheduler's autogroups are per session, and children sharing the fork
            # server's would share one worker's CPU time on a busy host (the preload pool
            # fell behind the exec pool under load, and was equal on an idle machine).
            os.setsid()
            if started is not None:
                os.close(started)
            # Not the fork server's handlers: a SIGTERM before serve() installs its own ends the child.
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
                signal.signal(sig, signal.SIG_DFL)
            signal.set_wakeup_fd(-1)
            die_with_parent(parent)
            self.chan.close()
            os.close(self.dir_fd)
            if self.shared_fd is not None:
                os.close(self.shared_fd)  # a worker serves on its own duplicate
            # The commands were fd 0: an application reading stdin gets EOF, as in a plain worker.
            null = os.open(os.devnull, os.O_RDONLY)  # fd 0 when the commands were there
            if null != 0:
                os.dup2(null, 0)
                os.close(null)
            self.wake_r.close()
            self.wake_w.close()
            if self.spare is not None:
                self.spare.sock.close()  # another child's channel
            got = listener_of()
            if got is None:
                return 0
            listener, max_requests = got
            listener.setblocking(True)
            code = serve(self.app, listener, self.protocol, self.mount, max_requests)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 0
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        return code

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.spare is not None and pid == self.spare.pid:
                self.drop_spare()  # made again at the next fork
                self.chan.send({'spare': None})
                continue
            wid = self.children.pop(pid, None)
            if wid is None:
                continue
            sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
            self.chan.send({
                'exited': wid, 'pid': pid,
                'code': os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                'signal': signal.Signals(sig).name if sig is not None else None,
            })


def wait_closed(fd: int) -> None:
    """Reads `fd` to EOF (the child closed its end, or died), then closes it."""
    try:
        while os.read(fd, 1):
            pass
    except OSError:
        pass
    os.close(fd)


def preload_main(app, args) -> int:
    fds = os.environ.pop('FCGI_PM_PRELOAD_FDS', None)
    try:
        numbers = [int(f) for f in (fds or '').split(',')]
        if len(numbers) not in (3, 4):
            raise ValueError(fds)
    except ValueError:
        raise SystemExit(f'{PROG}: --preload needs fcgi-pm (preload: true) to start it: '
                         f'FCGI_PM_PRELOAD_FDS is {fds!r}, not "COMMANDS,REPLIES,DIR[,SHARED]"') from None
    commands, replies, dir_fd = numbers[:3]
    shared_fd = numbers[3] if len(numbers) == 4 else None
    def warm() -> None:
        warm_up(app, args.warm, args.warm_request, args.script_name)
    warm()
    return ForkServer(app, args.protocol, args.script_name, Channel(commands, replies), dir_fd,
                      warm=warm, spares=args.spares, shared_fd=shared_fd).run()
