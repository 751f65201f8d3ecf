"""fcgi-pm-wsgi: serve a WSGI application (PEP 3333) over FastCGI or SCGI.

    fcgi-pm-wsgi [--fastcgi | --scgi] [--socket PATH | --socket HOST:PORT | --preload]
                 [--path DIR]... [--script-name PREFIX] MODULE[:CALLABLE]

One request at a time per process: a process manager (fcgi-pm, spawn-fcgi) runs as
many of these as it wants concurrency. Without --socket the listening socket is fd 0
(FCGI_LISTENSOCK_FILENO), which is how fcgi-pm's `socket: fd0` and spawn-fcgi hand it
over. Standard library only, Python 3.9+.

Signals: SIGTERM, SIGINT and SIGHUP stop the process at once when it is idle, or after
the response of the request it is running.

The rooms, as flup composes them (protocol x process model):
    fastcgi.py             the FastCGI wire format (pure codecs, a record reader)
    fastcgi_connection.py  one FastCGI connection serving requests
    scgi.py                SCGI: the netstring header block, one request per connection
    wsgi.py                PEP 3333: environ, wsgi.input, start_response, the call
    authorizer.py          FastCGI authorizers (FCGI_ROLE)
    server.py              plain process model: one process, one request at a time
    preload.py             fork server process model (--preload)
    sockio.py, errors.py   shared socket I/O; the program's name, log line, exceptions
    main.py                the command line
"""
