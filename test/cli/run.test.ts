// `fcgi-pm run` as a real process: the quick form spawning real php-cgi workers, and a
// listener that cannot bind.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as net from 'node:net';
import { ManagedChild } from '../helpers/child.js';
import { httpRequest } from '../helpers/http-client.js';
import { FCGI_PM_BIN, PHP_FIXTURES, REPO_ROOT } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { canConnect, waitFor, withTimeout } from '../helpers/wait.js';
import { worldReadableDir } from '../helpers/world-readable.js';
import { runBin } from './helpers.js';

test('quick form: --http with --command php-cgi --user www-data serves PHP, and SIGTERM exits 0', { timeout: 60_000 }, async (t) => {
  const port = await freePort();
  const child = new ManagedChild('fcgi-pm', process.execPath, [
    FCGI_PM_BIN, 'run', '--http', `127.0.0.1:${port}`, '--document-root', worldReadableDir(t, PHP_FIXTURES), '--command', 'php-cgi', '--user', 'www-data', '--max-children', '2',
  ], { cwd: REPO_ROOT });
  t.after(() => child.stop(10_000));
  let stdout = '';
  child.proc.stdout!.setEncoding('utf8').on('data', (s: string) => (stdout += s));
  await waitFor(async () => {
    if (!child.running) throw new Error(`exited: ${child.stderr}`);
    return canConnect({ port });
  }, { timeout: 15_000, what: 'the quick-form listener' });

  const res = await httpRequest(`http://127.0.0.1:${port}/hello.php`, { timeout: 15_000 });
  assert.equal(res.status, 200);
  assert.equal(res.text, 'Hello from PHP\n');

  child.signal('SIGTERM');
  const exit = await withTimeout(child.exited, 20_000, 'exit after SIGTERM');
  assert.deepEqual(exit, { code: 0, signal: null }, child.stderr);
  const lines = stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  const access = lines.find((l) => l.kind === 'access');
  assert.ok(access, stdout);
  assert.deepEqual([access.method, access.uri, access.status, access.pool], ['GET', '/hello.php', 200, 'default']);
  assert.equal(typeof access.worker, 'number', 'served by a spawned worker');
  assert.ok(lines.some((l) => l.kind === 'stopped'));
});

test('a listener that cannot bind: exit 1 with the reason on stderr', { timeout: 30_000 }, async (t) => {
  const blocker = net.createServer();
  await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
  t.after(() => blocker.close());
  const port = (blocker.address() as net.AddressInfo).port;
  const r = await runBin(['run', '--fastcgi', `127.0.0.1:${port}`, '--backend', 'fastcgi://127.0.0.1:1']);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, new RegExp(`127\\.0\\.0\\.1:${port}`));
  assert.match(r.stderr, /EADDRINUSE|in use/i);
});
