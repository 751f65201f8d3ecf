"""The plain process model: one process, one connection and one request at a time, on a
listening socket from fd 0 (FCGI_LISTENSOCK_FILENO) or bound to an address."""

import errno
import os
import select
import signal
import socket
import stat

from .errors import PROG, log
from .fastcgi_connection import FcgiConnection
from .scgi import serve_scgi



class Server:
    def __init__(self, app, listener: socket.socket, protocol: str, mount=None, max_requests: int = 0):
        self.app = app
        self.listener = listener
        self.protocol = protocol
        self.mount = mount
        # Exit (0) after this many requests; 0: never. A process manager that does not see
        # the requests (fcgi-pm's accept: direct) recycles workers this way, as php-cgi's
        # PHP_FCGI_MAX_REQUESTS does.
        self.max_requests = max_requests
        self.served = 0
        self.busy = False
        self.stopping = False
        # A signal's byte (signal.set_wakeup_fd): an idle wait that began just after the
        # interpreter last looked for signals still ends at once (select sees no EINTR then).
        # A pipe, not a socketpair: the worker's sockets stay its listener and connections.
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)

    def on_signal(self, signum, frame) -> None:
        self.stopping = True
        if not self.busy:
            raise SystemExit(0)

    def request_done(self) -> None:
        if self.busy:
            self.served += 1
        self.busy = False
        if self.stopping or (self.max_requests > 0 and self.served >= self.max_requests):
            raise SystemExit(0)

    def wait_next_record(self, conn: FcgiConnection) -> bool:
        """Between requests on a kept connection: True when the connection has bytes (or
        EOF) to read; False when another connection waits to be accepted instead, since
        this process serves one connection at a time (a front end that keeps several
        connections open to one worker would otherwise wait on the idle one)."""
        if conn.reader.buffered():
            return True
        r, _, _ = select.select([conn.sock, self.listener, self.wake_r], [], [])
        if self.wake_r in r:
            self.drain_wakeups()
        return conn.sock in r

    def drain_wakeups(self) -> None:
        try:
            while os.read(self.wake_r, 64):
                pass
        except BlockingIOError:
            pass

    def serve_forever(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except InterruptedError:
                continue
            except OSError as e:
                if e.errno in (errno.ECONNABORTED, errno.EPROTO, errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    log(f'accept: {e}')
                    continue
                raise
            sock.setblocking(True)
            if self.protocol == 'scgi':
                serve_scgi(sock, self)
            else:
                FcgiConnection(sock, self).serve()


def listener_from_fd0() -> socket.socket:
    try:
        st = os.fstat(0)
    except OSError:
        st = None
    if st is None or not stat.S_ISSOCK(st.st_mode):
        raise SystemExit(f'{PROG}: fd 0 is not a listening socket; run me under fcgi-pm (socket: fd0) '
                         f'or spawn-fcgi, or give --socket PATH')
    # Move the listener off fd 0 so an application reading sys.stdin gets EOF, not our socket.
    fd = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sock = socket.socket(fileno=fd)
    sock.setblocking(True)
    return sock


def listener_from_address(addr: str) -> socket.socket:
    if addr.startswith('unix:'):
        addr = addr[5:]
    if '/' in addr or ':' not in addr:
        try:
            if stat.S_ISSOCK(os.stat(addr).st_mode):
                os.unlink(addr)  # stale socket from an earlier run
        except FileNotFoundError:
            pass
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(addr)
    else:
        host, _, port = addr.rpartition(':')
        host = host.strip('[]') or '127.0.0.1'
        family = socket.AF_INET6 if ':' in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, int(port)))
    sock.listen(128)
    return sock


def max_requests_from_env() -> int:
    """FCGI_PM_MAX_REQUESTS (fcgi-pm sets it for accept: direct pools), 0 when unset."""
    v = os.environ.get('FCGI_PM_MAX_REQUESTS', '').strip()
    return int(v) if v.isdigit() else 0


def serve(app, listener: socket.socket, protocol: str, mount, max_requests: int = 0) -> int:
    server = Server(app, listener, protocol, mount, max_requests)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, server.on_signal)
    signal.set_wakeup_fd(server.wake_w, warn_on_full_buffer=False)
    try:
        server.serve_forever()
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 0
    return 0
