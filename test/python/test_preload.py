"""--preload: the fork server, driven the way fcgi-pm drives it (JSON lines in on its
stdin and out on another pipe, the workers' socket directory as an inherited fd:
FCGI_PM_PRELOAD_FDS), from the other end written here."""

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


class Peer:
    """fcgi-pm's side of the channel: commands written to `out`, replies read from `inp`."""

    def __init__(self, out, inp):
        self.out = out
        self.inp = inp
        self.buf = b''
        self.spares = []

    def send(self, msg):
        os.write(self.out, json.dumps(msg).encode() + b'\n')

    def next(self):
        """The next reply other than a spare's news (kept in self.spares)."""
        while True:
            m = self.next_any()
            if isinstance(m, dict) and set(m) == {'spare'}:
                self.spares.append(m['spare'])
                continue
            return m

    def next_any(self):
        while b'\n' not in self.buf:
            import select
            r, _, _ = select.select([self.inp], [], [], TIMEOUT)
            if not r:
                raise TimeoutError('no reply from the fork server')
            chunk = os.read(self.inp, 65536)
            if not chunk:
                raise EOFError('channel closed')
            self.buf += chunk
        line, self.buf = self.buf.split(b'\n', 1)
        return json.loads(line)


class ChannelTest(unittest.TestCase):
    def test_lines_cut_anywhere_arrive_whole_and_replies_are_lines(self):
        cmd_r, cmd_w = os.pipe()
        rep_r, rep_w = os.pipe()
        chan = preload.Channel(cmd_r, rep_w)
        try:
            os.write(cmd_w, b'{"fork": 7, "sock')
            self.assertEqual(chan.receive(), [], 'half a line is kept')
            os.write(cmd_w, b'et": "a.sock"}\n\n{"fork": 8}\n')
            self.assertEqual(chan.receive(), [{'fork': 7, 'socket': 'a.sock'}, {'fork': 8}])
            chan.send({'forked': 7, 'pid': 1})
            self.assertEqual(os.read(rep_r, 100), b'{"forked": 7, "pid": 1}\n')
            os.close(cmd_w)
            self.assertIsNone(chan.receive(), 'EOF')
        finally:
            chan.close()
            os.close(rep_r)


class BindTest(unittest.TestCase):
    def test_binds_in_the_directory_of_the_fd_and_refuses_names_that_leave_it(self):
        d = tempfile.mkdtemp(prefix='fpm-bind-')
        dir_fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        try:
            s = preload.bind_worker_socket(dir_fd, 'w1.sock')
            st = os.stat(os.path.join(d, 'w1.sock'))
            self.assertEqual(oct(st.st_mode & 0o777), oct(0o600))
            s.close()
            for bad in ('', '../w.sock', 'a/b', '.hidden'):
                with self.assertRaises(OSError, msg=bad):
                    preload.bind_worker_socket(dir_fd, bad)
            self.assertEqual(sorted(os.listdir(d)), ['w1.sock'])
        finally:
            os.close(dir_fd)
            shutil.rmtree(d, ignore_errors=True)


