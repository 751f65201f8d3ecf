// A worker's own fd-0 socket: bound where only the child will accept.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { acceptQueueOf, directSocketSupport } from '../../src/worker/shared-socket.js';
import { listenFd0 } from '../../src/worker/socket.js';
import { waitFor } from '../helpers/wait.js';

test('listenFd0: a connection that reaches the socket before the child has it waits in the queue for the child; the daemon never accepts it', { skip: directSocketSupport() }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fcgi-pm-fd0-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const l = await listenFd0(dir, 'site-1');
  let closedByPeer = false;
  const c = net.connect(path.join(dir, 'site-1.sock.tmp'));
  c.on('close', () => (closedByPeer = true));
  c.on('error', () => {});
  t.after(() => c.destroy());
  await new Promise<void>((resolve) => c.once('connect', () => resolve()));
  await waitFor(() => acceptQueueOf(l.fd) === 1, { timeout: 2_000, what: 'the connection queued' });
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(acceptQueueOf(l.fd), 1, 'still waiting for an accept');
  assert.equal(closedByPeer, false);
  assert.equal((fs.statSync(path.join(dir, 'site-1.sock.tmp')).mode & 0o777), 0o600);
  l.handOff();
  assert.ok(fs.statSync(path.join(dir, 'site-1.sock')).isSocket(), 'published under its real name');
  assert.equal(fs.existsSync(path.join(dir, 'site-1.sock.tmp')), false);
});

test('listenFd0: abort before a spawn removes the temporary name', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fcgi-pm-fd0-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const l = await listenFd0(dir, 'site-2');
  assert.ok(fs.existsSync(path.join(dir, 'site-2.sock.tmp')));
  l.abort();
  assert.deepEqual(fs.readdirSync(dir), []);
});
