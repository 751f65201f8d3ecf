"""A FastCGI authorizer (FastCGI specification 6.3) as a WSGI application for
bin/fcgi-pm-wsgi: it allows requests that carry `Authorization: Bearer TOKEN` with a
token listed in the environment variable AUTH_TOKENS.

    AUTH_TOKENS="alice:tok1,bob:tok2:/public/"     NAME:TOKEN[:PATH_PREFIX], comma-separated

- known token, path allowed: 200 with `Variable-REMOTE_USER: NAME` and
  `Variable-AUTH_TYPE: Bearer` (the front end passes both to the request that follows);
- a user with a PATH_PREFIX asking for another path: 403 with a short text body. The
  path is REQUEST_URI's, undecoded; one holding `%` or `/.` is outside every prefix (no
  decoding and dot-segment games in an example);
- no or unknown token: 401 with `WWW-Authenticate: Bearer realm="fcgi-pm"`;
- a request that is not an authorizer request (a front end set up as for a responder):
  500, so a mistake in the configuration denies instead of serving.

The same decisions as token-authorizer.c and auth.php beside this file.
"""

import hmac
import os

REALM = 'fcgi-pm'


def parse_tokens(spec):
    """[(name, token, prefix or None)] from AUTH_TOKENS; ValueError on a bad entry."""
    entries = []
    for entry in filter(None, (e.strip(' \t') for e in spec.split(','))):
        parts = entry.split(':')
        if len(parts) not in (2, 3) or not all(parts):
            raise ValueError(f'AUTH_TOKENS: {entry!r} is not NAME:TOKEN or NAME:TOKEN:PATH_PREFIX')
        entries.append((parts[0], parts[1], parts[2] if len(parts) == 3 else None))
    return entries


# A bad AUTH_TOKENS stops the worker at import, with the reason on stderr (fcgi-pm logs it).
TOKENS = parse_tokens(os.environ.get('AUTH_TOKENS', ''))


def find_user(authorization):
    """The (name, prefix) whose token the header carries, or None. Every entry is
    compared, in constant time, so the answer's timing does not tell how close a guess was."""
    scheme, _, token = authorization.strip(' \t').partition(' ')
    if scheme.lower() != 'bearer':  # auth schemes are case-insensitive (RFC 9110)
        return None
    found = None
    for name, known, prefix in TOKENS:
        if hmac.compare_digest(token.strip(' \t').encode(), known.encode()):
            found = (name, prefix)
    return found


def path_allowed(request_uri, prefix):
    if prefix is None:
        return True
    path = request_uri.split('?', 1)[0]
    return path.startswith(prefix) and '%' not in path and '/.' not in path


def answer(start_response, status, text, headers=()):
    body = text.encode()
    start_response(status, [('Content-Type', 'text/plain; charset=utf-8'), ('Content-Length', str(len(body))), *headers])
    return [body]


def application(environ, start_response):
    if environ.get('FCGI_ROLE') != 'AUTHORIZER':
        return answer(start_response, '500 Internal Server Error', 'this program answers FastCGI authorizer requests only\n')
    user = find_user(environ.get('HTTP_AUTHORIZATION', ''))
    if user is None:
        return answer(start_response, '401 Unauthorized', '401 Unauthorized: a valid bearer token is needed\n',
                      [('WWW-Authenticate', f'Bearer realm="{REALM}"')])
    name, prefix = user
    if not path_allowed(environ.get('REQUEST_URI', ''), prefix):
        return answer(start_response, '403 Forbidden', f'403 Forbidden: {name} may only use {prefix}\n')
    start_response('200 OK', [('Variable-REMOTE_USER', name), ('Variable-AUTH_TYPE', 'Bearer')])
    return []
