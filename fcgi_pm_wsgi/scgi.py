"""SCGI (one request per connection): the netstring header block and serving a connection."""

import errno
import socket
import sys

from .authorizer import set_role
from .errors import ClientGone, ProtocolError, ResponseBroken, log
from .sockio import RECV_SIZE, SocketReader, linger_close, send_buffers
from .wsgi import EmptyInput, InputStream, Response, build_environ, call_app, content_length, error_head

MAX_SCGI_HEADER = 1024 * 1024


def decode_scgi_headers(block: bytes) -> dict:
    """The NUL-separated name/value block of an SCGI netstring. Raises ProtocolError."""
    if not block.endswith(b'\0'):
        raise ProtocolError('SCGI headers do not end with NUL')
    items = block[:-1].split(b'\0')
    if len(items) % 2:
        raise ProtocolError('SCGI headers are not name/value pairs')
    if items[0] != b'CONTENT_LENGTH':
        raise ProtocolError('SCGI headers do not start with CONTENT_LENGTH')
    return {items[i].decode('latin-1'): items[i + 1].decode('latin-1') for i in range(0, len(items), 2)}


class ScgiInput(InputStream):
    """The body after the SCGI netstring: exactly CONTENT_LENGTH bytes."""

    def __init__(self, reader: SocketReader, length: int):
        super().__init__()
        self.reader = reader
        self.left = length

    def _next_chunk(self) -> bytes:
        if self.left <= 0:
            return b''
        chunk = self.reader.some(min(self.left, RECV_SIZE))
        if not chunk:
            raise ClientGone(errno.ECONNRESET, 'connection closed before the whole request body arrived')
        self.left -= len(chunk)
        return chunk


class ScgiOut:
    def __init__(self, sock):
        self.sock = sock

    def send(self, bufs) -> None:
        send_buffers(self.sock, bufs)


def serve_scgi(sock: socket.socket, server) -> None:
    reader = SocketReader(sock)
    body = None
    try:
        size = reader.read_until(b':', 10)
        if size is None:
            if reader.buffered():
                raise ProtocolError('no netstring length')
            return  # closed before a request (a readiness probe): nothing to say
        server.busy = True
        if not size.isdigit() or int(size) > MAX_SCGI_HEADER:
            raise ProtocolError(f'bad netstring length {size[:20]!r}')
        block = reader.exactly(int(size) + 1)
        if block is None or block[-1:] != b',':
            raise ProtocolError('netstring not terminated by ","')
        params = decode_scgi_headers(block[:-1])
        length = content_length(params)
        if length is None:
            raise ProtocolError('CONTENT_LENGTH missing or not a number')
        authorizer = set_role(params)
        # An authorizer's body (fcgi-pm sends none) is not read; linger_close drops it.
        body = ScgiInput(reader, length)
        env = build_environ(params, EmptyInput() if authorizer else body, sys.stderr, server.mount)
        # SCGI ends a response by closing: what the response held goes out in one write
        # before the close (a write and a close cannot be merged into one call).
        send_buffers(sock, call_app(server.app, env, Response(ScgiOut(sock), env['REQUEST_METHOD'], authorizer)))
    except ProtocolError as e:
        log(f'bad SCGI request: {e}')
        try:
            send_buffers(sock, [error_head(400)])
        except ClientGone:
            pass
    except (ClientGone, ResponseBroken):
        pass
    finally:
        linger_close(sock, reader, complete=body is not None and body.left <= 0)
        server.request_done()
