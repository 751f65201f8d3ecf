"""The adapter's pure parts: name-value codec, SCGI headers, SCRIPT_NAME/PATH_INFO, start_response."""

import io
import socket
import sys
import unittest

from adapter_harness import TIMEOUT, name_values, parse_name_values
from fcgi_pm_wsgi import fastcgi, scgi, wsgi
from fcgi_pm_wsgi.authorizer import set_role
from fcgi_pm_wsgi.errors import ProtocolError


class NameValueTest(unittest.TestCase):
    def test_round_trip_with_short_and_long_lengths(self):
        pairs = [('A', ''), ('B' * 127, 'x' * 128), ('C' * 300, 'y' * 70000), ('UTF8', '\u00e9'.encode('utf-8').decode('latin-1'))]
        encoded = fastcgi.encode_name_values(pairs)
        self.assertEqual(fastcgi.decode_name_values(encoded), pairs)
        # Agrees with the test suite's independent encoder.
        self.assertEqual(parse_name_values(encoded)['A'], '')
        self.assertEqual(fastcgi.decode_name_values(name_values({'K': 'v'})), [('K', 'v')])

    def test_lengths_past_the_record_are_errors(self):
        for bad in (b'\x05\x01AB', b'\x80\x00', b'\x01'):
            with self.assertRaises(ProtocolError):
                fastcgi.decode_name_values(bad)

    def test_stream_records_cut_at_65535(self):
        bufs = fastcgi.stream_records(fastcgi.FCGI_STDOUT, 3, b'a' * 140000)
        sizes = [len(b) for b in bufs[1::2]]
        self.assertEqual(sizes, [65535, 65535, 8930])
        self.assertEqual(bytes(bufs[0]), bytes((1, 6, 0, 3, 0xFF, 0xFF, 0, 0)))


class ScgiHeadersTest(unittest.TestCase):
    def test_parse(self):
        self.assertEqual(scgi.decode_scgi_headers(b'CONTENT_LENGTH\x0012\x00SCGI\x001\x00'), {'CONTENT_LENGTH': '12', 'SCGI': '1'})

    def test_errors(self):
        for bad in (b'SCGI\x001\x00CONTENT_LENGTH\x000\x00', b'CONTENT_LENGTH\x000', b'CONTENT_LENGTH\x000\x00X\x00'):
            with self.assertRaises(ProtocolError):
                scgi.decode_scgi_headers(bad)


