"""What every room of the adapter shares: the program's name, its stderr line, and the
exceptions that cross from the protocols into the WSGI call and back."""

import os
import sys

PROG = 'fcgi-pm-wsgi'


class ProtocolError(Exception):
    """The peer sent bytes this protocol does not allow; the connection is closed."""


class ClientGone(OSError):
    """The front end closed the connection or aborted the request.

    An OSError, as a failed read of wsgi.input is for frameworks (Django turns it into
    UnreadablePostError), so the application stops as it would on a broken socket.
    """


class ResponseBroken(Exception):
    """The application failed after the response head was sent: cut the response."""


def log(msg: str) -> None:
    try:
        sys.stderr.write(f'{PROG}[{os.getpid()}]: {msg}\n')
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
