"""The command line: arguments, sys.path, the application's import, and which process
model serves it."""

import argparse
import importlib
import os
import sys

from .errors import PROG
from .preload import preload_main
from .server import listener_from_address, listener_from_fd0, max_requests_from_env, serve
from .warm import warm_up



def load_app(spec: str):
    module_name, _, attr = spec.partition(':')
    module = importlib.import_module(module_name)
    obj = module
    for part in (attr or 'application').split('.'):
        obj = getattr(obj, part)
    if not callable(obj):
        raise SystemExit(f'{PROG}: {spec} is not callable')
    return obj


def parse_args(argv):
    p = argparse.ArgumentParser(prog=PROG, description='Serve a WSGI application over FastCGI or SCGI, one request at a time.')
    proto = p.add_mutually_exclusive_group()
    proto.add_argument('--fastcgi', dest='protocol', action='store_const', const='fastcgi', help='speak FastCGI (default)')
    proto.add_argument('--scgi', dest='protocol', action='store_const', const='scgi', help='speak SCGI')
    p.add_argument('--socket', metavar='ADDR', help='listen on a Unix socket PATH or HOST:PORT instead of fd 0')
    p.add_argument('--preload', action='store_true', help='fork server for fcgi-pm (preload: true): import once, fork a worker on request')
    p.add_argument('--spares', metavar='N', type=int, choices=(0, 1), default=1,
                   help='with --preload: keep N children (0 or 1, default 1) forked and warmed ahead of need, so a new worker starts at once')
    p.add_argument('--warm', metavar='MODULE:CALLABLE', action='append', default=[],
                   help='call CALLABLE(application) once the application is imported, before the first request (repeatable)')
    p.add_argument('--warm-request', metavar='PATH', action='append', default=[],
                   help='run a GET of PATH through the application before the first request, answer dropped: a page without side effects (repeatable)')
    p.add_argument('--path', metavar='DIR', action='append', default=[], help='add DIR to sys.path (repeatable)')
    p.add_argument('--script-name', metavar='PREFIX', help='URL prefix the application is mounted at (sets SCRIPT_NAME, PATH_INFO)')
    p.add_argument('app', metavar='MODULE[:CALLABLE]', help='the WSGI application, e.g. mysite.wsgi:application')
    args = p.parse_args(argv)
    args.protocol = args.protocol or 'fastcgi'
    return args


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    for d in reversed([os.getcwd()] + args.path):
        d = os.path.abspath(d)
        if d not in sys.path:
            sys.path.insert(0, d)
    # The application is imported before the first accept, so a process manager's
    # readiness probe is answered only once requests can be served.
    app = load_app(args.app)
    if args.preload:
        return preload_main(app, args)
    # Before the first accept too: the readiness probe is answered once the work a first
    # request would do is done.
    warm_up(app, args.warm, args.warm_request, args.script_name)
    listener = listener_from_address(args.socket) if args.socket else listener_from_fd0()
    return serve(app, listener, args.protocol, args.script_name, max_requests_from_env())
