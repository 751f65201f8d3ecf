// Issue 5 acceptance, systemd: listening sockets handed over the way systemd does it
// (fds 3.., LISTEN_FDS, LISTEN_PID = the daemon's pid via an exec shim, LISTEN_FDNAMES),
// matched by name and by address, and connectable before the daemon runs; readiness
// notifications (READY=1, RELOADING=1, STOPPING=1) received on a unixgram socket.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as net from 'node:net';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { stringify as stringifyYaml } from 'yaml';
import { runBin } from '../cli/helpers.js';
import { ManagedChild } from '../helpers/child.js';
import { httpRequest } from '../helpers/http-client.js';
import { FCGI_PM_BIN, PHP_FIXTURES, REPO_ROOT } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { makeTempDir } from '../helpers/tmp.js';
import { canConnect, waitFor, withTimeout } from '../helpers/wait.js';

/** Parsed JSON lines of a child's stdout. */
function jsonLines(child: ManagedChild): Array<Record<string, unknown>> {
  const lines: Array<Record<string, unknown>> = [];
  let partial = '';
  child.proc.stdout!.setEncoding('utf8').on('data', (s: string) => {
    const parts = (partial + s).split('\n');
    partial = parts.pop()!;
    for (const p of parts) if (p.trim() !== '') lines.push(JSON.parse(p) as Record<string, unknown>);
  });
  return lines;
}

function listening(server: net.Server, opts: net.ListenOptions): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts, () => resolve());
  });
}

function fdOf(server: net.Server): number {
  return (server as unknown as { _handle: { fd: number } })._handle.fd;
}

function writeConfig(dir: string, config: Record<string, unknown>): string {
  const path = join(dir, 'fcgi-pm.yaml');
  writeFileSync(path, stringifyYaml(config));
  return path;
}