class ForkServerCase(unittest.TestCase):
    """A fork server started as fcgi-pm starts it; the adapter's options besides
    --preload --fastcgi are the class's ARGS. SHARED: it is handed an accept: direct
    pool's listening socket too (self.shared, its path)."""
    ARGS = []
    SHARED = False

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix='fpm-pre-')
        self.sockets = os.path.join(self.dir, 'sockets')
        os.mkdir(self.sockets, 0o700)
        dir_fd = os.open(self.sockets, os.O_RDONLY | os.O_DIRECTORY)
        cmd_r, cmd_w = os.pipe()
        rep_r, rep_w = os.pipe()
        fds = [rep_w, dir_fd]
        if self.SHARED:
            self.shared = os.path.join(self.dir, 'shared.sock')
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(self.shared)
            listener.listen(16)
            fds.append(os.dup(listener.fileno()))
            listener.close()
        env = {'PATH': os.environ.get('PATH', '/usr/bin:/bin'), 'PYTHONDONTWRITEBYTECODE': '1', 'LANG': 'C.UTF-8',
               'FCGI_PM_PRELOAD_FDS': ','.join(map(str, [0, *fds])), 'HOLD_SPARES': os.path.join(self.dir, 'release')}
        self.stderr = open(os.path.join(self.dir, 'stderr.log'), 'wb')
        self.proc = subprocess.Popen([sys.executable, ADAPTER, '--preload', '--fastcgi', *self.ARGS, '--path', HERE, 'wsgi_apps:app'],
                                     pass_fds=fds, stdin=cmd_r, stdout=subprocess.DEVNULL,
                                     stderr=self.stderr, env=env, cwd=self.dir)
        for fd in (cmd_r, *fds):
            os.close(fd)
        self.chan = Peer(cmd_w, rep_r)

    def tearDown(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()
        for fd in (self.chan.out, self.chan.inp):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def fork(self, wid):
        self.chan.send({'fork': wid, 'socket': f'w{wid}.sock'})
        m = self.chan.next()
        self.assertEqual(m['forked'], wid)
        return m['pid'], os.path.join(self.sockets, f'w{wid}.sock')

    def get(self, path, route='/hello'):
        c = FcgiConn(path)
        c.request(1, base_params(route))
        body = c.response(1).cgi.body
        c.sock.close()
        return body

    def children(self):
        """The fork server's live children (pids), from /proc."""
        with open(f'/proc/{self.proc.pid}/task/{self.proc.pid}/children') as f:
            return [p for p in map(int, f.read().split()) if alive(p)]

    def warm_spare(self):
        return self.warm_spare_besides()

    def warm_spare_besides(self, *workers):
        """The spare once it is warm: blocked in recvmsg() (x86-64 syscall 47), waiting for
        its socket. A fork asked before that is made on the spot."""
        def blocked_in_recvmsg(pid):
            try:
                with open(f'/proc/{pid}/syscall') as f:
                    return f.read().split()[0] == '47'
            except (FileNotFoundError, IndexError):
                return False
        def spares():
            return [p for p in self.children() if p not in workers]
        self.wait_for('a warm spare', lambda: len(spares()) == 1 and blocked_in_recvmsg(spares()[0]))
        return spares()[0]

    def wait_for(self, what, cond):
        deadline = time.monotonic() + TIMEOUT
        while not cond():
            if time.monotonic() > deadline:
                self.fail(f'timed out waiting for {what}')
            time.sleep(0.01)


class ForkServerTest(ForkServerCase):
    """With the defaults (a spare forked ahead)."""

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
            self.assertEqual(int(fields[3]), pid, 'leader of its own session: its own scheduler autogroup, as an exec worker')
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

    def test_a_fork_that_cannot_bind_fails_and_the_parent_carries_on(self):
        self.chan.next()
        self.chan.send({'fork': 1, 'socket': '../escape.sock'})
        m = self.chan.next()
        self.assertEqual((m['failed'], m['errno']), (1, 'EINVAL'))
        self.assertEqual(os.listdir(self.dir).count('escape.sock'), 0)
        _, path = self.fork(2)
        self.assertEqual(self.get(path), b'hello')

    def test_a_child_reads_eof_on_stdin_not_the_commands(self):
        self.chan.next()
        pid, path = self.fork(1)
        self.assertEqual(self.get(path), b'hello')  # it serves: its set-up is done
        self.assertEqual(os.readlink(f'/proc/{pid}/fd/0'), os.devnull)

    def test_eof_on_the_channel_ends_the_parent(self):
        self.chan.next()
        os.close(self.chan.out)
        self.assertEqual(self.proc.wait(TIMEOUT), 0)


def alive(pid):
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except FileNotFoundError:
        return False


class WarmForkTest(ForkServerCase):
    """The warm fork: the operator's hook and warm-up request run in the parent before the
    first fork, and a spare child forked ahead (which ran them again: its first request
    finds the pages it writes already its own) is the worker the next fork hands out."""

    ARGS = ['--warm', 'wsgi_apps:warm_hook', '--warm-request', '/warm-me']

    def warmed(self, path):
        import json as _json
        return _json.loads(self.get(path, '/warmed'))

    def test_hook_and_request_run_in_the_parent_then_in_the_spare_which_the_fork_hands_out(self):
        parent = self.chan.next()['pid']
        spare = self.warm_spare()
        self.assertEqual(self.chan.spares, [spare], 'fcgi-pm hears of the spare (its memory counts with the parent)')
        pid, path = self.fork(1)
        self.assertEqual(pid, spare, 'the worker is the spare forked ahead')
        seen = self.warmed(path)
        self.assertEqual(seen['pid'], spare)
        self.assertEqual([tuple(w) for w in seen['warmed']],
                         [('hook', parent), ('request', parent), ('hook', spare), ('request', spare)])
        # A new spare comes once the parent had no command for a while; it is not the worker.
        os.kill(pid, signal.SIGTERM)
        self.assertEqual(self.chan.next()['exited'], 1)
        spare2 = self.warm_spare()
        self.assertNotEqual(spare2, pid)
        pid2, path2 = self.fork(2)
        self.assertEqual(pid2, spare2)
        self.assertEqual(self.get(path2), b'hello')
        with open(f'/proc/{pid2}/stat') as f:
            fields = f.read().rsplit(')', 1)[1].split()
        self.assertEqual((int(fields[1]), int(fields[3])), (parent, pid2), "the fork server's child, leading its own session")
        self.assertEqual(os.readlink(f'/proc/{pid2}/fd/0'), os.devnull)

    def test_a_spare_that_died_is_replaced_by_a_fork_on_the_spot(self):
        self.chan.next()
        self.wait_for('the spare', lambda: len(self.children()) == 1)
        spare = self.children()[0]
        os.kill(spare, signal.SIGKILL)
        self.wait_for('the spare to be reaped', lambda: not alive(spare))
        pid, path = self.fork(1)
        self.assertEqual(self.chan.spares, [spare, None], 'fcgi-pm heard the spare is gone')
        self.assertNotEqual(pid, spare)
        self.assertEqual(self.get(path), b'hello')
        # Its exit was not reported as a worker's: the next message is about worker 1.
        os.kill(pid, signal.SIGKILL)
        self.assertEqual(self.chan.next(), {'exited': 1, 'pid': pid, 'code': None, 'signal': 'SIGKILL'})

    def test_the_spare_goes_with_the_parent(self):
        self.chan.next()
        self.wait_for('the spare', lambda: len(self.children()) == 1)
        spare = self.children()[0]
        os.close(self.chan.out)
        self.assertEqual(self.proc.wait(TIMEOUT), 0)
        self.wait_for('the spare to exit', lambda: not alive(spare))


class ColdSpareTest(ForkServerCase):
    ARGS = ['--warm', 'wsgi_apps:hold_spares']

    def test_a_spare_still_warming_up_is_not_waited_for_and_stays_the_spare(self):
        self.chan.next()
        self.wait_for('the spare', lambda: len(self.children()) == 1)
        spare = self.children()[0]
        pid, path = self.fork(1)
        self.assertNotEqual(pid, spare, 'forked on the spot')
        self.assertEqual(self.get(path), b'hello')
        self.assertEqual(sorted(self.children()), sorted([pid, spare]))
        open(os.path.join(self.dir, 'release'), 'w').close()
        self.assertEqual(self.warm_spare_besides(pid), spare)
        pid2, _ = self.fork(2)
        self.assertEqual(pid2, spare)


class SharedSocketTest(ForkServerCase):
    """accept: direct: the workers serve on the pool's socket, which the parent was handed."""
    SHARED = True

    def fork_shared(self, wid, max_requests=0):
        self.chan.send({'fork': wid, 'shared': True, 'max_requests': max_requests})
        m = self.chan.next()
        self.assertEqual(m['forked'], wid, m)
        return m['pid']

    def pid_answering(self):
        return int(self.get(self.shared, '/pid'))

    def test_forks_accept_on_the_shared_socket_and_exit_after_max_requests(self):
        parent = self.chan.next()['pid']
        spare = self.warm_spare()
        pid = self.fork_shared(1, max_requests=2)
        self.assertEqual(pid, spare, 'the spare took the shared socket')
        self.assertEqual(self.pid_answering(), pid)
        self.assertEqual(self.pid_answering(), pid)
        self.assertEqual(self.chan.next(), {'exited': 1, 'pid': pid, 'code': 0, 'signal': None})
        # Forked on the spot (the next spare is not warm yet, or is): either way it serves.
        pid2 = self.fork_shared(2)
        self.assertNotIn(pid2, (parent, pid))
        self.assertEqual({self.pid_answering() for _ in range(3)}, {pid2}, 'the parent itself never accepts')
        with open(f'/proc/{pid2}/stat') as f:
            self.assertEqual(int(f.read().rsplit(')', 1)[1].split()[3]), pid2, 'leads its own session')


class SharedWithoutSocketTest(ForkServerCase):
    def test_a_shared_fork_is_refused_when_no_socket_was_handed_over(self):
        self.chan.next()
        self.chan.send({'fork': 1, 'shared': True})
        m = self.chan.next()
        self.assertEqual((m['failed'], m['errno']), (1, 'EINVAL'))
        self.assertIn('no shared socket', m['message'])


class NoSpareTest(ForkServerTest):
    """The same with --spares 0: each worker forked when asked for."""
    ARGS = ['--spares', '0', '--warm', 'wsgi_apps:warm_hook']

    def test_without_spares_the_fork_is_made_on_request_and_the_hook_ran_in_the_parent_only(self):
        import json as _json
        parent = self.chan.next()['pid']
        self.assertEqual(self.children(), [])
        pid, path = self.fork(1)
        seen = _json.loads(self.get(path, '/warmed'))
        self.assertEqual([tuple(w) for w in seen['warmed']], [('hook', parent)])
        self.assertEqual(self.children(), [pid])


class ThreadWarningTest(ForkServerCase):
    ARGS = ['--warm', 'wsgi_apps:start_thread']

    def test_a_thread_left_running_before_the_fork_is_named_in_a_warning(self):
        self.chan.next()
        with open(self.stderr.name, 'rb') as f:
            err = f.read().decode()
        self.assertIn('started threads before the fork (left-running)', err)
        _, path = self.fork(1)
        self.assertEqual(self.get(path), b'hello')


class PreloadWithoutFcgiPmTest(unittest.TestCase):
    def test_a_clear_error_without_the_channel(self):
        env = {'PATH': os.environ.get('PATH', '/usr/bin:/bin'), 'PYTHONDONTWRITEBYTECODE': '1'}
        r = subprocess.run([sys.executable, ADAPTER, '--preload', '--path', HERE, 'wsgi_apps:app'], env=env,
                           capture_output=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b'--preload needs fcgi-pm', r.stderr)
        self.assertIn(b'FCGI_PM_PRELOAD_FDS', r.stderr)


if __name__ == '__main__':
    unittest.main()
