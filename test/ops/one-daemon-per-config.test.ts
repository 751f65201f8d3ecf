/**
 * One daemon per config: two daemons started from two files (same base name, different
 * directories, no control_socket) get control sockets of their own, and `status -c` /
 * `stop -c` reach the right one (the pid in each answer says so). A daemon that finds
 * another answering on its control socket refuses to start, naming it, while the first
 * keeps serving; and `stop -c FILE` refuses a daemon started from another file.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { lstatSync } from 'node:fs';
import { join } from 'node:path';
import { controlSocketPath } from '../../src/config/control-path.js';
import { startDaemon, type Daemon } from '../helpers/daemon.js';
import { freePort } from '../helpers/ports.js';
import { Cleanup } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';
import { canConnect, withTimeout } from '../helpers/wait.js';
import { runBin } from './helpers.js';

function configFor(port: number, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'p' }],
    pools: { p: { backends: ['127.0.0.1:1'] } },
    ...extra,
  };
}

async function statusPid(file: string): Promise<{ pid: number; config: string; controlSocket: string }> {
  const r = await runBin(['status', '--json', '-c', file]);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout).daemon;
}

describe('one daemon per config', { timeout: 90_000 }, () => {
  const scope = new Cleanup();
  after(() => scope.run());
  let a: Daemon;
  let b: Daemon;

  it('two configs, two control sockets: status -c and stop -c each reach their own daemon', async () => {
    a = await startDaemon(scope, configFor(await freePort()));
    b = await startDaemon(scope, configFor(await freePort()));
    const sa = await statusPid(a.configPath);
    const sb = await statusPid(b.configPath);
    assert.equal(sa.pid, a.pid);
    assert.equal(sb.pid, b.pid);
    assert.notEqual(sa.controlSocket, sb.controlSocket);
    // The CLI and the daemon derive the path with the one function.
    assert.equal(sa.controlSocket, controlSocketPath({ source: a.configPath }));
    assert.match(sa.controlSocket, /\/fcgi-pm-[0-9a-f]{10}\.sock$/);

    const stop = await runBin(['stop', '-c', a.configPath]);
    assert.equal(stop.code, 0, stop.stderr);
    assert.match(stop.stdout, new RegExp(`pid ${a.pid}, config ${a.configPath}\\) stopped`));
    await withTimeout(a.child.exited, 20_000, 'daemon A exits');
    assert.equal(b.running, true, 'stopping A left B running');
    assert.equal((await statusPid(b.configPath)).pid, b.pid);
  });

  it('a second daemon for the same config refuses to start, naming the first; the first keeps serving', async () => {
    const port = Number(String(b.config.listen[0].address).split(':')[1]);
    const again = await startDaemon(scope, b.config, { dir: join(b.configPath, '..'), noWait: true });
    const exit = await withTimeout(again.child.exited, 20_000, 'the second daemon exits');
    assert.equal(exit.code, 1);
    assert.match(again.stderr, new RegExp(`another fcgi-pm \\(pid ${b.pid}, config ${b.configPath}\\) answers on the control socket .*\\[ERR_ALREADY_RUNNING\\]`));
    assert.equal(again.stderr.trim().split('\n').length, 1, again.stderr);
    assert.equal(b.running, true);
    assert.equal(await canConnect({ port }), true, 'the first daemon still serves its listener');
    assert.equal((await statusPid(b.configPath)).pid, b.pid);
  });

  it('another config told to share that control socket refuses too, and stop -c with it does not stop the daemon', async () => {
    const shared = (await statusPid(b.configPath)).controlSocket;
    const other = await startDaemon(scope, configFor(await freePort(), { control_socket: shared }), { noWait: true });
    const exit = await withTimeout(other.child.exited, 20_000, 'the other daemon exits');
    assert.equal(exit.code, 1);
    assert.match(other.stderr, new RegExp(`pid ${b.pid}, config ${b.configPath}.*ERR_ALREADY_RUNNING`));

    const stop = await runBin(['stop', '-c', other.configPath]);
    assert.equal(stop.code, 1);
    assert.match(stop.stderr, new RegExp(`\\(pid ${b.pid}, config ${b.configPath}\\) was not started from ${other.configPath}; not sending it "ping"`));
    const reload = await runBin(['reload', '-c', other.configPath]);
    assert.equal(reload.code, 1);
    assert.match(reload.stderr, /was not started from .*; not sending it "reload"/);
    assert.equal(b.running, true, 'neither stop nor reload reached the other daemon');
    assert.equal((await statusPid(b.configPath)).pid, b.pid);
  });

  it('a stale control socket (nobody answers) is replaced as before', async () => {
    const dir = makeTempDir(scope, 'fpm-stale-');
    const control = join(dir, 'c.sock');
    // A socket file nobody listens on: bind in a child that is killed.
    await runBin(['-e', `require('net').createServer().listen(${JSON.stringify(control)}, () => process.kill(process.pid, 'SIGKILL'))`], { bin: process.execPath });
    assert.equal(lstatSync(control).isSocket(), true, 'the stale socket file is there');
    const d = await startDaemon(scope, configFor(await freePort(), { control_socket: control }), { dir });
    const r = await runBin(['status', '--json', '--control', control]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).daemon.pid, d.pid);
  });
});
