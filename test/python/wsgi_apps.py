"""WSGI applications the adapter tests run under bin/fcgi-pm-wsgi (`wsgi_apps:app`).

One dispatcher on PATH_INFO; each route exercises one part of PEP 3333. Routes report
what they saw as JSON, and write progress markers to wsgi.errors so a test can wait
for "the application is now at this point" instead of sleeping.
"""

import hashlib
import json
import os
import sys
import time
from urllib.parse import parse_qs


def _json(start_response, obj, status='200 OK'):
    body = json.dumps(obj, sort_keys=True).encode()
    start_response(status, [('Content-Type', 'application/json'), ('Content-Length', str(len(body)))])
    return [body]


def _query(environ):
    return {k: v[0] for k, v in parse_qs(environ.get('QUERY_STRING', ''), keep_blank_values=True).items()}


def hello(environ, start_response):
    start_response('200 OK', [('Content-Type', 'text/plain')])
    return [b'hello']


def environ_dump(environ, start_response):
    out = {k: v for k, v in environ.items() if isinstance(v, str)}
    out['wsgi.version'] = list(environ['wsgi.version'])
    for k in ('wsgi.multithread', 'wsgi.multiprocess', 'wsgi.run_once', 'wsgi.input_terminated'):
        out[k] = environ[k]
    out['has_file_wrapper'] = callable(environ.get('wsgi.file_wrapper'))
    out['input_has'] = sorted(m for m in ('read', 'readline', 'readlines', '__iter__') if hasattr(environ['wsgi.input'], m))
    out['errors_has'] = sorted(m for m in ('write', 'writelines', 'flush') if hasattr(environ['wsgi.errors'], m))
    out['non_str_keys'] = sorted(k for k, v in environ.items() if not isinstance(v, str) and not k.startswith('wsgi.'))
    return _json(start_response, out)


def upload(environ, start_response):
    """sha256 of the body, read in uneven pieces; says on wsgi.errors when it started."""
    errors = environ['wsgi.errors']
    inp = environ['wsgi.input']
    h = hashlib.sha256()
    total = 0
    first = inp.read(1000)
    errors.write('upload: started reading\n')
    errors.flush()
    h.update(first)
    total += len(first)
    sizes = [1, 7, 4096, 65536, 100000, 3]
    i = 0
    while True:
        chunk = inp.read(sizes[i % len(sizes)])
        i += 1
        if not chunk:
            break
        h.update(chunk)
        total += len(chunk)
    return _json(start_response, {'sha256': h.hexdigest(), 'bytes': total, 'content_length': environ.get('CONTENT_LENGTH')})


def lines(environ, start_response):
    inp = environ['wsgi.input']
    first = inp.readline()
    limited = inp.readline(3)
    rest_of_line = inp.readline()
    two = inp.readlines(1)
    iterated = [line for line in inp]
    after = inp.read()
    out = [first, limited, rest_of_line, two, iterated, after]
    return _json(start_response, json.loads(json.dumps(out, default=lambda b: b.decode('latin-1'))))


def exc_before_head(environ, start_response):
    start_response('200 OK', [('Content-Type', 'text/plain')])
    try:
        raise RuntimeError('changed my mind')
    except RuntimeError:
        start_response('503 Service Unavailable', [('Content-Type', 'text/plain'), ('X-Recovered', 'yes')], sys.exc_info())
    return [b'recovered']


def exc_after_head(environ, start_response):
    start_response('200 OK', [('Content-Type', 'text/plain')])
    yield b'part one;'
    try:
        raise RuntimeError('too late to change')
    except RuntimeError:
        start_response('500 Internal Server Error', [('Content-Type', 'text/plain')], sys.exc_info())
    yield b'never sent'


def twice(environ, start_response):
    start_response('200 OK', [])
    start_response('200 OK', [])
    return [b'unreachable']


def write_then_iter(environ, start_response):
    write = start_response('200 OK', [('Content-Type', 'text/plain')])
    write(b'one,')
    write(b'two,')
    return [b'three,', b'', b'four']


class ClosingIterable:
    def __init__(self, environ, blocks, fail_at=None):
        self.errors = environ['wsgi.errors']
        self.blocks = blocks
        self.fail_at = fail_at

    def __iter__(self):
        for i, b in enumerate(self.blocks):
            if i == self.fail_at:
                raise ValueError('iteration failed')
            yield b

    def close(self):
        self.errors.write('close called\n')


def closing(environ, start_response):
    start_response('200 OK', [('Content-Type', 'text/plain')])
    return ClosingIterable(environ, [b'a', b'b'])


def closing_fails(environ, start_response):
    start_response('200 OK', [('Content-Type', 'text/plain')])
    return ClosingIterable(environ, [b'a', b'b'], fail_at=0)


def boom(environ, start_response):
    raise ValueError('boom from the application')


def not_bytes(environ, start_response):
    start_response('200 OK', [])
    return ['a str, not bytes']


def pid(environ, start_response):
    start_response('200 OK', [('Content-Type', 'text/plain')])
    return [str(os.getpid()).encode()]


# What ran in this process and the ones it was forked from: (what, pid) pairs, so a
# forked worker shows what its parent did before the fork and what it did itself.
WARMED = []


def warm_hook(application):
    """A --warm hook: says it ran, and with the application."""
    WARMED.append(('hook' if application is app else 'hook-without-app', os.getpid()))


def hold_spares(application):
    """A --warm hook that, in a spare (run after the parent's), waits for the file named by
    $HOLD_SPARES before it returns."""
    first = not any(w == 'held' for w, _ in WARMED)
    WARMED.append(('held', os.getpid()))
    while not first and not os.path.exists(os.environ['HOLD_SPARES']):
        time.sleep(0.01)


