"""bin/fcgi-pm-wsgi over SCGI: one request per connection, the body framed by CONTENT_LENGTH."""

import hashlib
import json
import os
import socket
import unittest

from adapter_harness import AdapterCase, CgiResult, base_params
from wsgi_apps import big_block

MB = 1024 * 1024


class ScgiAdapterTest(AdapterCase):
    PROTOCOL = '--scgi'

    def call(self, path, query='', body=b'', method='GET', **extra):
        params = base_params(path, query, method, **extra)
        params.pop('CONTENT_LENGTH')
        return CgiResult(self.adapter.scgi(params, body))

    def test_get(self):
        r = self.call('/hello')
        self.assertEqual((r.status, r.body, r.header('Content-Length')), (200, b'hello', '5'))
        self.assertTrue(r.raw.startswith(b'Status: 200 OK\r\n'))

    def test_post_body_streamed_to_the_app(self):
        body = os.urandom(2 * MB + 17)
        r = self.call('/upload', body=body, method='POST', CONTENT_TYPE='application/octet-stream')
        self.assertEqual(json.loads(r.body)['sha256'], hashlib.sha256(body).hexdigest())

    def test_environ_from_nginx_scgi_params(self):
        # nginx's scgi_params send neither SCRIPT_NAME nor PATH_INFO.
        params = base_params('/x')
        for k in ('SCRIPT_NAME', 'PATH_INFO', 'CONTENT_LENGTH'):
            del params[k]
        params.update(REQUEST_URI='/env/%C3%BCber?q=%E2%9C%93', QUERY_STRING='q=%E2%9C%93', REQUEST_SCHEME='https')
        env = json.loads(CgiResult(self.adapter.scgi(params)).body)
        self.assertEqual(env['SCRIPT_NAME'], '')
        self.assertEqual(env['PATH_INFO'], '/env/\u00fcber'.encode('utf-8').decode('latin-1'))
        self.assertEqual(env['wsgi.url_scheme'], 'https')
        self.assertEqual(env['CONTENT_LENGTH'], '0')
        self.assertEqual(env['SCGI'], '1')

    def test_large_streamed_response(self):
        r = self.call('/big', 'n=40&size=100003')
        expected = b''.join(big_block(i, 100003) for i in range(40))
        self.assertEqual(hashlib.sha256(r.body).hexdigest(), hashlib.sha256(expected).hexdigest())

    def test_exception_is_500_with_traceback_on_stderr_and_next_request_works(self):
        pid = self.call('/pid').body
        r = self.call('/boom')
        self.assertEqual(r.status, 500)
        err = self.adapter.stderr()
        self.assertIn('Traceback (most recent call last)', err)
        self.assertIn('ValueError: boom from the application', err)
        self.assertEqual(self.call('/pid').body, pid)

    def test_bad_netstring_gets_400(self):
        for raw in (b'abc:xyz,', b'5:CONTE,', b'12:CONTENT_LENGTH\x000', b'10:SCGI\x001\x00ab\x00,'):
            out = self.adapter.scgi({}, raw=raw)
            self.assertTrue(out.startswith(b'Status: 400 '), (raw, out))
        self.assertIn('bad SCGI request', self.adapter.stderr())
        self.assertEqual(self.call('/hello').body, b'hello')

    def test_app_that_ignores_the_body_still_answers_completely(self):
        # Unread body bytes must not turn the close into a reset that cuts the response.
        r = self.call('/big', 'n=20&size=65536', body=b'z' * (3 * MB), method='POST')
        self.assertEqual(len(r.body), 20 * 65536)

    def test_probe_connection(self):
        before = self.adapter.stderr()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect(self.adapter.path)
        s.shutdown(socket.SHUT_WR)
        self.assertEqual(s.recv(10), b'')
        s.close()
        self.assertEqual(self.adapter.stderr(), before)


if __name__ == '__main__':
    unittest.main()
