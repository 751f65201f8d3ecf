"""bin/fcgi-pm-wsgi answering FastCGI authorizer requests (FastCGI specification 6.3):
role FCGI_AUTHORIZER over FastCGI, and the responder form (param FCGI_ROLE=AUTHORIZER)
over FastCGI and SCGI. A 200 goes out as its head alone; any other answer whole."""

import json
import unittest

from adapter_harness import (
    AUTHORIZER, REQUEST_COMPLETE, RESPONDER, AdapterCase, CgiResult, FcgiAdapterCase, base_params,
)

# What /auth/allow's head must be, byte for byte: its Content-Length is gone with its body.
GRANT_HEAD = (b'Status: 200 OK\r\nVariable-REMOTE_USER: alice\r\nVariable-AUTH_TYPE: Bearer\r\n'
              b'X-Role: AUTHORIZER\r\nX-Input-Bytes: 0\r\nContent-Type: text/plain\r\n\r\n')


def auth_params(path, **extra):
    """An authorizer's variables: no CONTENT_LENGTH, PATH_INFO or SCRIPT_NAME (6.3)."""
    p = base_params(path, HTTP_AUTHORIZATION='Bearer tok1', **extra)
    for k in ('CONTENT_LENGTH', 'PATH_INFO', 'SCRIPT_NAME'):
        del p[k]
    return p


class FastcgiAuthorizerTest(FcgiAdapterCase):
    def authorize(self, path, rid=1, role=AUTHORIZER, body=b'', **extra):
        params = auth_params(path, **extra)
        if role == RESPONDER:
            params['FCGI_ROLE'] = 'AUTHORIZER'
        self.conn.request(rid, params, body, role=role)
        return self.conn.response(rid)

    def test_a_grant_is_its_head_alone_and_the_body_is_not_made_past_it(self):
        r = self.authorize('/auth/allow')
        self.assertEqual((r.app_status, r.protocol_status), (0, REQUEST_COMPLETE))
        self.assertEqual(r.stdout, GRANT_HEAD)
        self.assertIn(b'auth body block 0', r.stderr)
        self.assertNotIn(b'auth body block 1', r.stderr)
        self.assertIn(b'close called', r.stderr)

    def test_a_list_grant_gets_no_content_length(self):
        cgi = self.authorize('/auth/allow-list').cgi
        self.assertEqual((cgi.status, cgi.header('Variable-REMOTE_USER'), cgi.body), (200, 'bob', b''))
        self.assertIsNone(cgi.header('Content-Length'))

    def test_a_denial_goes_whole(self):
        cgi = self.authorize('/auth/deny').cgi
        self.assertEqual((cgi.status, cgi.header('WWW-Authenticate'), cgi.body), (401, 'Bearer', b'token needed\n'))
        self.assertEqual(cgi.header('Content-Length'), str(len(b'token needed\n')))
        self.assertEqual(cgi.header('X-Role'), 'AUTHORIZER')

    def test_a_grant_replaced_by_a_denial_before_the_head_goes_whole(self):
        cgi = self.authorize('/auth/recover').cgi
        self.assertEqual((cgi.status, cgi.body), (403, b'revoked\n'))
        self.assertIsNone(cgi.header('Variable-REMOTE_USER'))

    def test_stdin_data_is_dropped_and_the_connection_goes_on(self):
        r = self.authorize('/auth/allow', body=b'x' * 300000)
        self.assertEqual(r.stdout, GRANT_HEAD, 'X-Input-Bytes: 0')
        self.assertEqual(self.responder('/hello').body, b'hello')

    def test_the_responder_form_is_an_authorizer_request_too(self):
        r = self.authorize('/auth/allow', role=RESPONDER, body=b'dropped')
        self.assertEqual(r.stdout, GRANT_HEAD)
        cgi = self.authorize('/auth/deny', role=RESPONDER).cgi
        self.assertEqual((cgi.status, cgi.body), (401, b'token needed\n'))

    def responder(self, path, **extra):
        self.conn.request(1, base_params(path, **extra))
        return self.conn.response(1).cgi

    def test_a_responder_request_says_RESPONDER_whatever_its_params_say(self):
        self.assertEqual(json.loads(self.responder('/environ').body)['FCGI_ROLE'], 'RESPONDER')
        self.assertEqual(json.loads(self.responder('/environ', FCGI_ROLE='FILTER').body)['FCGI_ROLE'], 'RESPONDER')

    def test_authorizer_and_responder_requests_alternate_on_one_kept_connection(self):
        pid = self.responder('/pid').body
        for i in range(5):
            self.assertEqual(self.authorize('/auth/allow', rid=i + 1).stdout, GRANT_HEAD)
            env = json.loads(self.responder('/environ', QUERY_STRING=f'i={i}').body)
            self.assertEqual((env['FCGI_ROLE'], env['QUERY_STRING']), ('RESPONDER', f'i={i}'))
            self.assertEqual(self.authorize('/auth/deny', rid=7).cgi.status, 401)
        self.assertEqual(self.responder('/pid').body, pid)
        self.assertFalse(self.conn.closed)

    def test_without_keep_conn_the_connection_is_closed_after_the_answer(self):
        self.conn.request(1, auth_params('/auth/allow'), role=AUTHORIZER, keep=False)
        self.assertEqual(self.conn.response(1).stdout, GRANT_HEAD)
        self.assertTrue(self.conn.wait_closed(5))

    def test_the_environ_has_the_request_path_for_the_decision(self):
        cgi = self.authorize('/auth/deny', REQUEST_URI='/auth/deny?private=1', QUERY_STRING='private=1').cgi
        self.assertEqual((cgi.header('X-Path'), cgi.header('X-Authorization')), ('|/auth/deny', 'Bearer tok1'))


class ScgiAuthorizerTest(AdapterCase):
    PROTOCOL = '--scgi'

    def call(self, path, body=b'', **extra):
        return self.adapter.scgi(auth_params(path, FCGI_ROLE='AUTHORIZER', **extra), body)

    def test_a_grant_is_its_head_alone(self):
        before = self.adapter.stderr()
        self.assertEqual(self.call('/auth/allow'), GRANT_HEAD)
        made = self.adapter.stderr()[len(before):]
        self.assertIn('auth body block 0', made)
        self.assertNotIn('auth body block 1', made)
        self.assertIn('close called', made)

    def test_a_denial_goes_whole(self):
        r = CgiResult(self.call('/auth/deny'))
        self.assertEqual((r.status, r.header('WWW-Authenticate'), r.body), (401, 'Bearer', b'token needed\n'))

    def test_a_body_is_not_read_and_the_answer_still_arrives(self):
        self.assertEqual(self.call('/auth/allow', body=b'z' * (1 << 20)), GRANT_HEAD)

    def test_a_plain_request_is_a_responder(self):
        params = base_params('/environ')
        params.pop('CONTENT_LENGTH')
        env = json.loads(CgiResult(self.adapter.scgi(params)).body)
        self.assertEqual(env['FCGI_ROLE'], 'RESPONDER')


if __name__ == '__main__':
    unittest.main()
