/**
 * An exec'd fcgi-pm-wsgi pool (no preload) with accept: direct: each worker gets the
 * pool's socket as fd 0 (the adapter moves it off fd 0 and accepts on a duplicate), is
 * seen idle in accept() by its socket's inode, and exits 0 after max_requests
 * (FCGI_PM_MAX_REQUESTS), which the pool counts as a recycle, not a crash.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { directSocketSupport } from '../../src/worker/shared-socket.js';
import { unixAddress } from '../../src/worker/socket.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { opsDaemon } from '../ops/helpers.js';
import { fcgiRequest } from '../worker/fcgi-raw.js';

const GET = { REQUEST_METHOD: 'GET', SCRIPT_NAME: '', PATH_INFO: '/pid', REQUEST_URI: '/pid', QUERY_STRING: '', SERVER_NAME: 'localhost', SERVER_PORT: '80', SERVER_PROTOCOL: 'HTTP/1.1' };

test('an exec\'d fcgi-pm-wsgi direct pool: workers accept on the pool socket, are seen idle, and recycle after max_requests', { timeout: 90_000, skip: directSocketSupport() }, async (t) => {
  const dir = makeTempDir(t, 'fpm-dpy-');
  const sock = join(dir, 'direct.sock');
  const o = await opsDaemon(t, {
    listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${await freePort()}`, pool: 'py' }],
    pools: {
      py: {
        command: ['/usr/bin/python3', join(REPO_ROOT, 'bin', 'fcgi-pm-wsgi'), '--fastcgi', '--path', join(REPO_ROOT, 'test', 'python'), 'wsgi_apps:app'],
        env: { PYTHONDONTWRITEBYTECODE: '1' },
        accept: 'direct',
        direct_listen: `unix:${sock}`,
        direct_socket_mode: '0666',
        pm: 'static',
        max_children: 1,
        max_requests: 3,
        max_requests_jitter: 0,
      },
    },
  });
  const pool = async (): Promise<any> => JSON.parse((await o.ctl(['status', '--json'])).stdout).pools.find((p: { name: string }) => p.name === 'py');
  const first = await waitFor(async () => {
    const p = await pool();
    return p.workers[0]?.state === 'idle' ? p.workers[0] : undefined;
  }, { timeout: 20_000, what: 'the worker seen idle in accept()' });
  const pid = async (): Promise<number> => {
    const r = await fcgiRequest(unixAddress(sock), GET, undefined, 10_000);
    return Number(r.stdout.toString('latin1').split('\r\n\r\n')[1]);
  };
  const pids = [await pid(), await pid(), await pid()];
  assert.deepEqual(pids, [first.pid, first.pid, first.pid], 'the worker answered on the pool socket itself');
  // Its third request was its last: it exits 0 and a new one takes its place.
  const p = await waitFor(async () => {
    const s = await pool();
    return (s.recycles?.max_requests ?? 0) >= 1 && s.workers.length === 1 && s.workers[0].pid !== first.pid ? s : undefined;
  }, { timeout: 20_000, what: 'the recycle counted and a new worker' });
  assert.equal(p.crashes ?? 0, 0);
  assert.notEqual(await pid(), first.pid);
});
