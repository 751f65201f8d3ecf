"""Runs bin/fcgi-pm-wsgi the way fcgi-pm does (a listening Unix socket as fd 0) and
talks to it with a FastCGI / SCGI client written here from the specification, not
borrowed from the adapter, so a shared misunderstanding cannot hide a bug.
"""

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
ADAPTER = os.path.join(REPO, 'bin', 'fcgi-pm-wsgi')
# The package's modules, for unit tests of their pure parts.
if REPO not in sys.path:
    sys.path.append(REPO)

BEGIN_REQUEST, ABORT_REQUEST, END_REQUEST, PARAMS, STDIN, STDOUT, STDERR = 1, 2, 3, 4, 5, 6, 7
GET_VALUES, GET_VALUES_RESULT, UNKNOWN_TYPE = 9, 10, 11
RESPONDER, AUTHORIZER, FILTER = 1, 2, 3
REQUEST_COMPLETE, CANT_MPX_CONN, OVERLOADED, UNKNOWN_ROLE = 0, 1, 2, 3

TIMEOUT = 10.0


# ---- encoding ----------------------------------------------------------------------------


def record(rtype, rid, content=b'', padding=None):
    pad = (-len(content) % 8) if padding is None else padding
    return struct.pack('>BBHHBB', 1, rtype, rid, len(content), pad, 0) + content + b'\0' * pad


def nv_length(n):
    return struct.pack('>B', n) if n < 128 else struct.pack('>I', n | 0x80000000)


def name_values(pairs):
    out = b''
    for k, v in pairs.items() if isinstance(pairs, dict) else pairs:
        kb = k if isinstance(k, bytes) else k.encode('utf-8')
        vb = v if isinstance(v, bytes) else v.encode('utf-8')
        out += nv_length(len(kb)) + nv_length(len(vb)) + kb + vb
    return out


def parse_name_values(data):
    out, pos = {}, 0
    while pos < len(data):
        lens = []
        for _ in range(2):
            if data[pos] < 128:
                lens.append(data[pos])
                pos += 1
            else:
                lens.append(struct.unpack('>I', data[pos:pos + 4])[0] & 0x7FFFFFFF)
                pos += 4
        k = data[pos:pos + lens[0]]
        pos += lens[0]
        v = data[pos:pos + lens[1]]
        pos += lens[1]
        out[k.decode()] = v.decode()
    return out


def begin(rid, role=RESPONDER, keep=True):
    return record(BEGIN_REQUEST, rid, struct.pack('>HB5x', role, 1 if keep else 0))


def stream(rtype, rid, data, piece=65535):
    out = b''.join(record(rtype, rid, data[i:i + piece]) for i in range(0, len(data), piece))
    return out + record(rtype, rid)


def base_params(path='/hello', query='', method='GET', **extra):
    p = {
        'GATEWAY_INTERFACE': 'CGI/1.1',
        'SERVER_SOFTWARE': 'adapter-test',
        'SERVER_NAME': 'localhost',
        'SERVER_PORT': '80',
        'SERVER_PROTOCOL': 'HTTP/1.1',
        'REMOTE_ADDR': '127.0.0.1',
        'REQUEST_METHOD': method,
        'SCRIPT_NAME': '',
        'PATH_INFO': path,
        'QUERY_STRING': query,
        'REQUEST_URI': path + ('?' + query if query else ''),
        'CONTENT_TYPE': '',
        'CONTENT_LENGTH': '',
    }
    p.update(extra)
    return p


# ---- responses -----------------------------------------------------------------------


class CgiResult:
    def __init__(self, raw):
        self.raw = raw
        head, sep, self.body = raw.partition(b'\r\n\r\n')
        if not sep:
            raise AssertionError(f'no end of CGI head in {raw[:200]!r}')
        self.headers = []
        for line in head.decode('latin-1').split('\r\n'):
            k, _, v = line.partition(':')
            self.headers.append((k.strip(), v.strip()))
        status = self.header('Status') or '200 OK'
        self.status = int(status[:3])
        self.reason = status[4:]

    def header(self, name):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None


class FcgiResponse:
    def __init__(self, rid, records):
        self.rid = rid
        self.records = [r for r in records if r[1] == rid]
        self.stdout = b''.join(c for t, _, c in self.records if t == STDOUT)
        self.stderr = b''.join(c for t, _, c in self.records if t == STDERR)
        ends = [c for t, _, c in self.records if t == END_REQUEST]
        self.ended = bool(ends)
        self.app_status, self.protocol_status = struct.unpack('>IB3x', ends[0]) if ends else (None, None)

    @property
    def cgi(self):
        return CgiResult(self.stdout)


