/**
 * Real php-cgi workers, fd0 and argv modes, answering a FastCGI request.
 */
import { judgeExit } from '../../src/pool/workers/exit-verdict.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { silentLogger } from '../../src/log/log.js';
import { Worker } from '../../src/worker/worker.js';
import { findSetpriv } from '../../src/worker/death-guard.js';
import { directSocketSupport, SharedSocket } from '../../src/worker/shared-socket.js';
import { unixAddress } from '../../src/worker/socket.js';
import type { WorkerExit } from '../../src/worker/types.js';
import { fcgiRequest } from './fcgi-raw.js';
import { makeSpec, PoolSide, processGone, tempDir, waitFor } from './helpers.js';

const PHP = '/usr/bin/php-cgi';

function phpScript(dir: string): string {
  const file = path.join(dir, 'hello.php');
  fs.writeFileSync(file, '<?php header("X-Worker-Pid: " . getmypid()); echo "hello from php ", $_GET["n"] ?? "";');
  return file;
}

function params(script: string, query = ''): Record<string, string> {
  return {
    GATEWAY_INTERFACE: 'CGI/1.1',
    REQUEST_METHOD: 'GET',
    SCRIPT_FILENAME: script,
    SCRIPT_NAME: '/hello.php',
    REQUEST_URI: `/hello.php?${query}`,
    QUERY_STRING: query,
    SERVER_PROTOCOL: 'HTTP/1.1',
    SERVER_NAME: 'localhost',
  };
}

async function serveOne(t: { after: (fn: () => void | Promise<void>) => void }, socket: 'fd0' | 'argv', command: string[]): Promise<void> {
  const dir = tempDir(t);
  const run = path.join(dir, 'run');
  fs.mkdirSync(run, { mode: 0o700 });
  const script = phpScript(dir);
  const pool = new PoolSide();
  const w = Worker.spawn(makeSpec(run, command, { socket }), silentLogger(), 1, pool);
  t.after(async () => void (await w.stop()));
  await once(w, 'ready');
  assert.equal(w.address.kind, 'unix');
  const sockPath = (w.address as { path: string }).path;
  assert.equal(path.dirname(sockPath), run);
  assert.ok(fs.statSync(sockPath).isSocket());
  assert.equal(fs.statSync(run).mode & 0o777, 0o700);

  for (let n = 1; n <= 3; n++) {
    pool.start();
    const res = await fcgiRequest(w.address, params(script, `n=${n}`));
    pool.end();
    const text = res.stdout.toString('latin1');
    assert.match(text, new RegExp(`X-Worker-Pid: ${w.pid}\\r\\n`));
    assert.ok(text.endsWith(`hello from php ${n}`), text);
    assert.equal(res.appStatus, 0);
  }

  const exitP = once(w, 'exit') as Promise<[WorkerExit]>;
  pool.retire('shutdown');
  const exit = await w.stop();
  const [evExit] = await exitP;
  const verdict = judgeExit({ exit: evExit, served: 'exact', selfRecycles: false });
  assert.equal(evExit, exit);
  assert.equal(exit.reason, 'shutdown');
  assert.equal(exit.served, 3);
  assert.equal(verdict.crash, false);
  assert.equal(fs.existsSync(sockPath), false, 'socket file removed');
  assert.ok(await waitFor(() => processGone(w.pid!), 2000));
}

test('php-cgi with fd 0 (FCGI_LISTENSOCK_FILENO) serves requests; socket file is 0600 in the 0700 dir', async (t) => {
  await serveOne(t, 'fd0', [PHP]);
});

test('php-cgi -b {socket} (argv mode) serves requests', async (t) => {
  await serveOne(t, 'argv', [PHP, '-b', '{socket}']);
});

test('fd0 socket file mode is 0600 and only spec.env reaches the process', async (t) => {
  const dir = tempDir(t);
  const env = { PATH: '/usr/bin:/bin', PHP_FCGI_CHILDREN: '0', ONLY_THIS: 'yes' };
  process.env['FCGI_PM_TEST_LEAK'] = 'should-not-pass';
  t.after(() => void delete process.env['FCGI_PM_TEST_LEAK']);
  const w = Worker.spawn(makeSpec(dir, ['php-cgi'], { env, cwd: '/tmp' }), silentLogger(), 7);
  t.after(async () => void (await w.stop()));
  await once(w, 'ready');
  const sockPath = (w.address as { path: string }).path;
  assert.equal(fs.statSync(sockPath).mode & 0o777, 0o600);
  const environ = fs.readFileSync(`/proc/${w.pid}/environ`, 'latin1').split('\0').filter(Boolean).sort();
  assert.deepEqual(environ, ['ONLY_THIS=yes', 'PATH=/usr/bin:/bin', 'PHP_FCGI_CHILDREN=0']);
  assert.equal(fs.readlinkSync(`/proc/${w.pid}/cwd`), '/tmp');
  // The command was found through spec.env's PATH and runs with that pid (no wrapper left).
  assert.match(fs.readFileSync(`/proc/${w.pid}/cmdline`, 'latin1'), /^\/usr\/bin\/php-cgi\0$/);
});

