"""The WSGI side (PEP 3333), whatever the protocol: environ from CGI params, wsgi.input,
start_response and the CGI response head, and one request's run through the application."""

import os
import re
import traceback
from urllib.parse import unquote_to_bytes

from .errors import PROG, ClientGone, ResponseBroken, log

HTTP_REASONS = {400: 'Bad Request', 500: 'Internal Server Error'}


def url_path(env: dict) -> str:
    """The request's path, %-decoded, as a latin-1 str (what CGI's PATH_INFO holds)."""
    uri = env.get('REQUEST_URI') or env.get('DOCUMENT_URI')
    if uri:
        path = uri.split('?', 1)[0]
        if '://' in path:  # absolute-form request target
            path = '/' + path.split('://', 1)[1].partition('/')[2]
        return unquote_to_bytes(path.encode('latin-1')).decode('latin-1')
    return env.get('SCRIPT_NAME', '') + env.get('PATH_INFO', '')


def split_script_path(env: dict, mount=None) -> None:
    """Sets SCRIPT_NAME and PATH_INFO the way the application must see them.

    `mount` (--script-name): the URL prefix the application is served under; the rest of
    the path becomes PATH_INFO. Without it, the front end's split is kept when it sent
    PATH_INFO. When it did not (nginx's stock fastcgi_params put the whole path in
    SCRIPT_NAME, or that path and fastcgi_index; its scgi_params send neither), the
    application is taken to be mounted at the root unless SCRIPT_NAME is a prefix of the
    request path ending at a '/' of it and shorter than it: '/app' or '/app/' of
    '/app/page/' is a mount point, '/page/' of '/page/' the whole path.
    """
    if mount is not None:
        mount = mount.rstrip('/')
        if 'PATH_INFO' in env:
            full = env.get('SCRIPT_NAME', '') + env['PATH_INFO']
        else:
            full = url_path(env)
        if full == mount or full.startswith(mount + '/'):
            env['SCRIPT_NAME'], env['PATH_INFO'] = mount, full[len(mount):]
        else:
            env['SCRIPT_NAME'], env['PATH_INFO'] = '', full
        return
    if 'PATH_INFO' in env:
        env.setdefault('SCRIPT_NAME', '')
        return
    given = env.get('SCRIPT_NAME', '')
    script = given.rstrip('/')
    full = url_path(env)
    if script and given != full and full.startswith(script + '/') and 'REQUEST_URI' in env:
        env['SCRIPT_NAME'], env['PATH_INFO'] = script, full[len(script):]
    else:
        env['SCRIPT_NAME'], env['PATH_INFO'] = '', full


def build_environ(params: dict, wsgi_input, errors, mount=None) -> dict:
    env = dict(params)
    split_script_path(env, mount)
    env.setdefault('REQUEST_METHOD', 'GET')
    env.setdefault('QUERY_STRING', '')
    env.setdefault('SERVER_NAME', 'localhost')
    env.setdefault('SERVER_PORT', '80')
    env.setdefault('SERVER_PROTOCOL', 'HTTP/1.0')
    # PEP 3333: the body's type and length are CONTENT_TYPE / CONTENT_LENGTH only.
    env.pop('HTTP_CONTENT_TYPE', None)
    env.pop('HTTP_CONTENT_LENGTH', None)
    https = env.get('HTTPS', '').lower() in ('on', '1', 'yes')
    scheme = env.get('REQUEST_SCHEME', '').lower()
    env['wsgi.version'] = (1, 0)
    env['wsgi.url_scheme'] = 'https' if https or scheme == 'https' else 'http'
    env['wsgi.input'] = wsgi_input
    env['wsgi.input_terminated'] = True
    env['wsgi.errors'] = errors
    env['wsgi.multithread'] = False
    env['wsgi.multiprocess'] = True
    env['wsgi.run_once'] = False
    env['wsgi.file_wrapper'] = FileWrapper
    return env


def content_length(env: dict):
    """CONTENT_LENGTH as an int, or None when absent, empty or not a number."""
    v = env.get('CONTENT_LENGTH', '').strip()
    return int(v) if v.isdigit() else None


class FileWrapper:
    """wsgi.file_wrapper: a file-like object as an iterable of blocks, closed by close()."""

    def __init__(self, filelike, blksize: int = 65536):
        self.filelike = filelike
        self.blksize = blksize
        if hasattr(filelike, 'close'):
            self.close = filelike.close

    def __iter__(self):
        return self

    def __next__(self):
        data = self.filelike.read(self.blksize)
        if data:
            return data
        raise StopIteration


