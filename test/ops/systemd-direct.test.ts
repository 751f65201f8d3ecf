// Socket activation of an accept: direct pool's socket: systemd's socket (fd 3, named
// after the pool) is the one the workers accept on; a connection made before fcgi-pm
// ran is answered by the first worker, and a stop leaves systemd's socket file in place.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify as stringifyYaml } from 'yaml';
import { ManagedChild } from '../helpers/child.js';
import { FcgiClient, parseCgiOutput, phpParams } from '../helpers/fcgi-client.js';
import { FCGI_PM_BIN, PHP_FIXTURES, REPO_ROOT } from '../helpers/paths.js';
import { makeTempDir } from '../helpers/tmp.js';
import { withTimeout } from '../helpers/wait.js';
import { directSocketSupport, SharedSocket } from '../../src/worker/shared-socket.js';
import { unixAddress } from '../../src/worker/socket.js';

test('socket activation: a direct pool takes its socket from systemd by name', { timeout: 60_000, skip: directSocketSupport() }, async (t) => {
  const dir = makeTempDir(t, 'fpm-sad-');
  const path = join(dir, 'app.sock');
  // What systemd does for a .socket unit: bind, listen, keep it open across the service's life.
  const systemdSocket = SharedSocket.acquire(unixAddress(path), { backlog: 8, mode: 0o600, uid: undefined, gid: undefined });
  t.after(() => systemdSocket.release());
  const cfgPath = join(dir, 'fcgi-pm.yaml');
  writeFileSync(
    cfgPath,
    stringifyYaml({
      control_socket: 'off',
      listen: [{ protocol: 'fastcgi', address: `unix:${dir}/overflow.sock`, pool: 'app' }],
      // The configured path differs: matched by FileDescriptorName=app, it is never bound.
      pools: { app: { command: ['php-cgi'], accept: 'direct', direct_listen: `unix:${dir}/configured.sock`, max_children: 2 } },
    }),
  );
  // Connected before fcgi-pm runs: the kernel queues it in systemd's socket.
  const early = await FcgiClient.connect({ path });
  t.after(() => early.socket.destroy());
  early.request(1, phpParams(PHP_FIXTURES, '/hello.php'));
  const child = new ManagedChild('fcgi-pm', '/bin/sh', ['-c', `LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=app exec "${process.execPath}" "${FCGI_PM_BIN}" run --allow-root -c "${cfgPath}"`], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'pipe', 'pipe', systemdSocket.fd],
  });
  t.after(() => child.stop(10_000));
  const res = await early.response(1, 20_000);
  const out = parseCgiOutput(res.stdout);
  assert.equal(out.status, 200);
  assert.equal(out.body.toString(), 'Hello from PHP\n');
  assert.equal(existsSync(join(dir, 'configured.sock')), false, 'the configured address was not bound');
  assert.equal(systemdSocket.nonBlocking, false);
  child.signal('SIGTERM');
  assert.deepEqual(await withTimeout(child.exited, 15_000, 'exit'), { code: 0, signal: null });
  assert.ok(existsSync(path), "systemd's socket file is systemd's to remove");
});
