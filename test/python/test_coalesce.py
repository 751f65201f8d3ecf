"""Writes per response: what the adapter already holds at the end of a response (a list
result, the write that completes Content-Length, an empty body) goes out with the end of
the response in one sendmsg, so the front end reads it once; a streamed chunk is not held.

In process, over a socketpair, with a socket wrapper that counts the sends."""

import contextlib
import io
import select
import socket
import struct
import unittest

from adapter_harness import END_REQUEST, PARAMS, STDIN, STDOUT, begin, name_values, record
from fcgi_pm_wsgi.fastcgi_connection import FcgiConnection
from fcgi_pm_wsgi.scgi import serve_scgi


class CountingSocket:
    def __init__(self, sock):
        self.sock = sock
        self.sends = 0

    def sendmsg(self, bufs, *rest):
        self.sends += 1
        return self.sock.sendmsg(bufs, *rest)

    def sendall(self, data, *rest):
        self.sends += 1
        return self.sock.sendall(data, *rest)

    def send(self, data, *rest):
        self.sends += 1
        return self.sock.send(data, *rest)

    def __getattr__(self, name):
        return getattr(self.sock, name)


class StubServer:
    def __init__(self, app):
        self.app = app
        self.mount = None
        self.busy = False

    def request_done(self):
        self.busy = False

    def wait_next_record(self, conn):
        return False  # one request a connection: serve() returns after it


def read_all(sock) -> bytes:
    sock.settimeout(5)
    out = b''
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return out
        out += chunk


def records(data: bytes):
    pos, out = 0, []
    while pos < len(data):
        _, rtype, rid, length, pad, _ = struct.unpack('>BBHHBB', data[pos:pos + 8])
        out.append((rtype, data[pos + 8:pos + 8 + length]))
        pos += 8 + length + pad
    return out


PARAMS_GET = {'REQUEST_METHOD': 'GET', 'REQUEST_URI': '/', 'SERVER_NAME': 'h', 'SERVER_PORT': '80', 'SERVER_PROTOCOL': 'HTTP/1.1'}


class FastcgiWritesTest(unittest.TestCase):
    def serve(self, app, method='GET'):
        """(sends, STDOUT bytes, END_REQUEST seen) for one request on a kept connection."""
        ours, theirs = socket.socketpair()
        self.addCleanup(theirs.close)
        params = dict(PARAMS_GET, REQUEST_METHOD=method)
        theirs.sendall(begin(1) + record(PARAMS, 1, name_values(params)) + record(PARAMS, 1) + record(STDIN, 1))
        counting = CountingSocket(ours)
        self.peer = theirs
        FcgiConnection(counting, StubServer(app)).serve()
        recs = records(read_all(theirs))
        stdout = b''.join(c for t, c in recs if t == STDOUT)
        self.assertEqual([t for t, _ in recs][-2:], [STDOUT, END_REQUEST])
        self.assertEqual(recs[-2][1], b'')  # the empty STDOUT record that ends the stream
        return counting.sends, stdout

    def test_list_of_one_string_is_one_send(self):
        def app(env, start):
            start('200 OK', [('Content-Type', 'text/plain')])
            return [b'hello']
        sends, out = self.serve(app)
        self.assertEqual(sends, 1)
        self.assertTrue(out.endswith(b'\r\n\r\nhello'))
        self.assertIn(b'Content-Length: 5\r\n', out)

    def test_list_of_several_strings_is_one_send(self):
        def app(env, start):
            start('200 OK', [])
            return [b'a' * 70000, b'b', b'c']
        sends, out = self.serve(app)
        self.assertEqual(sends, 1)
        self.assertTrue(out.endswith(b'a' * 70000 + b'bc'))

    def test_write_completing_content_length_goes_with_the_end(self):
        def app(env, start):
            start('200 OK', [('Content-Length', '6')])
            yield b'abc'
            yield b'def'
        sends, out = self.serve(app)
        self.assertEqual(sends, 2)  # the first chunk at once, the last one with the end
        self.assertTrue(out.endswith(b'\r\n\r\nabcdef'))

    def test_empty_body_and_head_are_one_send(self):
        def redirect(env, start):
            start('302 Found', [('Location', '/x')])
            return iter(())
        self.assertEqual(self.serve(redirect)[0], 1)

        def head(env, start):
            start('200 OK', [('Content-Length', '1234')])
            return iter(())
        sends, out = self.serve(head, method='HEAD')
        self.assertEqual(sends, 1)
        self.assertIn(b'Content-Length: 1234\r\n', out)

    def test_streamed_chunks_are_not_held(self):
        seen = []

        def app(env, start):
            start('200 OK', [('Content-Type', 'text/plain')])
            yield b'first'
            # The first chunk reached the peer before the app made the next one.
            r, _, _ = select.select([self.peer], [], [], 5)
            seen.append(bool(r) and b'first' in self.peer.recv(65536, socket.MSG_PEEK))
            yield b'second'
        sends, out = self.serve(app)
        self.assertEqual(seen, [True])
        self.assertEqual(sends, 3)
        self.assertTrue(out.endswith(b'firstsecond'))

    def test_generator_failing_after_the_whole_length_still_cuts_the_response(self):
        def app(env, start):
            start('200 OK', [('Content-Length', '3')])
            yield b'abc'
            raise RuntimeError('late')
        ours, theirs = socket.socketpair()
        self.addCleanup(theirs.close)
        theirs.sendall(begin(1) + record(PARAMS, 1, name_values(PARAMS_GET)) + record(PARAMS, 1) + record(STDIN, 1))
        with contextlib.redirect_stderr(io.StringIO()):
            FcgiConnection(ours, StubServer(app)).serve()
        recs = records(read_all(theirs))
        # What the app made is sent, but no END_REQUEST: a cut response, as before.
        self.assertTrue(b''.join(c for t, c in recs if t == STDOUT).endswith(b'abc'))
        self.assertNotIn(END_REQUEST, [t for t, _ in recs])


class ScgiWritesTest(unittest.TestCase):
    def test_list_of_several_strings_is_one_send(self):
        def app(env, start):
            start('200 OK', [])
            return [b'a', b'b', b'c']
        ours, theirs = socket.socketpair()
        self.addCleanup(theirs.close)
        headers = b'CONTENT_LENGTH\x000\x00SCGI\x001\x00REQUEST_METHOD\x00GET\x00REQUEST_URI\x00/\x00'
        theirs.sendall(str(len(headers)).encode() + b':' + headers + b',')
        counting = CountingSocket(ours)
        serve_scgi(counting, StubServer(app))
        out = read_all(theirs)
        self.assertEqual(counting.sends, 1)
        self.assertTrue(out.startswith(b'Status: 200 OK\r\n'))
        self.assertTrue(out.endswith(b'\r\n\r\nabc'))


if __name__ == '__main__':
    unittest.main()