test('socket activation: sockets from systemd are taken over by name and by address, and accept before the daemon runs', { timeout: 60_000 }, async (t: TestContext) => {
  const dir = makeTempDir(t, 'fpm-sa-');
  const tcp = net.createServer();
  await listening(tcp, { host: '127.0.0.1', port: 0 });
  const tcpPort = (tcp.address() as net.AddressInfo).port;
  const unixPath = join(dir, 'web.sock');
  const unix = net.createServer();
  await listening(unix, { path: unixPath });
  const unusedPort = await freePort();
  const control = join(dir, 'control.sock');
  const cfgPath = writeConfig(dir, {
    control_socket: control,
    listen: [
      // Matched by name (FileDescriptorName=web): the configured address is not bound at all.
      { protocol: 'http', address: `127.0.0.1:${unusedPort}`, name: 'web', pool: 'php', document_root: PHP_FIXTURES },
      // Matched by address (read from /proc/net/unix).
      { protocol: 'http', address: `unix:${unixPath}`, pool: 'php', document_root: PHP_FIXTURES },
    ],
    pools: { php: { command: ['php-cgi'], max_children: 2 } },
  });
  // systemd sets LISTEN_PID to the service's pid: a shell that execs keeps its pid. It
  // waits a little first, so the web server below provably connects before fcgi-pm runs.
  const child = new ManagedChild('fcgi-pm', '/bin/sh', ['-c', `sleep 0.3; LISTEN_PID=$$ LISTEN_FDS=2 LISTEN_FDNAMES=web:other exec "${process.execPath}" "${FCGI_PM_BIN}" run --allow-root -c "${cfgPath}"`], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'pipe', 'pipe', fdOf(tcp), fdOf(unix)],
  });
  t.after(() => child.stop(10_000));
  const logs = jsonLines(child);
  // Our copies must stop accepting; the daemon has its own. (Closing a Unix server unlinks its path: move it aside.)
  tcp.close();
  renameSync(unixPath, `${unixPath}.aside`);
  await new Promise<void>((r) => unix.close(() => r()));
  renameSync(`${unixPath}.aside`, unixPath);

  // The web server connects before fcgi-pm is up: the kernel queues it.
  let runningAtConnect = '';
  const early = await new Promise<string>((resolve, reject) => {
    const s = net.connect(tcpPort, '127.0.0.1', () => {
      runningAtConnect = readFileSync(`/proc/${child.pid}/cmdline`, 'latin1').split('\0')[0]!;
      s.write('GET /hello.php HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    });
    let out = '';
    s.setEncoding('utf8').on('data', (c: string) => (out += c));
    s.on('end', () => resolve(out));
    s.on('error', reject);
  });
  assert.equal(runningAtConnect, '/bin/sh', 'connected while the service was still its shell, before fcgi-pm ran');
  assert.match(early, /^HTTP\/1\.1 200 [\s\S]*Hello from PHP\n/);

  await waitFor(() => logs.find((l) => l.kind === 'ready'), { timeout: 15_000, what: 'ready' });
  const viaUnix = await new Promise<string>((resolve, reject) => {
    const s = net.connect(unixPath, () => s.write('GET /hello.php HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'));
    let out = '';
    s.setEncoding('utf8').on('data', (c: string) => (out += c));
    s.on('end', () => resolve(out));
    s.on('error', reject);
  });
  assert.match(viaUnix, /^HTTP\/1\.1 200 [\s\S]*Hello from PHP\n/);
  assert.equal(await canConnect({ port: unusedPort }), false, 'the named listener did not bind its configured address');
  const taken = logs.filter((l) => l.kind === 'socket-activation');
  assert.deepEqual(taken.map((l) => [l.fd, l.listener]), [[3, `127.0.0.1:${unusedPort}`], [4, `unix:${unixPath}`]]);
  const s = JSON.parse((await runBin(['status', '--json', '--control', control])).stdout);
  assert.deepEqual(s.listeners.map((l: { inherited?: boolean }) => l.inherited), [true, true]);
  child.signal('SIGTERM');
  assert.deepEqual(await withTimeout(child.exited, 15_000, 'exit'), { code: 0, signal: null });
});

/** A unixgram receiver like systemd's: SO_PASSCRED, one JSON line per datagram, passed fds closed (BARRIER=1). */
const RECEIVER = `
import json, os, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
s.bind(sys.argv[1])
print(json.dumps({"listening": True}), flush=True)
while True:
    msg, anc, flags, addr = s.recvmsg(4096, socket.CMSG_SPACE(64))
    pid = None
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            pid = struct.unpack('3i', data[:12])[0]
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            for fd in struct.unpack('%di' % (len(data) // 4), data[: len(data) // 4 * 4]):
                os.close(fd)
    print(json.dumps({"pid": pid, "msg": msg.decode()}), flush=True)
`;

test('NOTIFY_SOCKET and an upgrade by exec: RELOADING=1, then READY=1 with the same MAINPID, and no STOPPING=1', { timeout: 90_000 }, async (t: TestContext) => {
  const dir = makeTempDir(t, 'fpm-snx-');
  const notify = join(dir, 'notify.sock');
  const receiver = new ManagedChild('receiver', '/usr/bin/python3', ['-c', RECEIVER, notify], {});
  t.after(() => receiver.stop(2000));
  const got = jsonLines(receiver);
  await waitFor(() => got.some((l) => l.listening === true), { what: 'the receiver' });
  const messages = (): Array<Record<string, string>> =>
    got.filter((l) => typeof l.msg === 'string' && l.msg !== 'BARRIER=1').map((l) => Object.fromEntries(String(l.msg).split('\n').map((x) => [x.slice(0, x.indexOf('=')), x.slice(x.indexOf('=') + 1)])));
  const port = await freePort();
  const control = join(dir, 'control.sock');
  const cfgPath = writeConfig(dir, {
    control_socket: control,
    listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'php', document_root: PHP_FIXTURES }],
    pools: { php: { command: ['php-cgi'], max_children: 2 } },
  });
  const daemon = new ManagedChild('fcgi-pm', process.execPath, [FCGI_PM_BIN, 'run', '--allow-root', '-c', cfgPath], { cwd: REPO_ROOT, env: { ...process.env, NOTIFY_SOCKET: notify } });
  t.after(() => daemon.stop(10_000));
  await waitFor(() => messages().find((m) => m.READY === '1'), { timeout: 15_000, what: 'READY=1' });
  const r = await runBin(['upgrade', '--control', control], { timeoutMs: 60_000 });
  assert.equal(r.code, 0, r.stderr);
  await waitFor(() => messages().filter((m) => m.READY === '1').length >= 2, { timeout: 30_000, what: 'READY=1 from the new code' });
  assert.deepEqual(messages().map((m) => Object.keys(m)[0]), ['READY', 'RELOADING', 'READY']);
  assert.equal(messages()[2]!.MAINPID, String(daemon.pid), 'the main pid did not change');
  assert.ok(daemon.running);
  assert.equal((await httpRequest(`http://127.0.0.1:${port}/hello.php`)).status, 200);
});

