// The addon's shared socket: blocking however it is watched or handed out, one wake-up
// per arriving connection, and the kernel's accept-queue figures for Unix and TCP.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { directSocketSupport, SharedSocket } from '../../src/worker/shared-socket.js';
import { tcpAddress, unixAddress } from '../../src/worker/socket.js';
import { waitFor } from '../helpers/wait.js';

const skip = directSocketSupport();
const opts = { backlog: 3, mode: 0o600, uid: undefined, gid: undefined };

test('Unix: one wake-up per connection, queue counted, flags untouched, file mode set, one socket per address', { skip }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fpm-ss-'));
  const file = path.join(dir, 'd.sock');
  const addr = unixAddress(file);
  const s = SharedSocket.acquire(addr, opts);
  const again = SharedSocket.acquire(addr, opts);
  assert.equal(again, s, 'a second acquire (a reload) shares the socket');
  const conns: net.Socket[] = [];
  t.after(() => {
    for (const c of conns) c.destroy();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  assert.equal(fs.statSync(file).mode & 0o777, 0o600);
  let wakes = 0;
  const w = s.watch(() => wakes++);
  assert.deepEqual(s.queued(), { waiting: 0, backlog: 3 });
  for (let i = 1; i <= 3; i++) {
    conns.push(net.connect(file));
    await waitFor(() => wakes === i, { timeout: 5000, what: `wake-up ${i}` });
    assert.equal(s.queued().waiting, i);
  }
  // A process given the socket as fd 0 (libuv makes stdio blocking in the child) leaves it blocking too.
  const child = spawn('/bin/true', [], { stdio: [s.fd, 'ignore', 'ignore'] });
  await new Promise((r) => child.once('exit', r));
  assert.equal(s.nonBlocking, false);
  w.stop();
  s.release();
  assert.ok(fs.existsSync(file), 'still held by the first acquire');
  s.release();
  assert.equal(fs.existsSync(file), false, 'the last release removes the file');
});

test('TCP: the accept queue from TCP_INFO', { skip }, async (t) => {
  const probe = net.createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  const port = (probe.address() as net.AddressInfo).port;
  await new Promise((r) => probe.close(r));
  const s = SharedSocket.acquire(tcpAddress('127.0.0.1', port), opts);
  const c = net.connect(port, '127.0.0.1');
  t.after(() => {
    c.destroy();
    s.release();
  });
  await waitFor(() => s.queued().waiting === 1, { timeout: 5000, what: 'one waiting' });
  assert.equal(s.queued().backlog, 3);
  assert.equal(s.nonBlocking, false);
});
