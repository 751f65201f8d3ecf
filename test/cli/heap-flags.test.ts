// bin/fcgi-pm executed as a program starts the daemon with V8 flags that bound its heap;
// the operator's FCGI_PM_NODE_FLAGS or NODE_OPTIONS win. Other commands get none.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createServer, type AddressInfo } from 'node:net';
import { ManagedChild } from '../helpers/child.js';
import { FCGI_PM_BIN } from '../helpers/paths.js';
import { makeTempDir } from '../helpers/tmp.js';
import { WaitAborted, canConnect, waitFor } from '../helpers/wait.js';

const DEFAULT = /^":" \/\/; f="([^"]+)"$/m.exec(readFileSync(FCGI_PM_BIN, 'utf8'))![1]!;

/** The node argv of `bin/fcgi-pm ...args` once its listener is up (exec: the same pid). */
async function daemonArgv(t: TestContext, env: Record<string, string>, pre: string[] = []): Promise<string[]> {
  const dir = makeTempDir(t, 'fpm-heap-');
  const sock = join(dir, 'fcgi.sock');
  const cfg = join(dir, 'c.yaml');
  writeFileSync(cfg, `listen:\n  - { protocol: fastcgi, address: "unix:${sock}", pool: php }\npools:\n  php: { command: [/usr/bin/php-cgi], user: root, pm: ondemand, max_children: 1 }\nruntime_dir: ${dir}\nlog: { level: warn }\n`);
  const d = new ManagedChild('fcgi-pm', FCGI_PM_BIN, [...pre, 'run', '-c', cfg], { env: { ...process.env, ...env } }, 'SIGTERM');
  t.after(() => d.stop());
  await waitFor(async () => {
    if (!d.running) throw new WaitAborted(`fcgi-pm exited: ${d.stderr}`);
    return canConnect({ path: sock });
  }, { timeout: 20_000, what: 'fcgi-pm listener' });
  const argv = readFileSync(`/proc/${d.pid}/cmdline`, 'utf8').split('\0').filter((a) => a !== '');
  return argv.slice(1, argv.indexOf(FCGI_PM_BIN));
}

test('run: the heap flags by default, also after --log-level', { timeout: 60_000 }, async (t) => {
  assert.match(DEFAULT, /--max-semi-space-size=\d+ --max-old-space-size=\d+/);
  assert.deepEqual(await daemonArgv(t, {}), DEFAULT.split(' '));
  assert.deepEqual(await daemonArgv(t, {}, ['--log-level', 'warn']), DEFAULT.split(' '));
});

test('run: FCGI_PM_NODE_FLAGS replaces them, NODE_OPTIONS with a heap size drops them', { timeout: 60_000 }, async (t) => {
  assert.deepEqual(await daemonArgv(t, { FCGI_PM_NODE_FLAGS: '--max-semi-space-size=8' }), ['--max-semi-space-size=8']);
  assert.deepEqual(await daemonArgv(t, { FCGI_PM_NODE_FLAGS: '' }), []);
  assert.deepEqual(await daemonArgv(t, { NODE_OPTIONS: '--max-old-space-size=1024' }), []);
});

test('other commands (bench) start node without them', { timeout: 60_000 }, async (t) => {
  let connected!: () => void;
  const seen = new Promise<void>((resolve) => (connected = resolve));
  const server = createServer((s) => {
    s.on('error', () => {});
    connected();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    server.close();
  });
  const port = (server.address() as AddressInfo).port;
  const b = new ManagedChild('bench', FCGI_PM_BIN, ['bench', '-d', '5s', '-c', '1', '--timeout', '5s', `fcgi://127.0.0.1:${port}/`], {}, 'SIGKILL');
  t.after(() => b.stop(1000, 'SIGKILL'));
  await seen; // the bench's node is up and connecting
  const argv = readFileSync(`/proc/${b.pid}/cmdline`, 'utf8').split('\0');
  assert.deepEqual(argv.slice(1, 2), [FCGI_PM_BIN], argv.join(' '));
});
