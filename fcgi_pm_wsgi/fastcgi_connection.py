"""One FastCGI front-end connection: records in order, one request at a time, its STDIN
read while the application reads wsgi.input, FCGI_ABORT_REQUEST noticed while it writes."""

import errno
import socket
import sys
from collections import deque

from .authorizer import set_role
from .errors import ClientGone, ProtocolError, ResponseBroken, log
from .fastcgi import (
    CAPABILITIES, FCGI_ABORT_REQUEST, FCGI_AUTHORIZER, FCGI_BEGIN_REQUEST, FCGI_CANT_MPX_CONN,
    FCGI_GET_VALUES, FCGI_GET_VALUES_RESULT, FCGI_KEEP_CONN, FCGI_PARAMS, FCGI_REQUEST_COMPLETE,
    FCGI_RESPONDER, FCGI_STDERR, FCGI_STDIN, FCGI_STDOUT, FCGI_UNKNOWN_ROLE, FCGI_UNKNOWN_TYPE,
    KNOWN_TYPES, MAX_PARAMS_BYTES, RecordReader, decode_name_values, encode_end_request,
    encode_name_values, encode_record, record_header, stream_records,
)
from .sockio import linger_close, send_buffers
from .wsgi import EmptyInput, InputStream, Response, build_environ, call_app

# STDIN bytes read ahead while the application writes its response (to notice an
# FCGI_ABORT_REQUEST) before we stop looking.
MAX_READ_AHEAD = 4 * 1024 * 1024


class FcgiInput(InputStream):
    """The STDIN stream of one FastCGI request, read record by record as the app asks."""

    def __init__(self, request):
        super().__init__()
        self.request = request

    def _next_chunk(self) -> bytes:
        return self.request.next_stdin()


class ErrorStream:
    """wsgi.errors over FastCGI: each write becomes FCGI_STDERR records of the request."""

    def __init__(self, request):
        self.request = request

    def write(self, s) -> int:
        data = s.encode('utf-8', 'replace') if isinstance(s, str) else bytes(s)
        if data:
            self.request.send_stderr(data)
        return len(s)

    def writelines(self, seq) -> None:
        for s in seq:
            self.write(s)

    def flush(self) -> None:
        pass


class FcgiRequest:
    def __init__(self, conn, request_id: int, keep_conn: bool, role: int):
        self.conn = conn
        self.id = request_id
        self.keep_conn = keep_conn
        self.role = role
        # Also set when the params say FCGI_ROLE=AUTHORIZER (run()).
        self.authorizer = role == FCGI_AUTHORIZER
        self.params = []
        self.params_len = 0
        self.params_done = False
        self.stdin = deque()
        self.stdin_bytes = 0
        self.stdin_done = False
        self.aborted = False

    # Called by wsgi.input: the next STDIN chunk, reading records as needed.
    def next_stdin(self) -> bytes:
        while not self.stdin and not self.stdin_done:
            if self.aborted:
                raise ClientGone(errno.ECONNABORTED, 'the front end aborted the request')
            self.conn.pump()
        if self.stdin:
            chunk = self.stdin.popleft()
            self.stdin_bytes -= len(chunk)
            return chunk
        return b''

    # Response output (Response.out).
    def send(self, bufs) -> None:
        if self.aborted:
            raise ClientGone(errno.ECONNABORTED, 'the front end aborted the request')
        self.conn.poll()
        if self.aborted:
            raise ClientGone(errno.ECONNABORTED, 'the front end aborted the request')
        out = []
        for b in bufs:
            if len(b):
                out += stream_records(FCGI_STDOUT, self.id, b)
        send_buffers(self.conn.sock, out)

    def send_stderr(self, data: bytes) -> None:
        if not self.conn.current is self:
            # The request ended; a stream kept by the application still works.
            sys.stderr.write(data.decode('utf-8', 'replace'))
            return
        try:
            send_buffers(self.conn.sock, stream_records(FCGI_STDERR, self.id, data))
        except ClientGone:
            sys.stderr.write(data.decode('utf-8', 'replace'))


