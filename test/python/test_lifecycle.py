"""Process-level behaviour: start-up errors, SIGTERM when idle and when busy."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import unittest

from adapter_harness import ADAPTER, HERE, REPO, STDERR, Adapter, CgiResult, base_params, scgi_request


class SigtermTest(unittest.TestCase):
    def setUp(self):
        self.adapters = []

    def tearDown(self):
        for a in self.adapters:
            a.stop()

    def start(self, proto):
        a = Adapter(proto)
        self.adapters.append(a)
        return a

    def test_idle_exits_at_once(self):
        a = self.start('--fastcgi')
        c = a.fcgi()
        c.request(1, base_params('/hello'))
        self.assertEqual(c.response(1).cgi.body, b'hello')
        a.proc.send_signal(signal.SIGTERM)  # idle on a kept connection
        self.assertEqual(a.wait_exit(5), 0)
        c.close()

    def test_idle_in_accept_exits_at_once(self):
        a = self.start('--scgi')
        a.proc.send_signal(signal.SIGTERM)
        self.assertEqual(a.wait_exit(5), 0)

    def test_busy_fastcgi_finishes_the_request_then_exits(self):
        a = self.start('--fastcgi')
        c = a.fcgi()
        c.request(1, base_params('/slow', 'ms=400'))
        c.wait_for(lambda t, r, cont: t == STDERR and b'slow: sleeping' in cont, what='app running')
        a.proc.send_signal(signal.SIGTERM)
        r = c.response(1)
        self.assertEqual((r.cgi.status, r.cgi.body), (200, b'slept 400'))
        self.assertEqual(a.wait_exit(5), 0)
        self.assertTrue(c.wait_closed(5))
        c.close()

    def test_busy_scgi_finishes_the_request_then_exits(self):
        a = self.start('--scgi')
        params = base_params('/slow', 'ms=400')
        params.pop('CONTENT_LENGTH')
        result = {}

        import threading
        t = threading.Thread(target=lambda: result.setdefault('out', scgi_request(a.path, params)))
        t.start()
        deadline = time.monotonic() + 5
        while 'slow: sleeping' not in a.stderr() and time.monotonic() < deadline:
            time.sleep(0.01)
        a.proc.send_signal(signal.SIGTERM)
        t.join(10)
        self.assertEqual(CgiResult(result['out']).body, b'slept 400')
        self.assertEqual(a.wait_exit(5), 0)


class MaxRequestsTest(unittest.TestCase):
    """FCGI_PM_MAX_REQUESTS (fcgi-pm's accept: direct pools): exit 0 after that many
    requests; a connection closed before a request (a readiness probe) is none."""

    def test_fastcgi_exits_after_max_requests_on_a_kept_connection(self):
        a = Adapter('--fastcgi', env={'FCGI_PM_MAX_REQUESTS': '3'})
        try:
            c = a.fcgi()
            for rid in (1, 2, 3):
                c.request(rid, base_params('/hello'))
                self.assertEqual(c.response(rid).cgi.body, b'hello')
            self.assertEqual(a.wait_exit(5), 0)
            self.assertTrue(c.wait_closed(5))
            c.close()
        finally:
            a.stop()

    def test_scgi_counts_requests_not_probes(self):
        a = Adapter('--scgi', env={'FCGI_PM_MAX_REQUESTS': '2'})
        try:
            params = base_params('/hello')
            params.pop('CONTENT_LENGTH')
            self.assertEqual(CgiResult(a.scgi(params)).body, b'hello')
            self.assertIsNone(a.wait_exit(0.2), 'the readiness probe and one request are not two')
            self.assertEqual(CgiResult(a.scgi(params)).body, b'hello')
            self.assertEqual(a.wait_exit(5), 0)
        finally:
            a.stop()


class StartupTest(unittest.TestCase):
    def run_adapter(self, args, stdin=subprocess.DEVNULL):
        return subprocess.run([sys.executable, ADAPTER, *args], stdin=stdin, capture_output=True, timeout=20,
                              env={'PATH': os.environ.get('PATH', '/usr/bin'), 'PYTHONDONTWRITEBYTECODE': '1'})

    def test_fd0_not_a_socket(self):
        r = self.run_adapter(['--path', HERE, 'wsgi_apps:app'])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b'fd 0 is not a listening socket', r.stderr)

    def test_missing_module(self):
        r = self.run_adapter(['no_such_module_here:app'])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b'ModuleNotFoundError', r.stderr)

    def test_missing_callable(self):
        r = self.run_adapter(['--path', HERE, 'wsgi_apps:nothing'])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b'AttributeError', r.stderr)

    def test_fastcgi_and_scgi_are_exclusive(self):
        r = self.run_adapter(['--fastcgi', '--scgi', 'x:y'])
        self.assertEqual(r.returncode, 2)

    def test_socket_option_binds_a_unix_path(self):
        import tempfile
        d = tempfile.mkdtemp(prefix='fpm-py-')
        path = os.path.join(d, 's.sock')
        p = subprocess.Popen([sys.executable, ADAPTER, '--scgi', '--socket', path, '--path', HERE, 'wsgi_apps:app'],
                             stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             env={'PATH': os.environ.get('PATH', '/usr/bin'), 'PYTHONDONTWRITEBYTECODE': '1'})
        try:
            deadline = time.monotonic() + 10
            while not os.path.exists(path):
                self.assertLess(time.monotonic(), deadline, 'socket not created')
                self.assertIsNone(p.poll(), p.stderr.read() if p.poll() is not None else '')
                time.sleep(0.02)
            params = base_params('/hello')
            params.pop('CONTENT_LENGTH')
            for _ in range(50):
                try:
                    out = scgi_request(path, params)
                    break
                except (ConnectionRefusedError, FileNotFoundError):
                    time.sleep(0.02)
            self.assertEqual(CgiResult(out).body, b'hello')
        finally:
            p.send_signal(signal.SIGTERM)
            self.assertEqual(p.wait(5), 0)
            p.stderr.close()
            import shutil
            shutil.rmtree(d, ignore_errors=True)


class InstalledTest(unittest.TestCase):
    """The adapter away from the repository: installed under another prefix and reached
    through a symlink (as /usr/bin/fcgi-pm-wsgi or node_modules/.bin is), or as a zipapp."""

    def setUp(self):
        import tempfile
        self.dir = tempfile.mkdtemp(prefix='fpm-inst-')
        self.adapter = None

    def tearDown(self):
        if self.adapter is not None:
            self.adapter.stop()
            shutil.rmtree(self.adapter.dir, ignore_errors=True)
        shutil.rmtree(self.dir, ignore_errors=True)

    def serves_hello(self, command):
        self.adapter = Adapter('--scgi', command=command)
        params = base_params('/hello')
        params.pop('CONTENT_LENGTH')
        self.assertEqual(CgiResult(self.adapter.scgi(params)).body, b'hello')

    def test_through_a_symlink_it_finds_the_package_beside_its_real_path(self):
        prefix = os.path.join(self.dir, 'lib', 'fcgi-pm')
        os.makedirs(os.path.join(prefix, 'bin'))
        shutil.copy(ADAPTER, os.path.join(prefix, 'bin'))
        shutil.copytree(os.path.join(REPO, 'fcgi_pm_wsgi'), os.path.join(prefix, 'fcgi_pm_wsgi'))
        os.makedirs(os.path.join(self.dir, 'bin'))
        link = os.path.join(self.dir, 'bin', 'fcgi-pm-wsgi')
        os.symlink(os.path.join(prefix, 'bin', 'fcgi-pm-wsgi'), link)
        self.serves_hello([sys.executable, link])

    def test_as_a_module(self):
        env = {'PATH': os.environ.get('PATH', '/usr/bin'), 'PYTHONDONTWRITEBYTECODE': '1', 'PYTHONPATH': REPO}
        r = subprocess.run([sys.executable, '-m', 'fcgi_pm_wsgi', '--help'], capture_output=True, timeout=20, env=env, cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b'usage: fcgi-pm-wsgi', r.stdout)

    def test_as_a_zipapp(self):
        staging = os.path.join(self.dir, 'staging')
        shutil.copytree(os.path.join(REPO, 'fcgi_pm_wsgi'), os.path.join(staging, 'fcgi_pm_wsgi'))
        pyz = os.path.join(self.dir, 'fcgi-pm-wsgi.pyz')
        subprocess.run([sys.executable, '-m', 'zipapp', staging, '-m', 'fcgi_pm_wsgi.main:main', '-o', pyz], check=True, timeout=20)
        self.serves_hello([sys.executable, pyz])


if __name__ == '__main__':
    unittest.main()
