/**
 * A preload parent handed an `accept: direct` pool's shared socket (ForkServer.share):
 * its forks accept on that socket themselves, the parent never does, and a fork exits
 * by itself after FCGI_PM_MAX_REQUESTS, the exit reported through the parent.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { silentLogger } from '../../src/log/log.js';
import { ForkServer } from '../../src/worker/fork-server.js';
import { acceptFd } from '../../src/worker/accept-state.js';
import { directSocketSupport, SharedSocket } from '../../src/worker/shared-socket.js';
import { unixAddress } from '../../src/worker/socket.js';
import type { WorkerExit } from '../../src/worker/types.js';
import { Worker } from '../../src/worker/worker.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { fcgiRequest } from './fcgi-raw.js';
import { makeSpec, PoolSide, processGone, tempDir, waitFor } from './helpers.js';

const GET = { REQUEST_METHOD: 'GET', SCRIPT_NAME: '', PATH_INFO: '/pid', REQUEST_URI: '/pid', QUERY_STRING: '', SERVER_NAME: 'localhost', SERVER_PORT: '80', SERVER_PROTOCOL: 'HTTP/1.1' };

test('forks of a parent holding the shared socket accept on it; one exits 0 after FCGI_PM_MAX_REQUESTS', { skip: directSocketSupport(), timeout: 60_000 }, async (t) => {
  const dir = tempDir(t, 'fpm-fss-');
  const sock = SharedSocket.acquire(unixAddress(path.join(dir, 'app.sock')), { backlog: 16, mode: 0o600, uid: undefined, gid: undefined });
  const command = ['/usr/bin/python3', path.join(REPO_ROOT, 'bin', 'fcgi-pm-wsgi'), '--preload', '--fastcgi', '--path', path.join(REPO_ROOT, 'test', 'python'), 'wsgi_apps:app'];
  const spec = makeSpec(dir, command, { pool: 'py', env: { PATH: '/usr/bin:/bin', PYTHONDONTWRITEBYTECODE: '1', FCGI_PM_MAX_REQUESTS: '2' } });
  const forks = new ForkServer(spec, silentLogger(), { idleTimeout: 0 });
  forks.share(sock.fd);
  const owner = new PoolSide();
  const w = Worker.spawn({ ...spec, sharedSocket: { fd: sock.fd, address: sock.address } }, silentLogger(), 1, owner, { forkServer: forks });
  const exit = once(w, 'exit') as Promise<[WorkerExit]>;
  t.after(async () => {
    owner.retire('shutdown');
    await w.stop();
    await forks.stop();
    sock.release();
  });
  await once(w, 'ready');
  const parent = forks.parent!.pid;
  assert.equal(w.address.text, sock.address.text, 'the worker is reached at the shared socket');
  const answer = async (): Promise<number> => {
    const r = await fcgiRequest(sock.address, GET, undefined, 10_000);
    return Number(r.stdout.toString('latin1').split('\r\n\r\n')[1]);
  };
  assert.equal(await answer(), w.pid, 'the fork accepted it');
  // The parent holds the socket but is never in accept(): it waits for its commands.
  const sc = fs.readFileSync(`/proc/${parent}/syscall`, 'latin1');
  assert.equal(acceptFd(sc), false, `the parent: ${sc}`);
  assert.equal(await answer(), w.pid);
  // Judged a recycle or not by the pool, which knows it asked for max_requests.
  const [e] = await exit;
  assert.deepEqual({ code: e.code, signal: e.signal }, { code: 0, signal: null });
  assert.ok(await waitFor(() => processGone(w.pid!), 5000));
  assert.ok(!processGone(parent), 'the parent lives on');
});
