"""Authorizers (FastCGI specification, section 6.3): the same application also gets the
authorizer requests a front end (lighttpd's "mode" => "authorizer", Apache's
mod_authnz_fcgi) or fcgi-pm sends, and tells them apart by environ['FCGI_ROLE']:
'AUTHORIZER' for FastCGI role FCGI_AUTHORIZER, or for a responder or SCGI request that
carries the param FCGI_ROLE=AUTHORIZER (how fcgi-pm asks a worker that speaks only the
responder role); 'RESPONDER' otherwise, as libfcgi sets it. An authorizer request has an
empty wsgi.input. Its answer is the application's response: status 200 grants access
and each `Variable-NAME: value` header becomes variable NAME of the request that
follows; the adapter sends the head of a 200 only (the body of a 200 is ignored by the
specification, so it is neither sent nor iterated past the head; close() is still
called). Any other status goes to the client with its headers and body:

    def application(environ, start_response):
        if environ.get('FCGI_ROLE') != 'AUTHORIZER':
            start_response('500 Internal Server Error', [('Content-Type', 'text/plain')])
            return [b'not an authorizer request\n']
        scheme, _, token = environ.get('HTTP_AUTHORIZATION', '').partition(' ')
        user = TOKENS.get(token) if scheme == 'Bearer' else None  # TOKENS: {token: user}
        if user is None:
            start_response('401 Unauthorized', [('WWW-Authenticate', 'Bearer'), ('Content-Type', 'text/plain')])
            return [b'a valid bearer token is needed\n']
        start_response('200 OK', [('Variable-REMOTE_USER', user)])
        return []

FCGI_FILTER requests are refused with FCGI_UNKNOWN_ROLE.
"""

from .fastcgi import FCGI_AUTHORIZER, FCGI_RESPONDER



def set_role(params: dict, begin_role: int = FCGI_RESPONDER) -> bool:
    """Sets params['FCGI_ROLE'] and says whether this is an authorizer request: FastCGI
    role FCGI_AUTHORIZER, or a responder or SCGI request with the param
    FCGI_ROLE=AUTHORIZER (how fcgi-pm asks a worker that speaks only the responder
    role). Anything else is a 'RESPONDER', as libfcgi names it."""
    authorizer = begin_role == FCGI_AUTHORIZER or params.get('FCGI_ROLE') == 'AUTHORIZER'
    params['FCGI_ROLE'] = 'AUTHORIZER' if authorizer else 'RESPONDER'
    return authorizer
