// The daemon as a process (bin/fcgi-pm run -c FILE): signals and exit codes, with an
// external pool in front of a real php-cgi.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import * as http from 'node:http';
import { startDaemon } from '../helpers/daemon.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { makeTempDir } from '../helpers/tmp.js';
import { withTimeout } from '../helpers/wait.js';
import { startPhpCgi } from '../fixtures/upstream/php.js';
import type { TestContext } from 'node:test';

async function phpDaemon(t: TestContext) {
  const dir = makeTempDir(t, 'fpm-dp-');
  const php = await startPhpCgi(t, dir);
  const port = await freePort();
  const d = await startDaemon(t, {
    listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'php', document_root: PHP_FIXTURES }],
    pools: { php: { backends: [`unix:${php.socketPath}`] } },
    shutdown_timeout: '10s',
  });
  const ready = await d.waitForLog((l) => l.kind === 'ready', { what: 'ready' });
  return { d, port, runtimeDir: String(ready.runtime_dir) };
}

/** Starts a GET and resolves once the response head arrived; `body` settles with the rest. */
function startGet(port: number, path: string): Promise<{ status: number; body: Promise<string> }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      const body = new Promise<string>((ok, fail) => {
        let s = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (s += c));
        res.on('end', () => ok(s));
        res.on('error', fail);
        res.on('aborted', () => fail(new Error('aborted')));
      });
      body.catch(() => {});
      resolve({ status: res.statusCode ?? 0, body });
    });
    req.on('error', reject);
  });
}

test('SIGTERM lets the running request finish, then exits 0 and removes the runtime dir', { timeout: 60_000 }, async (t) => {
  const { d, port, runtimeDir } = await phpDaemon(t);
  assert.ok(existsSync(runtimeDir));
  const res = await startGet(port, '/sleep.php?ms=700&flush=1');
  assert.equal(res.status, 200);
  d.signal('SIGTERM');
  assert.match(await withTimeout(res.body, 10_000, 'body'), /slept 700/);
  const exit = await withTimeout(d.child.exited, 15_000, 'exit');
  assert.deepEqual(exit, { code: 0, signal: null }, d.dump());
  assert.ok(d.findLog((l) => l.kind === 'shutdown' && l.signal === 'SIGTERM'));
  assert.ok(d.findLog((l) => l.kind === 'stopped'));
  assert.equal(existsSync(runtimeDir), false);
});

test('SIGHUP does not kill it; a second SIGINT cuts a long request and exits 0', { timeout: 60_000 }, async (t) => {
  const { d, port } = await phpDaemon(t);
  d.signal('SIGHUP');
  await d.waitForLog((l) => l.kind === 'reload', { what: 'SIGHUP warning' });
  const res = await startGet(port, '/sleep.php?ms=30000&flush=1');
  assert.equal(res.status, 200, 'still serving after SIGHUP');
  d.signal('SIGINT');
  await d.waitForLog((l) => l.kind === 'shutdown' && l.signal === 'SIGINT', { what: 'first SIGINT' });
  d.signal('SIGINT');
  const exit = await withTimeout(d.child.exited, 10_000, 'exit after the second SIGINT');
  assert.deepEqual(exit, { code: 0, signal: null }, d.dump());
  await assert.rejects(withTimeout(res.body, 5000, 'cut body'));
});
