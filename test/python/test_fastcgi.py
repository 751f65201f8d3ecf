"""bin/fcgi-pm-wsgi over FastCGI: PEP 3333 behaviour and the FastCGI protocol duties."""

import hashlib
import json
import os
import struct
import unittest

from adapter_harness import (
    ABORT_REQUEST, CANT_MPX_CONN, END_REQUEST, FILTER, GET_VALUES, GET_VALUES_RESULT, PARAMS,
    REQUEST_COMPLETE, STDERR, STDIN, STDOUT, UNKNOWN_ROLE, UNKNOWN_TYPE,
    Adapter, FcgiAdapterCase, base_params, begin, name_values, parse_name_values, record, stream,
)
from wsgi_apps import big_block

MB = 1024 * 1024


class FastcgiAdapterTest(FcgiAdapterCase):
    def get(self, path, query='', body=b'', method='GET', **extra):
        params = base_params(path, query, method, **extra)
        if body:
            params['CONTENT_LENGTH'] = str(len(body))
        self.conn.request(1, params, body)
        return self.conn.response(1)

    # ---- responses ----

    def test_get_returns_page_with_content_length_from_a_list_result(self):
        r = self.get('/hello')
        self.assertEqual((r.app_status, r.protocol_status), (0, REQUEST_COMPLETE))
        cgi = r.cgi
        self.assertEqual(cgi.status, 200)
        self.assertEqual(cgi.body, b'hello')
        self.assertEqual(cgi.header('Content-Type'), 'text/plain')
        self.assertEqual(cgi.header('Content-Length'), '5')
        self.assertEqual(r.stdout.count(b'Status: 200 OK\r\n'), 1)

    def test_many_requests_on_one_kept_connection(self):
        for i in range(50):
            r = self.get('/environ', f'i={i}')
            self.assertEqual(json.loads(r.cgi.body)['QUERY_STRING'], f'i={i}')

    def test_connection_closed_after_request_without_keep_conn(self):
        self.conn.request(1, base_params('/hello'), keep=False)
        r = self.conn.response(1)
        self.assertEqual(r.cgi.body, b'hello')
        self.assertTrue(self.conn.wait_closed(5), 'adapter closes a connection without FCGI_KEEP_CONN')

    def test_write_callable_then_iterable_in_order(self):
        r = self.get('/write')
        self.assertEqual(r.cgi.body, b'one,two,three,four')
        self.assertIsNone(r.cgi.header('Content-Length'), 'write() was used: length unknown')

    def test_empty_iterable_gets_content_length_zero_but_204_does_not(self):
        r = self.get('/empty')
        self.assertEqual((r.cgi.status, r.cgi.header('Content-Length'), r.cgi.body), (200, '0', b''))
        r = self.get('/no-content')
        self.assertEqual((r.cgi.status, r.cgi.header('Content-Length'), r.cgi.body), (204, None, b''))

    def test_large_generator_response_is_split_into_records_of_at_most_65535_bytes(self):
        n, size = 80, 65549
        r = self.get('/big', f'n={n}&size={size}')
        expected = b''.join(big_block(i, size) for i in range(n))
        self.assertEqual(len(r.cgi.body), len(expected))
        self.assertEqual(hashlib.sha256(r.cgi.body).hexdigest(), hashlib.sha256(expected).hexdigest())
        sizes = [len(c) for t, _, c in r.records if t == STDOUT]
        self.assertLessEqual(max(sizes), 65535)
        self.assertEqual(sizes[-1], 0, 'the STDOUT stream ends with an empty record')

    def test_file_wrapper(self):
        r = self.get('/file-wrapper')
        self.assertEqual(r.cgi.body, b'0123456789' * 10000)

    # ---- environ ----

    def test_environ_has_the_wsgi_keys_and_cgi_variables(self):
        r = self.get('/environ', 'a=1&b=%C3%A9', HTTPS='on', HTTP_X_THING='v', HTTP_CONTENT_LENGTH='5', HTTP_CONTENT_TYPE='x/y')
        env = json.loads(r.cgi.body)
        self.assertEqual(env['wsgi.version'], [1, 0])
        self.assertEqual(env['wsgi.url_scheme'], 'https')
        self.assertIs(env['wsgi.multithread'], False)
        self.assertIs(env['wsgi.multiprocess'], True)
        self.assertIs(env['wsgi.run_once'], False)
        self.assertIs(env['wsgi.input_terminated'], True)
        self.assertTrue(env['has_file_wrapper'])
        self.assertEqual(env['input_has'], ['__iter__', 'read', 'readline', 'readlines'])
        self.assertEqual(env['errors_has'], ['flush', 'write', 'writelines'])
        self.assertEqual(env['non_str_keys'], [])
        self.assertEqual(env['QUERY_STRING'], 'a=1&b=%C3%A9')
        self.assertEqual(env['HTTP_X_THING'], 'v')
        self.assertNotIn('HTTP_CONTENT_LENGTH', env)
        self.assertNotIn('HTTP_CONTENT_TYPE', env)
        for k in ('REQUEST_METHOD', 'SCRIPT_NAME', 'PATH_INFO', 'SERVER_NAME', 'SERVER_PORT', 'SERVER_PROTOCOL'):
            self.assertIn(k, env)

    def test_nginx_style_params_whole_path_in_script_name(self):
        # nginx's stock fastcgi_params: SCRIPT_NAME=$fastcgi_script_name, no PATH_INFO.
        params = base_params('/x')
        del params['PATH_INFO']
        params.update(SCRIPT_NAME='/env/caf\u00e9/\u2713', REQUEST_URI='/env/caf%C3%A9/%E2%9C%93?q=1', QUERY_STRING='q=1')
        self.conn.request(1, params)
        env = json.loads(self.conn.response(1).cgi.body)
        self.assertEqual(env['SCRIPT_NAME'], '')
        # PEP 3333: the path's UTF-8 bytes, one str char per byte (latin-1).
        self.assertEqual(env['PATH_INFO'], '/env/caf\u00e9/\u2713'.encode('utf-8').decode('latin-1'))

    def test_front_end_split_is_kept(self):
        params = base_params('/env/x/y', SCRIPT_NAME='/app', REQUEST_URI='/app/env/x/y')
        self.conn.request(1, params)
        env = json.loads(self.conn.response(1).cgi.body)
        self.assertEqual((env['SCRIPT_NAME'], env['PATH_INFO']), ('/app', '/env/x/y'))

    # ---- wsgi.input ----

    def test_streaming_upload_app_starts_before_the_body_ends(self):
        body = os.urandom(5 * MB)
        params = base_params('/upload', method='POST', CONTENT_LENGTH=str(len(body)), CONTENT_TYPE='application/octet-stream')
        first, rest = body[:64 * 1024], body[64 * 1024:]
        self.conn.send(begin(1), stream(PARAMS, 1, name_values(params)),
                       b''.join(record(STDIN, 1, first[i:i + 32768]) for i in range(0, len(first), 32768)))
        # Only 64 KiB of 5 MiB were sent: the application must already be reading.
        self.conn.wait_for(lambda t, r, c: t == STDERR and b'started reading' in c, what='"started reading" on STDERR')
        self.conn.send(stream(STDIN, 1, rest, piece=50000))
        r = self.conn.response(1, timeout=30)
        self.assertEqual(json.loads(r.cgi.body), {'sha256': hashlib.sha256(body).hexdigest(), 'bytes': 5 * MB, 'content_length': str(5 * MB)})
        self.assertIn(b'started reading', r.stderr)

    def test_input_readline_readlines_iteration_and_read(self):
        body = b'first line\nabcdef\nl3\nl4\nl5\nl6 no newline'
        r = self.get('/lines', body=body, method='POST')
        first, limited, rest, two, iterated, after = json.loads(r.cgi.body)
        self.assertEqual(first, 'first line\n')
        self.assertEqual(limited, 'abc')
        self.assertEqual(rest, 'def\n')
        self.assertEqual(two, ['l3\n'])
        self.assertEqual(iterated, ['l4\n', 'l5\n', 'l6 no newline'])
        self.assertEqual(after, '')

    def test_body_split_in_many_small_records(self):
        body = bytes(range(256)) * 100
        params = base_params('/upload', method='POST', CONTENT_LENGTH=str(len(body)))
        self.conn.send(begin(1), stream(PARAMS, 1, name_values(params), piece=7), stream(STDIN, 1, body, piece=3))
        r = self.conn.response(1)
        self.assertEqual(json.loads(r.cgi.body)['sha256'], hashlib.sha256(body).hexdigest())

    def test_records_with_padding_are_understood(self):
        params = name_values(base_params('/hello'))
        self.conn.send(record(1, 1, struct.pack('>HB5x', 1, 1), padding=0), record(PARAMS, 1, params, padding=5),
                       record(PARAMS, 1, padding=3), record(STDIN, 1, padding=7))
        self.assertEqual(self.conn.response(1).cgi.body, b'hello')

    # ---- start_response and errors ----

    def test_exc_info_before_head_replaces_status_and_headers(self):
        r = self.get('/exc-before-head')
        self.assertEqual(r.cgi.status, 503)
        self.assertEqual(r.cgi.header('X-Recovered'), 'yes')
        self.assertEqual(r.cgi.body, b'recovered')

    def test_exc_info_after_head_cuts_the_response_and_logs(self):
        self.conn.request(1, base_params('/exc-after-head'))
        self.assertTrue(self.conn.wait_closed(), 'connection closed so the front end sees a cut response')
        self.assertFalse(any(t == END_REQUEST for t, _, _ in self.conn.records), 'no END_REQUEST for a cut response')
        out = b''.join(c for t, _, c in self.conn.records if t == STDOUT)
        self.assertIn(b'part one;', out)
        self.assertNotIn(b'never sent', out)
        err = b''.join(c for t, _, c in self.conn.records if t == STDERR)
        self.assertIn(b'RuntimeError: too late to change', err)
        # The worker still serves.
        c2 = self.adapter.fcgi()
        try:
            c2.request(1, base_params('/hello'))
            self.assertEqual(c2.response(1).cgi.body, b'hello')
        finally:
            c2.close()

    def test_start_response_twice_without_exc_info_is_a_500(self):
        r = self.get('/twice')
        self.assertEqual(r.cgi.status, 500)
        self.assertIn(b'start_response() called again', r.stderr)

    def test_application_exception_is_500_with_traceback_and_worker_keeps_serving(self):
        pid_before = self.get('/pid').cgi.body
        r = self.get('/boom')
        self.assertEqual((r.app_status, r.protocol_status), (0, REQUEST_COMPLETE))
        self.assertEqual(r.cgi.status, 500)
        self.assertEqual(r.cgi.body, b'500 Internal Server Error\n')
        self.assertIn(b'Traceback (most recent call last)', r.stderr)
        self.assertIn(b'ValueError: boom from the application', r.stderr)
        self.assertIn(b'GET /boom', r.stderr)
        # Same connection, same process.
        self.assertEqual(self.get('/pid').cgi.body, pid_before)
        self.assertEqual(self.get('/hello').cgi.body, b'hello')

    def test_yielding_str_is_a_500(self):
        r = self.get('/not-bytes')
        self.assertEqual(r.cgi.status, 500)
        self.assertIn(b'TypeError', r.stderr)

    def test_close_is_called_after_iteration(self):
        r = self.get('/closing')
        self.assertEqual(r.cgi.body, b'ab')
        self.assertIn(b'close called', r.stderr)

    def test_close_is_called_when_iteration_fails(self):
        r = self.get('/closing-fails')
        self.assertEqual(r.cgi.status, 500)
        self.assertIn(b'close called', r.stderr)
        self.assertIn(b'ValueError: iteration failed', r.stderr)

    def test_sys_stdin_is_not_the_listening_socket(self):
        self.assertEqual(json.loads(self.get('/stdin').cgi.body), {'stdin': ''})

    # ---- protocol duties ----

    def test_get_values(self):
        self.conn.send(record(GET_VALUES, 0, name_values({'FCGI_MAX_CONNS': '', 'FCGI_MAX_REQS': '', 'FCGI_MPXS_CONNS': '', 'X_UNKNOWN': ''})))
        _, rid, content = self.conn.wait_for(lambda t, r, c: t == GET_VALUES_RESULT, what='GET_VALUES_RESULT')
        self.assertEqual(rid, 0)
        self.assertEqual(parse_name_values(content), {'FCGI_MAX_CONNS': '1', 'FCGI_MAX_REQS': '1', 'FCGI_MPXS_CONNS': '0'})
        self.assertEqual(self.get('/hello').cgi.body, b'hello', 'connection still usable')

    def test_unknown_management_record_type(self):
        self.conn.send(record(42, 0, b'xyz'))
        _, rid, content = self.conn.wait_for(lambda t, r, c: t == UNKNOWN_TYPE, what='UNKNOWN_TYPE')
        self.assertEqual((rid, content), (0, bytes((42,)) + b'\0' * 7))

    def test_filter_role_is_refused_and_connection_stays_usable(self):
        self.conn.send(begin(5, role=FILTER), stream(PARAMS, 5, name_values(base_params('/hello'))), stream(STDIN, 5, b''))
        r = self.conn.response(5)
        self.assertEqual(r.protocol_status, UNKNOWN_ROLE)
        self.assertEqual(r.stdout, b'')
        self.assertEqual(self.get('/hello').cgi.body, b'hello')

    def test_second_concurrent_request_id_gets_cant_mpx_conn(self):
        body = b'x' * 1000
        params = base_params('/upload', method='POST', CONTENT_LENGTH=str(len(body)))
        self.conn.send(begin(1), stream(PARAMS, 1, name_values(params)), record(STDIN, 1, body[:500]))
        self.conn.wait_for(lambda t, r, c: t == STDERR and r == 1, what='request 1 running')
        self.conn.send(begin(2), stream(PARAMS, 2, name_values(base_params('/hello'))), stream(STDIN, 2, b''))
        r2 = self.conn.response(2)
        self.assertEqual(r2.protocol_status, CANT_MPX_CONN)
        self.assertEqual(r2.stdout, b'')
        self.conn.send(record(STDIN, 1, body[500:]), record(STDIN, 1))
        r1 = self.conn.response(1)
        self.assertEqual(json.loads(r1.cgi.body)['sha256'], hashlib.sha256(body).hexdigest())

    def test_abort_while_the_app_reads_input(self):
        params = base_params('/upload', method='POST', CONTENT_LENGTH='100000')
        self.conn.send(begin(1), stream(PARAMS, 1, name_values(params)), record(STDIN, 1, b'y' * 2000))
        self.conn.wait_for(lambda t, r, c: t == STDERR and b'started reading' in c, what='app reading')
        self.conn.send(record(ABORT_REQUEST, 1))
        r = self.conn.response(1)
        self.assertEqual(r.protocol_status, REQUEST_COMPLETE)
        self.assertNotEqual(r.app_status, 0)
        self.assertEqual(self.get('/hello').cgi.body, b'hello', 'the connection and worker go on')

    def test_abort_while_streaming_stops_the_app_and_calls_close(self):
        self.conn.request(1, base_params('/drip'))
        self.conn.wait_for(lambda t, r, c: t == STDERR and b'drip: streaming' in c, what='drip streaming')
        self.conn.send(record(ABORT_REQUEST, 1))
        r = self.conn.response(1, timeout=5)
        self.assertNotEqual(r.app_status, 0)
        self.assertIn(b'drip: closed', r.stderr)
        self.assertLess(r.stdout.count(b'drop '), 400, 'stopped long before the end')

    def test_front_end_closing_mid_response_does_not_kill_the_worker(self):
        self.conn.request(1, base_params('/drip'))
        self.conn.wait_for(lambda t, r, c: t == STDERR and b'drip: streaming' in c, what='drip streaming')
        self.conn.close()
        c2 = self.adapter.fcgi()
        try:
            c2.request(1, base_params('/hello'))
            self.assertEqual(c2.response(1, timeout=5).cgi.body, b'hello')
        finally:
            c2.close()

    def test_probe_connection_closed_quietly(self):
        before = self.adapter.stderr()
        self.conn.sock.shutdown(1)  # SHUT_WR: FIN before any record
        self.assertTrue(self.conn.wait_closed(5))
        self.assertEqual(self.adapter.stderr(), before, 'nothing logged for a probe')

    def test_idle_kept_connection_gives_way_to_a_new_one(self):
        self.assertEqual(self.get('/hello').cgi.body, b'hello')  # self.conn now idle, kept open
        c2 = self.adapter.fcgi()
        try:
            c2.request(1, base_params('/hello'))
            self.assertEqual(c2.response(1, timeout=5).cgi.body, b'hello')
        finally:
            c2.close()


class ScriptNameOptionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.adapter = Adapter('--fastcgi', extra=('--script-name', '/app/'))

    @classmethod
    def tearDownClass(cls):
        cls.adapter.stop()

    def env_for(self, **params):
        c = self.adapter.fcgi()
        try:
            p = base_params('/')
            del p['PATH_INFO']
            p.update(params)
            c.request(1, p)
            return json.loads(c.response(1).cgi.body)
        finally:
            c.close()

    def test_prefix_split_from_request_uri(self):
        env = self.env_for(SCRIPT_NAME='/app/env/a%20b', REQUEST_URI='/app/env/a%20b?x=1')
        self.assertEqual((env['SCRIPT_NAME'], env['PATH_INFO']), ('/app', '/env/a b'))

    def test_prefix_split_from_script_name_and_path_info(self):
        env = self.env_for(SCRIPT_NAME='', PATH_INFO='/app/env/z', REQUEST_URI='/ignored')
        self.assertEqual((env['SCRIPT_NAME'], env['PATH_INFO']), ('/app', '/env/z'))


if __name__ == '__main__':
    unittest.main()
