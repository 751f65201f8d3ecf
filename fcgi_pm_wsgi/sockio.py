"""Blocking socket I/O shared by the protocols: buffered reads, scatter-gather writes, and
closing without cutting a response the peer has not read yet."""

import select
import socket

from .errors import ClientGone

RECV_SIZE = 256 * 1024
# After the response, how long to wait for the peer to take the rest of an unread body
# before closing (closing with unread bytes would reset the connection and could cut
# the response the peer has not read yet).
LINGER_SECONDS = 5.0


class SocketReader:
    """Buffered reads from a blocking socket: exact byte counts, and whether bytes wait."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = bytearray()
        self.pos = 0
        self.eof = False

    def buffered(self) -> int:
        return len(self.buf) - self.pos

    def fill(self) -> bool:
        """One recv into the buffer; False at EOF."""
        if self.eof:
            return False
        if self.pos and self.pos >= len(self.buf) // 2:
            del self.buf[:self.pos]
            self.pos = 0
        try:
            chunk = self.sock.recv(RECV_SIZE)
        except (ConnectionResetError, BrokenPipeError):
            chunk = b''
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def socket_readable(self) -> bool:
        """The socket has bytes (or EOF) to read without blocking."""
        r, _, _ = select.select([self.sock], [], [], 0)
        return bool(r)

    def exactly(self, n: int):
        """n bytes, or None when EOF came first (a partial read stays buffered)."""
        while self.buffered() < n:
            if not self.fill():
                return None
        out = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return out

    def some(self, limit: int) -> bytes:
        """Up to `limit` bytes, at least one unless at EOF."""
        if not self.buffered() and not self.fill():
            return b''
        n = min(limit, self.buffered())
        out = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return out

    def read_until(self, byte: bytes, limit: int):
        """Bytes up to (not including) `byte`, which is consumed; None on EOF or past limit."""
        while True:
            i = self.buf.find(byte, self.pos, self.pos + limit + 1)
            if i >= 0:
                out = bytes(self.buf[self.pos:i])
                self.pos = i + 1
                return out
            if self.buffered() > limit or not self.fill():
                return None


def send_buffers(sock: socket.socket, bufs) -> None:
    """Writes every buffer (scatter-gather, no joining); raises ClientGone on a dead peer."""
    views = [memoryview(b).cast('B') for b in bufs if len(b)]
    try:
        while views:
            n = sock.sendmsg(views[:512])
            while n:
                if n >= len(views[0]):
                    n -= len(views[0])
                    views.pop(0)
                else:
                    views[0] = views[0][n:]
                    n = 0
    except (BrokenPipeError, ConnectionResetError) as e:
        raise ClientGone(e.errno, 'the front end closed the connection') from None


def linger_close(sock: socket.socket, reader, complete: bool = False) -> None:
    """Half-close, read (and drop) what the peer still sends until it closes, then close.

    `complete`: the whole request was read. Then, with no byte buffered or waiting, the
    close is at once: with nothing unread it sends a FIN, not a reset, and the process is
    free for its next connection instead of waiting for the peer's close."""
    if complete and (reader is None or not reader.buffered()):
        try:
            r, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):
            r = [sock]
        if not r:
            sock.close()
            return
    try:
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(LINGER_SECONDS)
        if reader is not None and not reader.eof:
            while sock.recv(RECV_SIZE):
                pass
    except OSError:
        pass
    finally:
        sock.close()