class ScriptPathTest(unittest.TestCase):
    CASES = [
        # (params, mount, expected SCRIPT_NAME, expected PATH_INFO)
        ({'SCRIPT_NAME': '/a/b', 'REQUEST_URI': '/a/b?x'}, None, '', '/a/b'),
        ({'SCRIPT_NAME': '/app', 'PATH_INFO': '/x'}, None, '/app', '/x'),
        ({'PATH_INFO': '/x'}, None, '', '/x'),
        ({'REQUEST_URI': '/p%20q/%C3%A9'}, None, '', '/p q/\u00c3\u00a9'),
        ({'SCRIPT_NAME': '/app', 'REQUEST_URI': '/app/x/y'}, None, '/app', '/x/y'),
        ({'SCRIPT_NAME': '/app/x', 'REQUEST_URI': '/app/x'}, '/app', '/app', '/x'),
        ({'SCRIPT_NAME': '/app', 'REQUEST_URI': '/app'}, '/app/', '/app', ''),
        ({'SCRIPT_NAME': '/other/x', 'REQUEST_URI': '/other/x'}, '/app', '', '/other/x'),
        ({'SCRIPT_NAME': '/apple', 'REQUEST_URI': '/apple'}, '/app', '', '/apple'),
        ({'REQUEST_URI': 'http://h:1/a/b?c'}, None, '', '/a/b'),
        ({}, None, '', ''),
        # nginx's stock fastcgi_params (SCRIPT_NAME = $fastcgi_script_name, no PATH_INFO): the root.
        ({'SCRIPT_NAME': '/page/', 'REQUEST_URI': '/page/', 'DOCUMENT_URI': '/page/'}, None, '', '/page/'),
        ({'SCRIPT_NAME': '/page/', 'REQUEST_URI': '/page/?q=1'}, None, '', '/page/'),
        ({'SCRIPT_NAME': '/', 'REQUEST_URI': '/'}, None, '', '/'),
        ({'SCRIPT_NAME': '/a/b/', 'REQUEST_URI': '/a/b/'}, None, '', '/a/b/'),
        ({'SCRIPT_NAME': '/page/index.php', 'REQUEST_URI': '/page/'}, None, '', '/page/'),  # fastcgi_index index.php
        ({'SCRIPT_NAME': '/caf\u00c3\u00a9/', 'REQUEST_URI': '/caf%C3%A9/'}, None, '', '/caf\u00c3\u00a9/'),
        # fastcgi_split_path_info ^(/app)(/.*)$ or the SCGI example's captures: kept as sent.
        ({'SCRIPT_NAME': '/app', 'PATH_INFO': '/page/', 'REQUEST_URI': '/app/page/'}, None, '/app', '/page/'),
        ({'SCRIPT_NAME': '/app', 'PATH_INFO': '/', 'REQUEST_URI': '/app/'}, None, '/app', '/'),
        ({'SCRIPT_NAME': '', 'PATH_INFO': '/page/', 'REQUEST_URI': '/page/'}, None, '', '/page/'),
        # A SCRIPT_NAME prefix of the path, with or without its trailing slash: a mount point.
        ({'SCRIPT_NAME': '/app', 'REQUEST_URI': '/app/page/'}, None, '/app', '/page/'),
        ({'SCRIPT_NAME': '/app/', 'REQUEST_URI': '/app/page/'}, None, '/app', '/page/'),
        ({'SCRIPT_NAME': '/app/', 'REQUEST_URI': '/app/'}, None, '', '/app/'),
        # nginx's stock scgi_params: neither variable.
        ({'REQUEST_URI': '/page/', 'DOCUMENT_URI': '/page/'}, None, '', '/page/'),
        ({'REQUEST_URI': '/'}, None, '', '/'),
        # --script-name /app behind the stock params: the prefix, then the rest with its slash.
        ({'SCRIPT_NAME': '/app/page/', 'REQUEST_URI': '/app/page/'}, '/app', '/app', '/page/'),
        ({'SCRIPT_NAME': '/app/', 'REQUEST_URI': '/app/'}, '/app', '/app', '/'),
        ({'REQUEST_URI': '/app/page/'}, '/app/', '/app', '/page/'),
        ({'SCRIPT_NAME': '/app', 'PATH_INFO': '/page/'}, '/app', '/app', '/page/'),
        ({'REQUEST_URI': '/page/'}, '/app', '', '/page/'),
    ]

    def test_table(self):
        for params, mount, script, path in self.CASES:
            env = dict(params)
            wsgi.split_script_path(env, mount)
            self.assertEqual((env['SCRIPT_NAME'], env['PATH_INFO']), (script, path), (params, mount))


class RoleTest(unittest.TestCase):
    CASES = [
        # (FastCGI role, FCGI_ROLE param or None, authorizer?, environ's FCGI_ROLE)
        (fastcgi.FCGI_AUTHORIZER, None, True, 'AUTHORIZER'),
        (fastcgi.FCGI_AUTHORIZER, 'RESPONDER', True, 'AUTHORIZER'),
        (fastcgi.FCGI_RESPONDER, 'AUTHORIZER', True, 'AUTHORIZER'),
        (fastcgi.FCGI_RESPONDER, None, False, 'RESPONDER'),
        (fastcgi.FCGI_RESPONDER, 'FILTER', False, 'RESPONDER'),
        (fastcgi.FCGI_RESPONDER, 'authorizer', False, 'RESPONDER'),
    ]

    def test_table(self):
        for role, param, authorizer, name in self.CASES:
            params = {} if param is None else {'FCGI_ROLE': param}
            self.assertEqual((set_role(params, role), params['FCGI_ROLE']), (authorizer, name), (role, param))


