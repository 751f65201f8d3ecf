"""--preload: the fork server, driven the way fcgi-pm's Node IPC channel drives it (JSON
lines; a listening socket as SCM_RIGHTS with a NODE_HANDLE message, answered with
NODE_HANDLE_ACK), from the other end of a socketpair written here."""

import array
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

from adapter_harness import ADAPTER, AUTHORIZER, HERE, TIMEOUT, FcgiConn, base_params
from test_authorizer import GRANT_HEAD, auth_params
from fcgi_pm_wsgi import preload


class Channel:
    """fcgi-pm's side of the IPC channel."""

    def __init__(self, sock):
        self.sock = sock
        self.sock.settimeout(TIMEOUT)
        self.buf = b''

    def send_handle(self, msg, fd):
        line = json.dumps({'cmd': 'NODE_HANDLE', 'type': 'net.Server', 'msg': msg}).encode() + b'\n'
        self.sock.sendmsg([line], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', [fd]))])

    def next(self):
        while b'\n' not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError('channel closed')
            self.buf += chunk
        line, self.buf = self.buf.split(b'\n', 1)
        return json.loads(line)


def listening_socket(d, name):
    path = os.path.join(d, name)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(16)
    return s, path


class IpcChannelTest(unittest.TestCase):
    def test_a_handle_message_yields_its_fd_and_is_acknowledged(self):
        ours, theirs = socket.socketpair()
        chan = preload.IpcChannel(os.dup(theirs.fileno()))
        theirs.close()
        d = tempfile.mkdtemp(prefix='fpm-ipc-')
        lst, _ = listening_socket(d, 'a.sock')
        peer = Channel(ours)
        peer.send_handle({'fork': 7}, lst.fileno())
        ours.sendall(b'{"cmd":"NODE_SOMETHING_ELSE"}\n{"plain": 1}\n')
        got = []
        while len(got) < 2:
            got.extend(chan.receive())
        (msg, fd), (plain, nofd) = got
        self.assertEqual(msg, {'fork': 7})
        self.assertEqual(os.fstat(fd).st_ino, os.fstat(lst.fileno()).st_ino, 'the same socket arrived')
        self.assertEqual((plain, nofd), ({'plain': 1}, None), "Node's own messages are skipped")
        self.assertEqual(peer.next(), {'cmd': 'NODE_HANDLE_ACK'})
        os.close(fd)
        lst.close()
        chan.sock.close()
        ours.close()
        shutil.rmtree(d, ignore_errors=True)


class ForkServerTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix='fpm-pre-')
        ours, theirs = socket.socketpair()
        env = {'PATH': os.environ.get('PATH', '/usr/bin:/bin'), 'PYTHONDONTWRITEBYTECODE': '1', 'LANG': 'C.UTF-8',
               'NODE_CHANNEL_FD': str(theirs.fileno()), 'NODE_CHANNEL_SERIALIZATION_MODE': 'json'}
        self.stderr = open(os.path.join(self.dir, 'stderr.log'), 'wb')
        self.proc = subprocess.Popen([sys.executable, ADAPTER, '--preload', '--fastcgi', '--path', HERE, 'wsgi_apps:app'],
                                     pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self.stderr, env=env, cwd=self.dir)
        theirs.close()
        self.chan = Channel(ours)

    def tearDown(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()
        self.chan.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def fork(self, wid):
        lst, path = listening_socket(self.dir, f'w{wid}.sock')
        self.chan.send_handle({'fork': wid}, lst.fileno())
        lst.close()  # the parent has its copy; the child will have the only one
        self.assertEqual(self.chan.next(), {'cmd': 'NODE_HANDLE_ACK'})
        m = self.chan.next()
        self.assertEqual(m['forked'], wid)
        return m['pid'], path

    def get(self, path):
        c = FcgiConn(path)
        c.request(1, base_params('/hello'))
        body = c.response(1).cgi.body
        c.sock.close()
        return body

    def test_ready_then_forks_that_serve_and_are_reaped(self):
        ready = self.chan.next()
        self.assertEqual(ready, {'ready': True, 'pid': self.proc.pid})
        pid1, path1 = self.fork(1)
        pid2, path2 = self.fork(2)
        self.assertNotEqual(pid1, pid2)
        for pid in (pid1, pid2):
            with open(f'/proc/{pid}/stat') as f:
                fields = f.read().rsplit(')', 1)[1].split()
            self.assertEqual(int(fields[1]), self.proc.pid, 'a child of the fork server')
            self.assertEqual(int(fields[2]), pid, 'leader of its own process group')
        self.assertEqual(self.get(path1), b'hello')
        self.assertEqual(self.get(path2), b'hello')
        # fcgi-pm stops a child itself; the parent reports how it went.
        os.kill(pid1, signal.SIGKILL)
        self.assertEqual(self.chan.next(), {'exited': 1, 'pid': pid1, 'code': None, 'signal': 'SIGKILL'})
        os.kill(pid2, signal.SIGTERM)  # idle: exits at once with 0
        self.assertEqual(self.chan.next(), {'exited': 2, 'pid': pid2, 'code': 0, 'signal': None})

    def test_a_forked_worker_answers_authorizer_requests(self):
        self.chan.next()
        _, path = self.fork(1)
        c = FcgiConn(path)
        try:
            c.request(1, auth_params('/auth/allow'), body=b'dropped', role=AUTHORIZER)
            self.assertEqual(c.response(1).stdout, GRANT_HEAD)
            c.request(2, auth_params('/auth/deny'), role=AUTHORIZER)
            self.assertEqual(c.response(2).cgi.body, b'token needed\n')
            c.request(3, base_params('/hello'))
            self.assertEqual(c.response(3).cgi.body, b'hello')
        finally:
            c.close()

    def test_children_get_sigterm_when_the_parent_dies(self):
        self.chan.next()
        pid, path = self.fork(1)
        self.proc.kill()
        self.proc.wait()
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            try:
                with open(f'/proc/{pid}/stat') as f:
                    if f.read().rsplit(')', 1)[1].split()[0] == 'Z':
                        break
            except FileNotFoundError:
                break
            time.sleep(0.02)
        else:
            self.fail('the child outlived its parent')

    def test_eof_on_the_channel_ends_the_parent(self):
        self.chan.next()
        self.chan.sock.close()
        self.assertEqual(self.proc.wait(TIMEOUT), 0)


class PreloadWithoutFcgiPmTest(unittest.TestCase):
    def test_a_clear_error_without_the_channel(self):
        env = {'PATH': os.environ.get('PATH', '/usr/bin:/bin'), 'PYTHONDONTWRITEBYTECODE': '1'}
        r = subprocess.run([sys.executable, ADAPTER, '--preload', '--path', HERE, 'wsgi_apps:app'], env=env,
                           capture_output=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b'--preload needs fcgi-pm', r.stderr)


if __name__ == '__main__':
    unittest.main()