class InputStream:
    """wsgi.input: read/readline/readlines/iteration over chunks from `_next_chunk`."""

    def __init__(self):
        self._buf = b''
        self._done = False

    def _next_chunk(self) -> bytes:  # b'' at the end of the body
        raise NotImplementedError

    def _more(self) -> bool:
        if self._done:
            return False
        chunk = self._next_chunk()
        if not chunk:
            self._done = True
            return False
        self._buf = self._buf + chunk if self._buf else chunk
        return True

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            parts = [self._buf]
            self._buf = b''
            while not self._done:
                chunk = self._next_chunk()
                if not chunk:
                    self._done = True
                else:
                    parts.append(chunk)
            return b''.join(parts)
        if not self._buf:
            self._more()
        out, self._buf = self._buf[:size], self._buf[size:]
        return out

    def readline(self, size: int = -1) -> bytes:
        while True:
            i = self._buf.find(b'\n')
            if i >= 0 and (size is None or size < 0 or i < size):
                out, self._buf = self._buf[:i + 1], self._buf[i + 1:]
                return out
            if size is not None and 0 <= size <= len(self._buf):
                out, self._buf = self._buf[:size], self._buf[size:]
                return out
            if not self._more():
                out, self._buf = self._buf, b''
                return out

    def readlines(self, hint: int = -1) -> list:
        lines, total = [], 0
        while True:
            line = self.readline()
            if not line:
                return lines
            lines.append(line)
            total += len(line)
            if hint is not None and 0 < hint <= total:
                return lines

    def __iter__(self):
        return self

    def __next__(self) -> bytes:
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    def close(self) -> None:
        pass


class EmptyInput(InputStream):
    """wsgi.input of an authorizer request: the specification gives it no body."""

    def _next_chunk(self) -> bytes:
        return b''


STATUS_RE = re.compile(r'^[1-9][0-9]{2} [^\r\n]*$')
TOKEN_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


class Response:
    """start_response(), write() and the CGI response head; `out` sends bytes to the front end.

    For an authorizer request (`authorizer`) a 200 is sent as its head alone.

    What is already known to be the end of the body (every part of a list result, the
    write that completes Content-Length, the head of an empty body) is held in `held`
    rather than sent: the caller sends it with the end of the response (FastCGI's
    END_REQUEST) in one write, so the front end wakes once. A streamed chunk is never
    held: the next write sends what is held first.
    """

    def __init__(self, out, method: str, authorizer: bool = False):
        self.out = out
        self.method = method
        self.authorizer = authorizer
        self.status = None
        self.headers = None
        self.head_sent = False
        self.held = []
        self.hold_all = False  # the application returned its whole body (a list)
        self.body_left = None  # bytes still due by Content-Length, once the head is out

    def start_response(self, status, headers, exc_info=None):
        if exc_info:
            try:
                if self.head_sent:
                    raise exc_info[1].with_traceback(exc_info[2])
            finally:
                exc_info = None  # no reference cycle through the traceback
        elif self.status is not None:
            raise AssertionError('start_response() called again without exc_info')
        if type(status) is not str or not STATUS_RE.match(status):
            raise AssertionError(f'status must be a str like "200 OK", got {status!r}')
        if type(headers) is not list:
            raise AssertionError(f'headers must be a list, got {type(headers).__name__}')
        for h in headers:
            if type(h) is not tuple or len(h) != 2 or type(h[0]) is not str or type(h[1]) is not str:
                raise AssertionError(f'each header must be a (str, str) tuple, got {h!r}')
            if not TOKEN_RE.match(h[0]) or h[0].lower() == 'status' or '\r' in h[1] or '\n' in h[1]:
                raise AssertionError(f'invalid header {h!r}')
        self.status = status
        self.headers = headers
        return self.write

    def has_header(self, name: str) -> bool:
        name = name.lower()
        return any(k.lower() == name for k, _ in self.headers)

    @property
    def head_only(self) -> bool:
        """An authorizer's 200: the front end ignores its body (FastCGI 6.3), so none is sent."""
        return self.authorizer and self.status is not None and self.status[:3] == '200'

    def head_bytes(self) -> bytes:
        lines = [f'Status: {self.status}\r\n']
        headers = self.headers
        if self.head_only:  # a length would announce a body that is not sent
            headers = [(k, v) for k, v in headers if k.lower() != 'content-length']
        lines += [f'{k}: {v}\r\n' for k, v in headers]
        lines.append('\r\n')
        try:
            return ''.join(lines).encode('latin-1')
        except UnicodeEncodeError:
            raise AssertionError('response headers must be latin-1 strings') from None

    def body_allowed(self) -> bool:
        code = int(self.status[:3])
        return not (code < 200 or code in (204, 304) or self.head_only)

    def write(self, data) -> None:
        if self.status is None:
            raise AssertionError('write() before start_response()')
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f'the application must write/yield bytes, got {type(data).__name__}')
        if not self.head_sent:
            self.head_sent = True
            self.body_left = self.declared_length()
            bufs = [self.head_bytes()] if self.head_only else [self.head_bytes(), data]
        elif len(data) and not self.head_only:
            bufs = [data]
        else:
            return
        if self.body_left is not None and not self.head_only:
            self.body_left -= len(data)
        if self.hold_all or (self.body_left is not None and self.body_left <= 0):
            self.held += bufs
        else:
            self.out.send(self.held + bufs)
            self.held = []

    def declared_length(self):
        for k, v in self.headers:
            if k.lower() == 'content-length':
                return int(v) if v.strip().isdigit() else None
        return None

    def flush(self) -> None:
        """Sends what is held (before cutting a response: what the application made goes out)."""
        if self.held:
            bufs, self.held = self.held, []
            self.out.send(bufs)

    def finish(self) -> None:
        """The iterable is exhausted: send the head if nothing was sent yet."""
        if self.status is None:
            raise AssertionError('the application returned without calling start_response()')
        if not self.head_sent:
            if not self.has_header('Content-Length') and self.body_allowed() and self.method != 'HEAD':
                self.headers.append(('Content-Length', '0'))
            self.hold_all = True  # the end of the body: the head goes with the end
            self.write(b'')

    def set_length_for(self, result) -> None:
        """A list or tuple result has a known length: announce it (as wsgiref does)."""
        if self.head_sent or self.status is None or self.has_header('Content-Length') or not self.body_allowed():
            return
        if all(isinstance(b, (bytes, bytearray)) for b in result):
            self.headers.append(('Content-Length', str(sum(len(b) for b in result))))

    def hold_whole(self, result) -> None:
        """A list or tuple of bytes is the whole body: hold it all for the end of the response."""
        if all(isinstance(b, (bytes, bytearray, memoryview)) for b in result):
            self.hold_all = True


