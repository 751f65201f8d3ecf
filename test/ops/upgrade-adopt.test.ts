/**
 * An upgrade by exec keeps the workers of the pools whose settings did not change: the
 * same pids serve on in the new code (adopted: reaped by the daemon itself, their output
 * read again), while a changed pool gets new workers; meanwhile a bridge (the new code in
 * a child process) serves the listeners through those workers, and is reaped afterwards. Real php-cgi behind real nginx; the
 * daemon is this test's child, as a foreground supervisor's is.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify as stringifyYaml } from 'yaml';
import { statusOf } from '../helpers/control-status.js';
import { ManagedChild } from '../helpers/child.js';
import { Daemon } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { startNginxKeptAlive, unixPhpLocation } from '../helpers/nginx.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import type { Scope } from '../helpers/scope.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor, withTimeout } from '../helpers/wait.js';
import { startLoad, type LoadPage } from './load.js';

/** The process state letter /proc gives (Z: a zombie nobody reaped), or undefined once it is gone. */
function procState(pid: number): string | undefined {
  try {
    return /^State:\s+(\S)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  } catch {
    return undefined;
  }
}

async function poolPids(control: string, pool: string): Promise<number[]> {
  const p = (await statusOf(control)).pools.find((s) => s.name === pool);
  assert.ok(p !== undefined, `no pool ${pool}`);
  return p.workers.filter((w) => w.state === 'idle' || w.state === 'busy').map((w) => w.pid).sort((a, b) => a - b);
}

/** Pool `same` behind TCP (nginx's default location), pool `changed` behind a Unix listener (/unix/). */
async function supervised(t: Scope) {
  const dir = makeTempDir(t, 'fpm-adopt-');
  const port = await freePort();
  const sock = join(dir, 'fcgi.sock');
  const config = {
    listen: [
      { protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'same' },
      { protocol: 'fastcgi', address: `unix:${sock}`, pool: 'changed', mode: '0666' },
    ],
    pools: {
      same: { command: phpCommand(dir, 'adopt-same'), pm: 'static', max_children: 2, kill_timeout: '1s' },
      changed: { command: phpCommand(dir, 'adopt-changed'), pm: 'static', max_children: 1, kill_timeout: '1s' },
    },
    runtime_dir: join(dir, 'run'),
    control_socket: join(dir, 'control.sock'),
    shutdown_timeout: '20s',
  };
  const configPath = join(dir, 'fcgi-pm.yaml');
  writeFileSync(configPath, stringifyYaml(config));
  const child = new ManagedChild('fcgi-pm', process.execPath, [join(REPO_ROOT, 'bin', 'fcgi-pm'), 'run', '-c', configPath, '--allow-root'], { cwd: dir, env: process.env });
  const d = new Daemon(child, configPath, config);
  t.after(() => d.stop().then(() => undefined));
  await d.waitForLog((l) => l.kind === 'ready', { what: 'ready', timeout: 20_000 }).catch((err: Error) => {
    throw new Error(`${err.message}\n${d.dump()}`);
  });
  const ngx = await startNginxKeptAlive(t, port, { keepalive: 8, locations: unixPhpLocation(sock) });
  const control = join(dir, 'control.sock');
  /** The config on disk with pool `changed` changed (as an operator's edit before the package upgrade). */
  const changeConfig = (): void => {
    const next = { ...config, pools: { ...config.pools, changed: { ...config.pools.changed, kill_timeout: '2s' } } };
    writeFileSync(configPath, stringifyYaml(next));
  };
  return { d, ngx, control, changeConfig };
}

const PAGES: LoadPage[] = [
  { path: '/hello.php', expect: /^Hello from PHP/ },
  { path: '/unix/hello.php', expect: /^Hello from PHP/ },
];

