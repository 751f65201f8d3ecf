// Reading a worker's accept state from /proc: the syscall line, and a real process
// blocked in accept() on a shared socket from the addon.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { acceptFd, blockedIn, parseSyscall, readAcceptState } from '../../src/worker/accept-state.js';
import { directSocketSupport, SharedSocket } from '../../src/worker/shared-socket.js';
import { unixAddress } from '../../src/worker/socket.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { waitFor } from '../helpers/wait.js';

test('parseSyscall: accept or accept4 on fd 0 is idle; anything else is not', () => {
  assert.equal(parseSyscall('43 0x0 0x7ffc1 0x7ffc2 0x0 0x0 0x0 0x7ffd 0x7f12\n'), true);
  assert.equal(parseSyscall('288 0x0 0x0 0x0 0x80800 0x0 0x0 0x7ffd 0x7f12\n'), true);
  assert.equal(parseSyscall('43 0x3 0x7ffc1 0x7ffc2 0x0 0x0 0x0 0x7ffd 0x7f12\n'), false, 'accept on another fd');
  assert.equal(parseSyscall('0 0x3 0x55 0x2000 0x0 0x0 0x0 0x7ffd 0x7f12\n'), false, 'read(): busy');
  assert.equal(parseSyscall('running\n'), false);
  assert.equal(parseSyscall(''), undefined);
  assert.equal(parseSyscall('garbage'), undefined);
  assert.equal(acceptFd('288 0x5 0x0 0x0 0x80800 0x0 0x0 0x7ffd 0x7f12\n'), 5, 'accept4 on fd 5');
  assert.equal(acceptFd('43 0x1a 0x7ffc1 0x7ffc2 0x0 0x0 0x0 0x7ffd 0x7f12\n'), 26);
  assert.equal(acceptFd('7 0x5 0x1 0xffffffff 0x0 0x0 0x0 0x7ffd 0x7f12\n'), false, 'poll(): not accept');
});

test('fcgi-pm-wsgi in accept() on the shared socket moved off fd 0 reads as accepting; another listener does not', { skip: directSocketSupport() }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fpm-acc-'));
  const sock = SharedSocket.acquire(unixAddress(path.join(dir, 's.sock')), { backlog: 4, mode: 0o600, uid: undefined, gid: undefined });
  const other = SharedSocket.acquire(unixAddress(path.join(dir, 'o.sock')), { backlog: 4, mode: 0o600, uid: undefined, gid: undefined });
  const adapter = path.join(REPO_ROOT, 'bin', 'fcgi-pm-wsgi');
  const apps = path.join(REPO_ROOT, 'test', 'python');
  const child = spawn('/usr/bin/python3', [adapter, '--fastcgi', '--path', apps, 'wsgi_apps:app'], { stdio: [sock.fd, 'ignore', 'inherit'], env: { PATH: '/usr/bin:/bin', PYTHONDONTWRITEBYTECODE: '1' } });
  t.after(() => {
    child.kill('SIGKILL');
    sock.release();
    other.release();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  await waitFor(() => {
    try {
      return acceptFd(fs.readFileSync(`/proc/${child.pid}/syscall`, 'latin1')) !== false;
    } catch {
      return false;
    }
  }, { timeout: 10_000, what: 'the adapter in accept()' });
  const fd = acceptFd(fs.readFileSync(`/proc/${child.pid}/syscall`, 'latin1'));
  assert.ok(typeof fd === 'number' && fd > 0, `it accepts on fd ${String(fd)}, not fd 0`);
  assert.equal(readAcceptState(child.pid!, fs.fstatSync(sock.fd).ino).accepting, true);
  assert.equal(readAcceptState(child.pid!, fs.fstatSync(other.fd).ino).accepting, false, 'not the pool\'s listener');
});

test('a real process blocked in accept() on the shared socket reads as accepting; with a connection, busy', { skip: directSocketSupport() }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fpm-acc-'));
  const sock = SharedSocket.acquire(unixAddress(path.join(dir, 's.sock')), { backlog: 4, mode: 0o600, uid: undefined, gid: undefined });
  // python3: accept on fd 0 (blocking, as php-cgi does), hold the connection until it closes.
  const child = spawn('/usr/bin/python3', ['-c', 'import socket,sys\ns=socket.socket(fileno=0)\nc,_=s.accept()\nc.recv(1)\n'], { stdio: [sock.fd, 'ignore', 'inherit'] });
  t.after(() => {
    child.kill('SIGKILL');
    sock.release();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const ino = fs.fstatSync(sock.fd).ino;
  await waitFor(() => readAcceptState(child.pid!, ino).accepting === true, { timeout: 5000, what: 'accepting' });
  assert.equal(sock.nonBlocking, false, 'nobody made the shared socket non-blocking');
  const c = net.connect(path.join(dir, 's.sock'));
  t.after(() => c.destroy());
  const busy = await waitFor(() => {
    const s = readAcceptState(child.pid!, ino);
    return s.accepting === false && s.conn !== undefined ? s : undefined;
  }, { timeout: 5000, what: 'busy with a connection' });
  assert.notEqual(busy.conn, ino);
  assert.ok(busy.cpuNs > 0);
});

test('blockedIn names the syscall a process waits in and what its fd is: cat reading its empty stdin (a socketpair from libuv)', async (t) => {
  const cat = spawn('cat', [], { stdio: ['pipe', 'ignore', 'ignore'] });
  t.after(() => cat.kill('SIGKILL'));
  await new Promise((r) => cat.once('spawn', r));
  // Until cat reaches its read(), the line says something else (running, execve, ...).
  let seen: ReturnType<typeof blockedIn>;
  for (let i = 0; i < 500 && !/^socket:/.test(seen?.fd ?? ''); i++) {
    seen = blockedIn(cat.pid!);
    await new Promise((r) => setImmediate(r));
  }
  assert.match(seen?.fd ?? '', /^socket:\[\d+\]$/, JSON.stringify(seen));
  assert.match(seen!.syscall, /^\d+ 0x0$/, 'read() on fd 0');
  cat.kill('SIGKILL');
  await new Promise((r) => cat.once('exit', r));
  assert.equal(blockedIn(cat.pid!), undefined, 'gone');
});