class FcgiConn:
    """A FastCGI connection: send records, read records with a deadline."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(TIMEOUT)
        self.sock.connect(path)
        self.buf = b''
        self.records = []
        self.closed = False

    def send(self, *parts):
        self.sock.sendall(b''.join(parts))

    def request(self, rid=1, params=None, body=b'', keep=True, role=RESPONDER):
        self.send(begin(rid, role, keep), stream(PARAMS, rid, name_values(params or base_params())), stream(STDIN, rid, body))

    def _read_some(self, deadline):
        self.sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = self.sock.recv(1 << 20)
        except socket.timeout:
            return False
        except ConnectionResetError:
            chunk = b''
        if not chunk:
            self.closed = True
            return False
        self.buf += chunk
        while len(self.buf) >= 8:
            _, t, rid, n, pad, _ = struct.unpack('>BBHHBB', self.buf[:8])
            if len(self.buf) < 8 + n + pad:
                break
            self.records.append((t, rid, self.buf[8:8 + n]))
            self.buf = self.buf[8 + n + pad:]
        return True

    def wait_for(self, pred, timeout=TIMEOUT, what='record'):
        """The first record matching pred(type, rid, content); AssertionError on timeout/close."""
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for r in self.records[seen:]:
                if pred(*r):
                    return r
            seen = len(self.records)
            if self.closed or time.monotonic() >= deadline:
                raise AssertionError(f'no {what} ({"closed" if self.closed else "timeout"}); got {self.summary()}')
            self._read_some(deadline)

    def response(self, rid=1, timeout=TIMEOUT):
        self.wait_for(lambda t, r, c: t == END_REQUEST and r == rid, timeout, f'END_REQUEST for {rid}')
        resp = FcgiResponse(rid, self.records)
        self.records = [r for r in self.records if r[1] != rid]
        return resp

    def wait_closed(self, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        while not self.closed and time.monotonic() < deadline:
            self._read_some(deadline)
        return self.closed

    def summary(self):
        return [(t, rid, len(c)) for t, rid, c in self.records[-20:]]

    def close(self):
        self.sock.close()


def scgi_request(path, params, body=b'', timeout=TIMEOUT, raw=None):
    """Sends one SCGI request and returns everything received until the server closed."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    if raw is None:
        items = [('CONTENT_LENGTH', str(len(body))), ('SCGI', '1')] + [(k, v) for k, v in params.items() if k not in ('CONTENT_LENGTH', 'SCGI')]
        head = b''.join(k.encode() + b'\0' + v.encode('utf-8') + b'\0' for k, v in items)
        raw = str(len(head)).encode() + b':' + head + b',' + body
    # Send from a thread while reading, as a front end does: an application may answer
    # before it has read the body.
    import threading
    sender = threading.Thread(target=_send_quietly, args=(s, raw), daemon=True)
    sender.start()
    chunks = []
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    sender.join(timeout)
    s.close()
    return b''.join(chunks)


def _send_quietly(s, data):
    try:
        s.sendall(data)
    except OSError:
        pass


# ---- the adapter process ----------------------------------------------------------------


class Adapter:
    """bin/fcgi-pm-wsgi with a listening Unix socket as fd 0, stderr to a file."""

    def __init__(self, protocol='--fastcgi', app='wsgi_apps:app', extra=(), command=(sys.executable, ADAPTER), env=None):
        self.dir = tempfile.mkdtemp(prefix='fpm-py-')
        os.chmod(self.dir, 0o700)
        self.path = os.path.join(self.dir, 'app.sock')
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.path)
        listener.listen(64)
        self.stderr_path = os.path.join(self.dir, 'stderr.log')
        env = {'PATH': os.environ.get('PATH', '/usr/bin:/bin'), 'PYTHONDONTWRITEBYTECODE': '1', 'LANG': 'C.UTF-8', **(env or {})}
        with open(self.stderr_path, 'wb') as err:
            self.proc = subprocess.Popen(
                [*command, protocol, '--path', HERE, *extra, app],
                stdin=listener.fileno(), stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=self.dir,
            )
        listener.close()  # the child has its own copy, as with fcgi-pm
        # Ready when it accepted a probe (connect, FIN, wait for its close), as fcgi-pm checks.
        deadline = time.monotonic() + TIMEOUT
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f'adapter exited {self.proc.returncode}: {self.stderr()}')
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(0.5)
            try:
                s.connect(self.path)
                s.shutdown(socket.SHUT_WR)
                if s.recv(1) == b'':
                    break
            except (socket.timeout, OSError):
                pass
            finally:
                s.close()
            if time.monotonic() > deadline:
                raise AssertionError('adapter did not start accepting')

    def fcgi(self):
        return FcgiConn(self.path)

    def scgi(self, params, body=b'', **kw):
        return scgi_request(self.path, params, body, **kw)

    def stderr(self):
        with open(self.stderr_path, 'rb') as f:
            return f.read().decode('utf-8', 'replace')

    def wait_exit(self, timeout=TIMEOUT):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)


class AdapterCase(unittest.TestCase):
    """One adapter process (speaking PROTOCOL) for all the tests of a class."""

    PROTOCOL = '--fastcgi'

    @classmethod
    def setUpClass(cls):
        cls.adapter = Adapter(cls.PROTOCOL)

    @classmethod
    def tearDownClass(cls):
        cls.adapter.stop()


class FcgiAdapterCase(AdapterCase):
    """... and a fresh FastCGI connection to it for each test (self.conn)."""

    def setUp(self):
        self.conn = self.adapter.fcgi()

    def tearDown(self):
        self.conn.close()