class StartResponseTest(unittest.TestCase):
    def response(self, authorizer=False):
        sent = []

        class Out:
            def send(self, bufs):
                sent.append(b''.join(bytes(b) for b in bufs))

        return wsgi.Response(Out(), 'GET', authorizer), sent

    def test_rejects_bad_status_and_headers(self):
        for status, headers in [('200', []), (200, []), ('200 OK', [('A', 1)]), ('200 OK', (('A', 'b'),)),
                                ('200 OK', [('Bad Name', 'v')]), ('200 OK', [('A', 'v\r\nInjected: 1')]), ('200 OK', [('Status', '500')])]:
            r, _ = self.response()
            with self.assertRaises(AssertionError, msg=(status, headers)):
                r.start_response(status, headers)

    def test_head_is_sent_with_the_first_body_bytes_only(self):
        r, sent = self.response()
        write = r.start_response('201 Created', [('X-A', 'b')])
        self.assertEqual(sent, [])
        write(b'body')
        self.assertEqual(sent, [b'Status: 201 Created\r\nX-A: b\r\n\r\nbody'])

    def test_exc_info_after_head_reraises(self):
        r, _ = self.response()
        r.start_response('200 OK', [])(b'x')
        try:
            raise KeyError('original')
        except KeyError:
            with self.assertRaises(KeyError):
                r.start_response('500 Oops', [], sys.exc_info())

    def test_an_authorizer_grant_is_its_head_alone(self):
        r, sent = self.response(authorizer=True)
        write = r.start_response('200 OK', [('Variable-REMOTE_USER', 'al'), ('Content-Length', '4')])
        write(b'body')
        write(b'more')
        r.finish()
        self.assertEqual(sent, [b'Status: 200 OK\r\nVariable-REMOTE_USER: al\r\n\r\n'])

    def test_an_authorizer_denial_and_a_responder_200_keep_their_bodies(self):
        for authorizer, status in ((True, '401 Unauthorized'), (False, '200 OK')):
            r, sent = self.response(authorizer)
            r.start_response(status, [('Content-Length', '4')])(b'body')
            self.assertEqual(sent, [])  # the whole length is written: held for the end
            r.flush()
            self.assertEqual(sent, [f'Status: {status}\r\nContent-Length: 4\r\n\r\nbody'.encode()])

    def test_non_latin1_header_value(self):
        r, _ = self.response()
        r.start_response('200 OK', [('X', '\u2713')])
        with self.assertRaises(AssertionError):
            r.write(b'x')


class InputStreamTest(unittest.TestCase):
    def stream(self, chunks):
        class S(wsgi.InputStream):
            def __init__(self):
                super().__init__()
                self.chunks = list(chunks)

            def _next_chunk(self):
                return self.chunks.pop(0) if self.chunks else b''

        return S()

    def test_lines_across_chunks(self):
        s = self.stream([b'ab', b'c\nde', b'f\n', b'g'])
        self.assertEqual(list(s), [b'abc\n', b'def\n', b'g'])
        self.assertEqual(s.read(), b'')
        self.assertEqual(s.read(5), b'')

    def test_read_sizes(self):
        s = self.stream([b'0123', b'4567', b'89'])
        self.assertEqual(s.read(3), b'012')
        self.assertEqual(s.read(3), b'3')  # at most one chunk fetched per short read
        self.assertEqual(s.read(), b'456789')

    def test_readline_limit(self):
        s = self.stream([b'abcdef\n'])
        self.assertEqual(s.readline(2), b'ab')
        self.assertEqual(s.readline(), b'cdef\n')

    def test_file_wrapper(self):
        fw = wsgi.FileWrapper(io.BytesIO(b'x' * 10), 4)
        self.assertEqual(list(fw), [b'xxxx', b'xxxx', b'xx'])
        fw.close()


if __name__ == '__main__':
    unittest.main()


class LingerCloseTest(unittest.TestCase):
    """After a response: a request read to its end closes at once (the worker is free for
    its next connection without waiting for the front end's close); one with bytes left
    unread half-closes and drains them first, so the close cannot reset the response."""

    def test_a_complete_request_closes_at_once_while_the_peer_stays_open(self):
        from fcgi_pm_wsgi.sockio import SocketReader, linger_close
        ours, peer = socket.socketpair()
        try:
            peer.settimeout(TIMEOUT)
            linger_close(ours, SocketReader(ours), complete=True)
            self.assertEqual(ours.fileno(), -1, 'closed, not waiting for the peer')
            self.assertEqual(peer.recv(10), b'', 'the peer sees the end')
        finally:
            peer.close()

    def test_unread_bytes_are_drained_before_the_close(self):
        import threading
        from fcgi_pm_wsgi.sockio import SocketReader, linger_close
        ours, peer = socket.socketpair()
        peer.settimeout(TIMEOUT)
        peer.sendall(b'body the application did not read')
        done = threading.Event()
        t = threading.Thread(target=lambda: (linger_close(ours, SocketReader(ours), complete=True), done.set()))
        t.start()
        try:
            self.assertEqual(peer.recv(10), b'', 'half-closed: the response is complete for the peer')
            self.assertFalse(done.is_set(), 'still draining until the peer closes')
            peer.close()
            t.join(TIMEOUT)
            self.assertTrue(done.is_set())
        finally:
            peer.close()