test('NOTIFY_SOCKET: READY=1 when serving, RELOADING=1 then READY=1 around a reload, STOPPING=1 on stop', { timeout: 60_000 }, async (t: TestContext) => {
  const dir = makeTempDir(t, 'fpm-sn-');
  const notify = join(dir, 'notify.sock');
  const receiver = new ManagedChild('receiver', '/usr/bin/python3', ['-c', RECEIVER, notify], {});
  t.after(() => receiver.stop(2000));
  const got = jsonLines(receiver);
  await waitFor(() => got.some((l) => l.listening === true), { what: 'the receiver' });
  const messages = (): Array<{ pid: number; fields: Record<string, string> }> =>
    got.filter((l) => typeof l.msg === 'string' && l.msg !== 'BARRIER=1').map((l) => ({ pid: l.pid as number, fields: Object.fromEntries(String(l.msg).split('\n').map((x) => [x.slice(0, x.indexOf('=')), x.slice(x.indexOf('=') + 1)])) }));

  const port = await freePort();
  const control = join(dir, 'control.sock');
  const cfgPath = writeConfig(dir, {
    control_socket: control,
    listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'php', document_root: PHP_FIXTURES }],
    pools: { php: { command: ['php-cgi'], max_children: 2 } },
  });
  const daemon = new ManagedChild('fcgi-pm', process.execPath, [FCGI_PM_BIN, 'run', '--allow-root', '-c', cfgPath], { cwd: REPO_ROOT, env: { ...process.env, NOTIFY_SOCKET: notify } });
  t.after(() => daemon.stop(10_000));
  await waitFor(() => messages().find((m) => m.fields.READY === '1'), { timeout: 15_000, what: 'READY=1' });
  const ready = messages()[0]!;
  assert.equal(ready.fields.MAINPID, String(daemon.pid));
  assert.match(ready.fields.STATUS ?? '', /serving 1 listener/);
  if (process.getuid?.() === 0) assert.equal(ready.pid, daemon.pid, 'as root the helper speaks with the daemon\'s pid (NotifyAccess=main works)');
  assert.equal((await httpRequest(`http://127.0.0.1:${port}/hello.php`)).status, 200, 'serving when READY=1 arrived');

  const r = await runBin(['reload', '--control', control]);
  assert.equal(r.code, 0, r.stderr);
  await waitFor(() => messages().filter((m) => m.fields.READY === '1').length >= 2, { what: 'READY=1 after the reload' });
  const seq = messages().map((m) => Object.keys(m.fields)[0]);
  assert.deepEqual(seq, ['READY', 'RELOADING', 'READY']);
  assert.match(messages()[1]!.fields.MONOTONIC_USEC ?? '', /^\d+$/);

  const stop = await runBin(['stop', '--control', control]);
  assert.equal(stop.code, 0, stop.stderr);
  await waitFor(() => messages().find((m) => m.fields.STOPPING === '1'), { what: 'STOPPING=1' });
  assert.deepEqual(await withTimeout(daemon.exited, 15_000, 'exit'), { code: 0, signal: null });
});