test('php-cgi with its own children: a crash of the master also ends the orphans holding the socket', async (t) => {
  const dir = tempDir(t);
  const env = { PATH: '/usr/bin:/bin', PHP_FCGI_CHILDREN: '2' };
  const w = Worker.spawn(makeSpec(dir, ['php-cgi'], { env }), silentLogger(), 3);
  t.after(async () => void (await w.stop()));
  await once(w, 'ready');
  const pid = w.pid!;
  let kids: number[] = [];
  assert.ok(
    await waitFor(() => {
      kids = fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
      return kids.length === 2;
    }, 3000),
  );
  t.after(() => kids.forEach((k) => processGone(k) || process.kill(k, 'SIGKILL')));
  const exitP = once(w, 'exit') as Promise<[WorkerExit]>;
  process.kill(pid, 'SIGKILL'); // only the master, as a segfault would
  const [exit] = await exitP;
  const verdict = judgeExit({ exit, served: 'exact', selfRecycles: false });
  assert.equal(exit.signal, 'SIGKILL');
  assert.equal(exit.reason, undefined);
  assert.deepEqual([verdict.crash, verdict.restart], [true, true]);
  assert.ok(await waitFor(() => kids.every(processGone), 3000), 'php-cgi children killed with their group');
});

for (const kind of ['its own socket', "an accept: direct pool's shared socket"] as const)
test(`a worker's spawn (${kind}) copies none of the daemon's pages: the daemon writes its memory after it without copy-on-write faults`, { skip: kind !== 'its own socket' && directSocketSupport() }, async (t) => {
  // A fork (libuv's, for Node's child_process.spawn) makes every page of the daemon copy-on-write
  // until it is written again: 64 MiB written after it take ~16,000 minor faults. A vfork-style
  // clone shares the daemon's memory until the exec and leaves its pages as they were.
  findSetpriv(); // its one probe (spawnSync) forks, before the memory is there
  const memory = Buffer.alloc(64 * 2 ** 20, 1);
  const dir = tempDir(t);
  let spec = makeSpec(dir, [PHP]);
  if (kind !== 'its own socket') {
    const sock = SharedSocket.acquire(unixAddress(path.join(dir, 'app.sock')), { backlog: 16, mode: 0o600, uid: undefined, gid: undefined });
    t.after(() => sock.release());
    spec = { ...spec, sharedSocket: { fd: sock.fd, address: sock.address } };
  }
  const w = Worker.spawn(spec, silentLogger(), 1);
  t.after(async () => void (await w.stop()));
  await once(w, 'ready');
  const before = process.resourceUsage().minorPageFault;
  memory.fill(2);
  const faults = process.resourceUsage().minorPageFault - before;
  assert.ok(faults < memory.length / 4096 / 4, `${faults} minor faults writing ${memory.length / 4096} pages after the spawn`);
  // Reaped by the daemon as libuv's children are: a kill from outside is the exit's signal.
  const exit = once(w, 'exit') as Promise<[WorkerExit]>;
  process.kill(w.pid!, 'SIGKILL');
  const [e] = await exit;
  assert.deepEqual([e.code, e.signal], [null, 'SIGKILL']);
  assert.ok(await waitFor(() => processGone(w.pid!), 2000), 'reaped');
});

test('a worker runs as the uid and gid it was given, with no supplementary groups (as root)', { skip: process.geteuid?.() !== 0 && 'needs root' }, async (t) => {
  const dir = tempDir(t);
  fs.chmodSync(dir, 0o755);
  const run = path.join(dir, 'run');
  fs.mkdirSync(run, { mode: 0o700 });
  fs.chownSync(run, 65534, 65534);
  const w = Worker.spawn(makeSpec(run, [PHP], { uid: 65534, gid: 65534 }), silentLogger(), 1);
  t.after(async () => void (await w.stop()));
  await once(w, 'ready');
  const status = fs.readFileSync(`/proc/${w.pid}/status`, 'latin1');
  assert.match(status, /^Uid:\t65534\t65534\t65534\t65534$/m);
  assert.match(status, /^Gid:\t65534\t65534\t65534\t65534$/m);
  assert.match(status, /^Groups:[ \t]*$/m);
  // Its own session and process group, signals as a shell would start it.
  const stat = fs.readFileSync(`/proc/${w.pid}/stat`, 'latin1');
  const [, , pgrp, session] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  assert.deepEqual([Number(pgrp), Number(session)], [w.pid, w.pid]);
  assert.match(status, /^SigBlk:\t0+$/m);
});