def error_head(code: int) -> bytes:
    reason = HTTP_REASONS.get(code, 'Error')
    body = f'{code} {reason}\n'.encode()
    return (f'Status: {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n'
            f'Content-Length: {len(body)}\r\n\r\n').encode() + body


def log_exception(errors, env, what: str) -> None:
    where = f"{env.get('REQUEST_METHOD', '?')} {env.get('SCRIPT_NAME', '')}{env.get('PATH_INFO', '')}"
    try:
        errors.write(f'{PROG}[{os.getpid()}]: {what} ({where}):\n{traceback.format_exc()}')
        errors.flush()
    except Exception:  # the error stream itself is broken: still say something
        log(f'{what} ({where}):\n{traceback.format_exc()}')


def call_app(app, env: dict, resp: Response) -> list:
    """Runs one request through the application, PEP 3333 style; returns the buffers held
    for the end of the response (Response.held), which the caller sends with that end.

    An exception before the head went out becomes a 500 with the traceback on
    wsgi.errors; after it, ResponseBroken (the caller cuts the response so the front end
    does not take a truncated body for a whole one). ClientGone propagates.
    """
    result = None
    try:
        try:
            result = app(env, resp.start_response)
            if isinstance(result, (list, tuple)):
                resp.set_length_for(result)
                resp.hold_whole(result)
            for data in result:
                if not isinstance(data, (bytes, bytearray, memoryview)):
                    raise TypeError(f'the application must yield bytes, got {type(data).__name__}')
                if len(data):
                    resp.write(data)
                if resp.head_sent and resp.head_only:
                    break  # the rest of a body that is not sent need not be made
            resp.finish()
        finally:
            close = getattr(result, 'close', None)
            if close is not None:
                try:
                    close()
                except Exception:
                    # The response itself may be complete: log, do not cut it.
                    log_exception(env['wsgi.errors'], env, 'error in close() of the response iterable')
    except ClientGone:
        raise
    except Exception:
        log_exception(env['wsgi.errors'], env, 'application error')
        if resp.head_sent:
            resp.flush()
            raise ResponseBroken() from None
        resp.out.send([error_head(500)])
    held, resp.held = resp.held, []
    return held