class FcgiConnection:
    """One front-end connection: records in order; a responder request runs when its
    PARAMS are complete, and its STDIN is read while the application reads wsgi.input."""

    def __init__(self, sock: socket.socket, server):
        self.sock = sock
        self.server = server
        self.reader = RecordReader(sock)
        self.current = None
        self.served = 0

    def serve(self) -> None:
        try:
            while True:
                if self.current is None and self.served and not self.server.wait_next_record(self):
                    return
                rec = self.reader.read_record()
                if rec is None:
                    return
                if self.handle(*rec) == 'close':
                    return
        except ProtocolError as e:
            log(f'closing a FastCGI connection: {e}')
        except ClientGone:
            pass
        finally:
            if self.current is None or self.current.keep_conn:
                self.sock.close()
            else:
                linger_close(self.sock, self.reader, complete=self.current.stdin_done)

    def pump(self) -> None:
        """Reads and handles one record while a request runs (for wsgi.input)."""
        rec = self.reader.read_record()
        if rec is None:
            raise ClientGone(errno.ECONNRESET, 'the front end closed the connection during the request')
        self.handle(*rec)

    def poll(self) -> None:
        """Handles records already sent (ABORT_REQUEST, GET_VALUES, more STDIN) without
        blocking, so a long response notices that the front end gave up on it."""
        while self.current is None or self.current.stdin_bytes < MAX_READ_AHEAD:
            if not self.reader.whole_record_buffered():
                if self.reader.eof or not self.reader.socket_readable():
                    return
                if not self.reader.fill():
                    raise ClientGone(errno.ECONNRESET, 'the front end closed the connection during the request')
                continue
            self.handle(*self.reader.read_record())

    def send(self, data: bytes) -> None:
        send_buffers(self.sock, [data])

    def handle(self, rtype: int, rid: int, content: bytes):
        req = self.current
        if rid == 0:
            if rtype == FCGI_GET_VALUES:
                names = [n for n, _ in decode_name_values(content)]
                answer = [(n, CAPABILITIES[n]) for n in names if n in CAPABILITIES]
                self.send(encode_record(FCGI_GET_VALUES_RESULT, 0, encode_name_values(answer)))
            elif rtype not in KNOWN_TYPES or rtype in (FCGI_GET_VALUES_RESULT, FCGI_UNKNOWN_TYPE):
                self.send(encode_record(FCGI_UNKNOWN_TYPE, 0, bytes((rtype,)) + b'\0' * 7))
            return None
        if rtype == FCGI_BEGIN_REQUEST:
            if len(content) != 8:
                raise ProtocolError('BEGIN_REQUEST body is not 8 bytes')
            role = (content[0] << 8) | content[1]
            keep = bool(content[2] & FCGI_KEEP_CONN)
            if req is not None:
                if rid != req.id:
                    # One request at a time: the spec's answer to a second id.
                    self.send(encode_end_request(rid, 0, FCGI_CANT_MPX_CONN))
                return None
            if role not in (FCGI_RESPONDER, FCGI_AUTHORIZER):
                self.send(encode_end_request(rid, 0, FCGI_UNKNOWN_ROLE))
                return None if keep else 'close'
            self.current = FcgiRequest(self, rid, keep, role)
            self.server.busy = True
            return None
        if req is None or rid != req.id:
            return None  # records of a request that ended or was refused
        if rtype == FCGI_PARAMS:
            if req.params_done:
                return None
            if content:
                req.params_len += len(content)
                if req.params_len > MAX_PARAMS_BYTES:
                    raise ProtocolError(f'PARAMS over {MAX_PARAMS_BYTES} bytes')
                req.params.append(content)
                return None
            req.params_done = True
            return self.run(req)
        if rtype == FCGI_STDIN:
            if req.stdin_done:
                return None
            # An authorizer gets no body: fcgi-pm refuses an authorizer request with one
            # before it reaches a worker, and what another front end sends anyway is
            # dropped, so it can neither reach the application nor pile up in memory.
            if content and not req.authorizer:
                req.stdin.append(content)
                req.stdin_bytes += len(content)
            else:
                req.stdin_done = True
            return None
        if rtype == FCGI_ABORT_REQUEST:
            req.aborted = True
            if not req.params_done:
                return self.end(req, 1)
            return None
        if rtype not in KNOWN_TYPES:
            self.send(encode_record(FCGI_UNKNOWN_TYPE, 0, bytes((rtype,)) + b'\0' * 7))
        return None  # FCGI_DATA (filter role only) and stray types

    def run(self, req: FcgiRequest):
        params = dict(decode_name_values(b''.join(req.params)))
        req.params = []
        req.authorizer = set_role(params, req.role)
        if req.authorizer:
            req.stdin.clear()  # sent before the params ended by a responder-form request
            req.stdin_bytes = 0
        errors = ErrorStream(req)
        env = build_environ(params, EmptyInput() if req.authorizer else FcgiInput(req), errors, self.server.mount)
        resp = Response(req, env['REQUEST_METHOD'], req.authorizer)
        status = 0
        tail = []
        try:
            tail = call_app(self.server.app, env, resp)
        except ResponseBroken:
            self.current = None
            self.server.request_done()
            return 'close'  # no END_REQUEST: the front end sees a cut response
        except ClientGone:
            if not req.aborted:
                self.current = None
                self.server.request_done()
                return 'close'
            status = 1
        return self.end(req, status, tail)

    def end(self, req: FcgiRequest, app_status: int, tail=()):
        """The last STDOUT data (`tail`, held by the response), the empty STDOUT record and
        END_REQUEST, in one write: the front end reads the end of a response once."""
        keep = req.keep_conn
        self.served += 1
        if req.aborted and tail:
            tail, app_status = (), 1  # as when a send notices the abort
        out = []
        for b in tail:
            if len(b):
                out += stream_records(FCGI_STDOUT, req.id, b)
        try:
            send_buffers(self.sock, out + [record_header(FCGI_STDOUT, req.id, 0), encode_end_request(req.id, app_status, FCGI_REQUEST_COMPLETE)])
        finally:
            self.current = None if keep else req
            self.server.request_done()
        return None if keep else 'close'