def start_thread(application):
    """A --warm hook that leaves a thread running in the fork server."""
    import threading
    threading.Thread(target=time.sleep, args=(3600,), name='left-running', daemon=True).start()


def warm_me(environ, start_response):
    WARMED.append(('request' if environ.get('HTTP_USER_AGENT') == 'fcgi-pm-wsgi warm-up' else 'other', os.getpid()))
    return hello(environ, start_response)


def warmed(environ, start_response):
    return _json(start_response, {'pid': os.getpid(), 'warmed': WARMED})


def big_block(i, size):
    """Block i of /big: the bytes 0..255 repeated, starting at i % 256."""
    base = bytes(range(256)) * (size // 256 + 2)
    return base[i % 256:i % 256 + size]


def big(environ, start_response):
    """`n` blocks of `size` bytes (big_block), as a generator: no Content-Length."""
    q = _query(environ)
    n, size = int(q.get('n', '10')), int(q.get('size', '65549'))
    start_response('200 OK', [('Content-Type', 'application/octet-stream')])
    return (big_block(i, size) for i in range(n))


def slow(environ, start_response):
    ms = int(_query(environ).get('ms', '300'))
    environ['wsgi.errors'].write('slow: sleeping\n')
    time.sleep(ms / 1000)
    start_response('200 OK', [('Content-Type', 'text/plain')])
    return [f'slept {ms}'.encode()]


def drip(environ, start_response):
    """Streams a block every 20 ms for up to 10 s, or until the front end gives up."""
    errors = environ['wsgi.errors']
    start_response('200 OK', [('Content-Type', 'text/plain')])

    class Drip:
        def __iter__(self):
            for i in range(500):
                if i == 1:
                    errors.write('drip: streaming\n')
                time.sleep(0.02)
                yield b'drop %d\n' % i

        def close(self):
            errors.write('drip: closed\n')

    return Drip()


def empty(environ, start_response):
    start_response('200 OK', [('Content-Type', 'text/plain')])
    return iter([])


def no_content(environ, start_response):
    start_response('204 No Content', [])
    return []


def stdin_read(environ, start_response):
    data = sys.stdin.read()
    return _json(start_response, {'stdin': data})


def file_wrapper(environ, start_response):
    import io
    start_response('200 OK', [('Content-Type', 'text/plain')])
    return environ['wsgi.file_wrapper'](io.BytesIO(b'0123456789' * 10000), 4096)


def _auth_report(environ):
    """Headers saying what an authorizer request looked like to the application."""
    return [('X-Role', environ['FCGI_ROLE']), ('X-Input-Bytes', str(len(environ['wsgi.input'].read())))]


def auth_allow(environ, start_response):
    """An authorizer's grant with a body (which the adapter must not send) made block by
    block: wsgi.errors says how far it was made, and that close() came."""
    errors = environ['wsgi.errors']
    start_response('200 OK', [('Variable-REMOTE_USER', 'alice'), ('Variable-AUTH_TYPE', 'Bearer'), *_auth_report(environ),
                              ('Content-Type', 'text/plain'), ('Content-Length', '45')])

    class Body:
        def __iter__(self):
            for i in range(3):
                errors.write(f'auth body block {i}\n')
                yield b'ignored body %d\n' % i

        def close(self):
            errors.write('close called\n')

    return Body()


def auth_allow_list(environ, start_response):
    start_response('200 OK', [('Variable-REMOTE_USER', 'bob'), *_auth_report(environ)])
    return [b'a list body gets no Content-Length here']


def auth_deny(environ, start_response):
    seen = [('X-Path', f"{environ['SCRIPT_NAME']}|{environ['PATH_INFO']}"), ('X-Authorization', environ.get('HTTP_AUTHORIZATION', ''))]
    start_response('401 Unauthorized', [('WWW-Authenticate', 'Bearer'), ('Content-Type', 'text/plain'), *_auth_report(environ), *seen])
    return [b'token needed\n']


def auth_recover(environ, start_response):
    """Grants, then changes its mind before the head went out: the denial goes whole."""
    start_response('200 OK', [('Variable-REMOTE_USER', 'alice')])
    try:
        raise PermissionError('revoked')
    except PermissionError:
        start_response('403 Forbidden', [('Content-Type', 'text/plain')], sys.exc_info())
    return [b'revoked\n']


ROUTES = {
    '/auth/allow': auth_allow,
    '/auth/allow-list': auth_allow_list,
    '/auth/deny': auth_deny,
    '/auth/recover': auth_recover,
    '/hello': hello,
    '/environ': environ_dump,
    '/upload': upload,
    '/lines': lines,
    '/exc-before-head': exc_before_head,
    '/exc-after-head': exc_after_head,
    '/twice': twice,
    '/write': write_then_iter,
    '/closing': closing,
    '/closing-fails': closing_fails,
    '/boom': boom,
    '/not-bytes': not_bytes,
    '/pid': pid,
    '/warm-me': warm_me,
    '/warmed': warmed,
    '/big': big,
    '/slow': slow,
    '/drip': drip,
    '/empty': empty,
    '/no-content': no_content,
    '/stdin': stdin_read,
    '/file-wrapper': file_wrapper,
}


def app(environ, start_response):
    route = ROUTES.get(environ['PATH_INFO'])
    if route is None:
        return environ_dump(environ, start_response) if environ['PATH_INFO'].startswith('/env/') else _json(start_response, {'error': 'no route', 'path': environ['PATH_INFO']}, '404 Not Found')
    return route(environ, start_response)
