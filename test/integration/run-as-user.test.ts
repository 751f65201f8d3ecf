// Who spawned workers run as, with the real daemon and real php-cgi: as root a pool
// without `user` is refused at start and at reload (one readable line, no stack), and a
// page reports the uid its worker really has. Start-up errors are one line with the errno.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify as stringifyYaml } from 'yaml';
import { ManagedChild } from '../helpers/child.js';
import { startDaemon, Daemon, LogLevel } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { PHP_FIXTURES, PHP_FLAGS } from '../helpers/paths.js';
import type { Scope } from '../helpers/scope.js';
import { worldReadableBin, worldReadableDir } from '../helpers/world-readable.js';
import { freePort } from '../helpers/ports.js';
import { makeTempDir } from '../helpers/tmp.js';
import { canConnect, waitFor, withTimeout } from '../helpers/wait.js';
import { opsDaemon } from '../ops/helpers.js';

const skip = process.geteuid?.() !== 0 && 'runs as root (switching users needs it)';

/** A PHP pool behind an HTTP listener; its document root readable by the workers' user. */
async function phpConfig(scope: Scope, pool: Record<string, unknown>) {
  const port = await freePort();
  return {
    port,
    config: {
      control_socket: 'off',
      listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'app', document_root: worldReadableDir(scope, PHP_FIXTURES) }],
      pools: { app: { command: ['php-cgi', ...PHP_FLAGS], max_children: 2, ...pool } },
    },
  };
}

async function whoami(port: number): Promise<string> {
  const r = await httpRequest(`http://127.0.0.1:${port}/whoami.php`, { timeout: 15_000 });
  assert.equal(r.status, 200, r.text);
  return r.text;
}

/** Waits for a daemon that must not start; returns its exit code, stderr and log lines. */
async function failedStart(d: Daemon) {
  const exit = await withTimeout(d.child.exited, 20_000, 'the refused daemon exits');
  return { code: exit.code, stderr: d.stderr, logs: d.logs };
}

function assertOneReadableFailure(f: { code: number | null; stderr: string; logs: Array<Record<string, unknown>> }, line: RegExp): void {
  assert.equal(f.code, 1);
  const lines = f.stderr.trimEnd().split('\n');
  assert.equal(lines.length, 1, `one line on stderr:\n${f.stderr}`);
  assert.match(lines[0]!, line);
  const errors = f.logs.filter((l) => typeof l.level === 'number' && l.level >= LogLevel.error);
  assert.equal(errors.length, 1, `one error log line: ${JSON.stringify(errors)}`);
  assert.ok(!JSON.stringify(f.logs).includes('"stack"'), 'no stack trace in the log');
  assert.ok(!/\n\s+at /.test(f.stderr), 'no stack trace on stderr');
}

test('as root without user: start refused with the one-line fix, exit 1, no stack', { skip, timeout: 60_000 }, async (t) => {
  const { config } = await phpConfig(t, {});
  const d = await startDaemon(t, config, { allowRoot: false, noWait: true });
  const f = await failedStart(d);
  assertOneReadableFailure(f, new RegExp(`^${d.configPath}:\\d+: pools\\.app: workers would run as root; add user: www-data \\(or user: root to allow it, or run with --allow-root\\)$`));
  assert.equal(f.logs.find((l) => l.level === LogLevel.fatal)?.code, 'ERR_ROOT_WORKERS');
});

for (const [user, uid] of [['www-data', 33], ['nobody', 65534]] as const) {
  test(`user: ${user}: the PHP page runs as uid ${uid}`, { skip, timeout: 60_000 }, async (t) => {
    const { port, config } = await phpConfig(t, { user });
    await startDaemon(t, config, { allowRoot: false });
    assert.match(await whoami(port), new RegExp(`^uid=${uid} gid=${uid}\\n$`));
  });
}

test('--allow-root and user: root are consent: the page runs as uid 0', { skip, timeout: 60_000 }, async (t) => {
  const allowed = await phpConfig(t, {});
  await startDaemon(t, allowed.config, { allowRoot: true });
  assert.equal(await whoami(allowed.port), 'uid=0 gid=0\n');
  const explicit = await phpConfig(t, { user: 'root' });
  await startDaemon(t, explicit.config, { allowRoot: false });
  assert.equal(await whoami(explicit.port), 'uid=0 gid=0\n');
});

test('a reload that adds a pool without user is refused; the old config keeps serving', { skip, timeout: 90_000 }, async (t) => {
  const { port, config } = await phpConfig(t, { user: 'www-data' });
  const { control_socket: _off, ...rest } = config;
  const d = await opsDaemon(t, rest, { allowRoot: false });
  assert.equal(await whoami(port), 'uid=33 gid=33\n');
  d.rewrite({ ...rest, pools: { ...rest.pools, extra: { command: ['php-cgi'] } } });
  const r = await d.ctl(['reload'], 60_000);
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(r.stderr, /pools\.extra: workers would run as root; add user: www-data/);
  const st = JSON.parse((await d.ctl(['status', '--json'])).stdout) as { pools: Array<{ name: string }> };
  assert.deepEqual(st.pools.map((p) => p.name), ['app']);
  assert.equal(await whoami(port), 'uid=33 gid=33\n');
});

test('a unix socket in a missing directory: one line naming ENOENT, exit 1', { timeout: 60_000 }, async (t) => {
  const missing = join(makeTempDir(t, 'fpm-ra-'), 'no-such-dir');
  const d = await startDaemon(t, {
    control_socket: 'off',
    listen: [{ protocol: 'fastcgi', address: `unix:${missing}/app.sock`, pool: 'app' }],
    pools: { app: { command: ['php-cgi'], user: process.geteuid?.() === 0 ? 'www-data' : undefined } },
  }, { noWait: true });
  const f = await failedStart(d);
  assertOneReadableFailure(f, new RegExp(`^${d.configPath}:\\d+: listen\\[0\\]\\.address: cannot create unix:${missing}/app\\.sock: ${missing}: no such directory \\(ENOENT\\)$`));
  assert.ok(!f.stderr.includes('EACCES'));
});

test('not root: user: www-data is ignored with a notice and the workers run as the daemon\'s user', { skip, timeout: 60_000 }, async (t) => {
  const { port, config } = await phpConfig(t, { user: 'www-data' });
  const dir = makeTempDir(t, 'fpm-ra-');
  chmodSync(dir, 0o755);
  const file = join(dir, 'fcgi-pm.yaml');
  writeFileSync(file, stringifyYaml(config), { mode: 0o644 });
  // The daemon itself as nobody, as a user would start it from a shell.
  const child = new ManagedChild('fcgi-pm', '/usr/bin/setpriv', ['--reuid=nobody', '--regid=nogroup', '--clear-groups', process.execPath, worldReadableBin(t), 'run', '-c', file], { cwd: dir });
  const d = new Daemon(child, file, config);
  t.after(() => d.stop());
  const notice = await d.waitForLog((l) => l.kind === 'notice', { timeout: 15_000, what: 'the notice' });
  assert.match(String(notice.msg), new RegExp(`^${file}:\\d+: pools\\.app: user/group ignored: fcgi-pm is not running as root, so workers run as uid 65534`));
  await waitFor(async () => {
    if (!d.running) throw new Error(`exited: ${d.stderr}`);
    return canConnect({ port });
  }, { timeout: 15_000, what: 'the listener' });
  assert.equal(await whoami(port), 'uid=65534 gid=65534\n');
});
