"""The warm fork's Django part (fcgi_pm_wsgi/warm.py) on the Django example: what a
request would build lazily is built by warm_django(), and nothing opens a database
connection; a --warm-request runs a real request and closes the connections it opened.
Each case runs in a fresh interpreter (Django's settings are process-wide)."""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

from adapter_harness import REPO, TIMEOUT

DJANGO = os.path.join(REPO, 'examples', 'django')
PYTHON = '/usr/bin/python3'  # Debian's, with python3-django

PROBE = r'''
import json, os, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from fcgi_pm_wsgi.main import load_app
from fcgi_pm_wsgi import warm
app = load_app('mysite.wsgi:application')
if sys.argv[3] == 'request':
    warm.warm_up(app, requests=['/db/'])
else:
    warm.warm_django()
from django.urls import get_resolver
from django.template import engines
from django.db import connections
resolver = get_resolver()
engine = engines['django'].engine
cached = [l for l in engine.template_loaders if hasattr(l, 'get_template_cache')]
print(json.dumps({
    'populated': resolver._populated,
    'root_regex': 'regex' in resolver.pattern.__dict__,
    'templates': sorted(k for l in cached for k in l.get_template_cache),
    'context_processors': 'template_context_processors' in engine.__dict__,
    'db_wrappers': sorted(c.alias for c in connections.all()),
    'db_connected': [c.alias for c in connections.all() if c.connection is not None],
    'sqlite_backend': 'django.db.backends.sqlite3.base' in sys.modules,
}))
'''


class DjangoWarmTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix='fpm-warm-')
        self.env = {'PATH': '/usr/bin:/bin', 'LANG': 'C.UTF-8', 'PYTHONDONTWRITEBYTECODE': '1',
                    'DJANGO_SETTINGS_MODULE': 'mysite.settings', 'DJANGO_DB_PATH': os.path.join(self.dir, 'db.sqlite3')}

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def probe(self, mode):
        r = subprocess.run([PYTHON, '-B', '-c', PROBE, REPO, DJANGO, mode], cwd=DJANGO, env=self.env,
                           capture_output=True, timeout=TIMEOUT * 3)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        return json.loads(r.stdout), r.stderr.decode()

    def test_urls_templates_and_backends_are_ready_and_no_connection_is_open(self):
        state, err = self.probe('django')
        self.assertEqual(err, '')
        self.assertTrue(state['populated'], 'every URL pattern compiled (reverse_dict)')
        self.assertTrue(state['root_regex'], "the root resolver's own pattern compiled")
        for t in ('pages/base.html', 'pages/page.html', 'pages/index.html', 'pages/form.html'):
            self.assertIn(t, state['templates'])
        self.assertTrue(state['context_processors'])
        self.assertEqual(state['db_wrappers'], ['default'])
        self.assertTrue(state['sqlite_backend'])
        self.assertEqual(state['db_connected'], [], 'a child must not inherit a database connection')

    def test_a_warm_request_runs_the_view_and_its_connection_is_closed_before_the_fork(self):
        subprocess.run([PYTHON, '-B', 'manage.py', 'migrate', '--noinput', '-v', '0'], cwd=DJANGO, env=self.env,
                       check=True, capture_output=True, timeout=TIMEOUT * 6)
        state, err = self.probe('request')
        self.assertEqual(err, '', 'the request answered 200: nothing logged')
        self.assertEqual(state['db_connected'], [])
        # It ran: /db/ deletes what it wrote, but leaves its sqlite sequence behind.
        import sqlite3
        with sqlite3.connect(self.env['DJANGO_DB_PATH']) as db:
            seq = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'pages_item'").fetchone()
        self.assertEqual(seq, (10,))


if __name__ == '__main__':
    unittest.main()