test('USR2: a bridge serves during the exec; an unchanged pool keeps its worker pids and they serve; a changed pool gets new workers; an adopted worker that exits is reaped and replaced', { timeout: 150_000 }, async (t) => {
  const { d, ngx, control, changeConfig } = await supervised(t);
  const same = await poolPids(control, 'same');
  const changed = await poolPids(control, 'changed');
  assert.equal(same.length, 2);
  assert.equal(changed.length, 1);
  const loads = PAGES.map((p) => startLoad(ngx.url, 2, p));
  t.after(() => Promise.all(loads.map((l) => l.stop())));
  const served = (n: number, what: string): Promise<void> =>
    withTimeout(Promise.all(loads.map((l) => l.more(n))).then(() => undefined), 60_000, `${what}: ${loads.map((l) => `${l.ok} served, ${l.failures.length} failed`).join('; ')}`);
  await served(5, 'before the upgrade');

  changeConfig();
  const since = d.mark();
  d.signal('SIGUSR2');
  // Access lines would crowd out the upgrade's own (and the bridge's warnings) in a dump.
  const upgradeLines = (): string => d.dump(since, 80, (l) => l.kind !== 'access');
  await d.waitForLog((l) => l.kind === 'ready', { since, timeout: 60_000, what: 'the new code ready' }).catch((err: Error) => {
    throw new Error(`${err.message}\n${upgradeLines()}`);
  });
  await served(5, 'after the upgrade');
  await Promise.all(loads.map((l) => l.stop()));
  const failures = loads.flatMap((l) => l.failures);
  // On failure the daemon's lines since the signal (the bridge's and the new code's) say which backend failed and why.
  assert.deepEqual(failures, [], failures.length > 0 ? `requests failed across the upgrade\n${upgradeLines()}` : undefined);
  assert.ok(d.running, d.dump(since));
  assert.equal((await statusOf(control)).daemon.pid, d.pid, 'the same pid');

  // The unchanged pool: the very same processes, adopted (the log says how many), and they serve.
  assert.deepEqual(await poolPids(control, 'same'), same, `pool same's workers were replaced\n${d.dump(since)}`);
  const adoptedLine = d.findLog((l) => l.kind === 'upgrade' && l.pool === 'same' && l.adopted === 2, since);
  assert.ok(adoptedLine !== undefined, `no line saying pool same's 2 workers were adopted\n${d.dump(since)}`);
  // The bridge served the listeners through the same workers while the process re-executed, then was stopped and reaped.
  const phases = d.findLog((l) => l.kind === 'upgrade_phases', since);
  assert.ok(phases !== undefined, 'no upgrade_phases line');
  assert.equal(phases.bridge, true, `no bridge served during the exec\n${d.dump(since)}`);
  // The check and the bridge's start are timed apart: each may be what a client's p99 waits on.
  assert.ok(typeof phases.check_ms === 'number' && typeof phases.bridge_start_ms === 'number', `phases: ${JSON.stringify(phases)}`);
  const bridgeGone = await d.waitForLog((l) => l.kind === 'upgrade' && typeof l.bridge_pid === 'number' && /stopped/.test(String(l.msg)), { since, timeout: 30_000, what: 'the bridge stopped' });
  const bridgePid = bridgeGone.bridge_pid as number;
  assert.notEqual(bridgePid, d.pid);
  await waitFor(() => procState(bridgePid) === undefined, { timeout: 10_000, what: `the bridge ${bridgePid} reaped (state ${procState(bridgePid)})` });
  const answeredBy = new Set<number>();
  for (let i = 0; i < 6; i++) {
    const r = await httpRequest(`${ngx.url}/pid.php`);
    assert.equal(r.status, 200);
    answeredBy.add(Number(r.body.toString().trim()));
  }
  for (const pid of answeredBy) assert.ok(same.includes(pid), `pid.php answered by ${pid}, not by an adopted worker (${same.join(', ')})`);

  // The changed pool: new workers, the old one stopped and reaped.
  const changedNow = await poolPids(control, 'changed');
  assert.equal(changedNow.length, 1);
  assert.ok(!changed.includes(changedNow[0]!), 'the changed pool kept its worker');
  await waitFor(() => procState(changed[0]!) === undefined, { timeout: 15_000, what: `the changed pool's old worker ${changed[0]} gone (state ${procState(changed[0]!)})` });
  assert.equal((await httpRequest(`${ngx.url}/unix/hello.php`)).status, 200);
  // The old worker's socket file went with it, and only its: the new one (same pool, same worker number) keeps its own.
  const newSocket = d.findLog((l) => l.kind === 'access' && l.pool === 'changed' && l.worker === changedNow[0], since)?.backend;
  assert.ok(typeof newSocket === 'string' && newSocket.startsWith('unix:'), `no access line of the changed pool's new worker ${changedNow[0]}`);
  assert.ok(existsSync(newSocket.slice('unix:'.length)), `${newSocket} of worker ${changedNow[0]} was removed with the old worker's`);
  assert.deepEqual(await poolPids(control, 'changed'), changedNow, `the changed pool's new worker was replaced\n${upgradeLines()}`);
  assert.equal(d.findLog((l) => l.code === 'ERR_BACKEND_UNREACHABLE', since), undefined, upgradeLines());

  // An adopted worker killed from outside: reaped by the daemon (no zombie), replaced (static pool).
  const victim = same[0]!;
  const killedAt = d.mark();
  process.kill(victim, 'SIGKILL');
  await waitFor(() => procState(victim) === undefined, { timeout: 10_000, what: `adopted worker ${victim} reaped (state ${procState(victim)})` });
  await d.waitForLog((l) => l.wpid === victim && typeof l.msg === 'string' && /killed|SIGKILL/.test(l.msg), { since: killedAt, timeout: 10_000, what: 'the exit line of the adopted worker' });
  await waitFor(async () => (await poolPids(control, 'same')).length === 2, { timeout: 20_000, what: 'a replacement for the killed worker' });
  const after = await poolPids(control, 'same');
  assert.ok(!after.includes(victim));
  assert.ok(after.includes(same[1]!), 'the other adopted worker serves on');
  assert.equal((await httpRequest(`${ngx.url}/hello.php`)).status, 200);
  // The bridge's stop left the Unix listener's socket file to the daemon.
  assert.equal((await httpRequest(`${ngx.url}/unix/hello.php`)).status, 200);
  assert.deepEqual(d.logsSince(since).filter((l) => (l.level ?? 0) >= 50), [], 'no error across the upgrade');
});
