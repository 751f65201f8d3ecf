"""The warm fork: what a preload parent does once, before its first fork, so that no
worker pays for it again on its first request.

A framework builds much of what a request needs on first use: Django imports the URL
configuration and compiles its patterns, finds and compiles templates, imports the
database backend and the template context processors, compiles the regular expressions
that check a Host header. Done in the parent, it is shared by every child (copy-on-write,
and gc.freeze() keeps the collector from writing to it); done in a child, it is paid by
each worker, on a request.

Three sources, in order:
    warm_django()       Django, when the application imported it: nothing here opens a
                        database connection or runs a view.
    --warm MOD:FUNC     the operator's hook, called with the application (any framework:
                        import what views import lazily, fill caches, compile templates).
    --warm-request P    a GET of P run through the application itself, its answer
                        dropped: it does what a real request does, so P should be a page
                        without side effects (a health page). Django's database
                        connections are closed after it: a child must not share them.
"""

import importlib
import os
import sys
import threading

from .errors import log
from .wsgi import EmptyInput, Response, build_environ, call_app

# Templates compiled in the parent at most (a site with more pays for the rest per worker).
MAX_TEMPLATES = 2000
MAX_TEMPLATE_BYTES = 1 << 20


def warm_django() -> None:
    """What Django loads on its first request and every worker would load again. Nothing
    here opens a database connection, which a child must not inherit."""
    if 'django' not in sys.modules:
        return
    steps = (('the URL configuration', _django_urls), ('templates', _django_templates),
             ('database backends', _django_databases), ('the request path', _django_request_path))
    for what, step in steps:
        try:
            step()
        except Exception as e:  # the first request will say it again, in a worker
            log(f'preload: warming Django up failed ({what}): {e!r}')


def _django_urls() -> None:
    from django.urls import Resolver404, clear_script_prefix, get_resolver, set_script_prefix
    resolver = get_resolver()
    # reverse_dict walks every pattern, nested includes too, and compiles its regex:
    # resolve() and reverse() then find them compiled. Resolving a path compiles the
    # root's own pattern and runs what a request's resolution runs (no view is called).
    resolver.reverse_dict
    try:
        resolver.resolve('/')
    except Resolver404:
        pass
    set_script_prefix('/')  # the request handler's first call (a context-local store)
    clear_script_prefix()


def _django_templates() -> None:
    from django.template import engines
    from django.template.backends.django import DjangoTemplates
    count = 0
    for backend in engines.all():
        if not isinstance(backend, DjangoTemplates):
            continue
        engine = backend.engine
        engine.template_context_processors  # imported on a render
        for loader in engine.template_loaders:
            dirs = loader.get_dirs() if hasattr(loader, 'get_dirs') else ()
            for d in dirs:
                for name in _template_names(str(d)):
                    if count >= MAX_TEMPLATES:
                        return
                    count += 1
                    try:
                        # The cached loader keeps the compiled template under its name,
                        # which is also how {% extends %} and {% include %} find it.
                        engine.get_template(name)
                    except Exception:
                        pass  # not a template, or one that fails: the request will say so


def _template_names(root: str):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(n for n in dirnames if not n.startswith('.'))
        for f in sorted(filenames):
            if f.startswith('.') or f.endswith(('.py', '.pyc')):
                continue
            path = os.path.join(dirpath, f)
            try:
                if os.path.getsize(path) > MAX_TEMPLATE_BYTES:
                    continue
            except OSError:
                continue
            yield os.path.relpath(path, root).replace(os.sep, '/')


def _django_databases() -> None:
    from django.db import connections
    for conn in connections.all():
        # The wrapper, its backend's modules and its operations; no connection is opened.
        conn.ops
        conn.features


def _django_request_path() -> None:
    from django.conf import settings
    from django.http.request import split_domain_port, validate_host
    hosts = list(settings.ALLOWED_HOSTS) or ['localhost']
    host = next((h for h in hosts if h and not h.startswith('.') and h != '*'), 'localhost')
    domain, _ = split_domain_port(host)
    validate_host(domain, hosts)


def load_hook(spec: str):
    module_name, _, attr = spec.partition(':')
    if not module_name or not attr:
        raise SystemExit(f'--warm {spec!r}: expected MODULE:CALLABLE')
    obj = importlib.import_module(module_name)
    for part in attr.split('.'):
        obj = getattr(obj, part)
    if not callable(obj):
        raise SystemExit(f'--warm {spec}: not callable')
    return obj


class _Discard:
    """A response sink for a warm-up request: the answer is not wanted."""

    def send(self, bufs) -> None:
        pass


def warm_request(app, path: str, mount=None) -> str:
    """One GET of `path` through the application; returns its status line."""
    uri = path if mount is None else mount.rstrip('/') + path
    params = {
        'REQUEST_METHOD': 'GET', 'REQUEST_URI': uri, 'QUERY_STRING': uri.partition('?')[2],
        'SERVER_NAME': 'localhost', 'SERVER_PORT': '80', 'SERVER_PROTOCOL': 'HTTP/1.1',
        'HTTP_HOST': _request_host(), 'REMOTE_ADDR': '127.0.0.1', 'HTTP_USER_AGENT': 'fcgi-pm-wsgi warm-up',
    }
    env = build_environ(params, EmptyInput(), sys.stderr, mount)
    resp = Response(_Discard(), 'GET')
    call_app(app, env, resp)
    return resp.status or '-'


def _request_host() -> str:
    if 'django' in sys.modules:
        try:
            from django.conf import settings
            for h in settings.ALLOWED_HOSTS:
                if h and h != '*' and not h.startswith('.'):
                    return h
        except Exception:
            pass
    return 'localhost'


def _close_django_connections() -> None:
    if 'django.db' in sys.modules:
        from django.db import connections
        connections.close_all()


def warm_up(app, hooks=(), requests=(), mount=None) -> None:
    """Everything before the first fork. A hook or request that fails is logged: the
    workers then do that work themselves, as without it."""
    warm_django()
    for spec in hooks:
        hook = load_hook(spec)
        try:
            hook(app)
        except Exception as e:
            log(f'preload: --warm {spec} failed: {e!r}')
    for path in requests:
        try:
            status = warm_request(app, path, mount)
            if not status[:1] in ('2', '3'):
                log(f'preload: --warm-request {path} answered {status}')
        except Exception as e:
            log(f'preload: --warm-request {path} failed: {e!r}')
    _close_django_connections()


def threads_besides_main() -> list:
    """Threads other than this one: a fork copies only the caller, so a lock another
    thread held stays held forever in the child."""
    me = threading.current_thread()
    return [t.name for t in threading.enumerate() if t is not me]
