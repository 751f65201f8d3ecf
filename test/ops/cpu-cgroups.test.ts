// Each pool's workers in a CPU cgroup of their own, weighted by cpu_weight (equal by
// default), so a noisy pool cannot take the CPU a quiet one needs; visible in status,
// workers and Prometheus; removed when the pool stops. Where fcgi-pm may not make cgroups,
// the daemon says so once at start and serves all the same.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import type { PoolStatus } from '../../src/control/types.js';
import { cpuCgroupsAtStart } from '../../src/memory/cpu-cgroup.js';
import { httpRequest } from '../helpers/http-client.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { opsDaemon } from './helpers.js';

const host = cpuCgroupsAtStart();

test('pools run in CPU cgroups of their own, weighted by cpu_weight, shown in status and workers, removed at stop', { timeout: 60_000, skip: host.ok ? false : `this host lets fcgi-pm make no CPU cgroup: ${host.ok ? '' : host.why}` }, async (t) => {
  const [port, port2] = [await freePort(), await freePort()];
  const dir = makeTempDir(t);
  const d = await opsDaemon(t, {
    listen: [
      { protocol: 'http', address: `127.0.0.1:${port}`, pool: 'quiet', document_root: PHP_FIXTURES },
      { protocol: 'http', address: `127.0.0.1:${port2}`, pool: 'noisy', document_root: PHP_FIXTURES },
    ],
    pools: {
      quiet: { command: phpCommand(dir, 'cpu-quiet'), pm: 'static', max_children: 1 },
      noisy: { command: phpCommand(dir, 'cpu-noisy'), pm: 'static', max_children: 2, cpu_weight: 300 },
      plain: { command: phpCommand(dir, 'cpu-plain'), pm: 'static', max_children: 1, cpu_weight: 0 },
    },
    log: { level: 'info' },
  });
  await d.daemon.waitForLog((l) => l.kind === 'cpu' && typeof l.cpuCgroups === 'string', { timeout: 5000, what: 'the start-up line on CPU cgroups' });
  const pools = async (): Promise<PoolStatus[]> => (JSON.parse((await d.ctl(['status', '--json'])).stdout) as { pools: PoolStatus[] }).pools;
  const ps = await waitFor(async () => {
    const all = await pools();
    return all.every((p) => p.workers.length === p.maxChildren && p.workers.every((w) => w.state === 'idle')) ? all : undefined;
  }, { timeout: 15_000, what: 'all workers up' });
  const quiet = ps.find((p) => p.name === 'quiet')!;
  const noisy = ps.find((p) => p.name === 'noisy')!;
  assert.ok(quiet.cpu && noisy.cpu, 'both pools have a CPU cgroup');
  assert.notEqual(quiet.cpu.dir, noisy.cpu.dir);
  assert.equal(quiet.cpu.weight, 100, 'equal weights by default');
  assert.equal(noisy.cpu.weight, 300);
  assert.equal(ps.find((p) => p.name === 'plain')!.cpu, undefined, 'cpu_weight 0: no CPU cgroup');
  // What the kernel holds, and where each worker is.
  for (const p of [quiet, noisy]) {
    assert.equal(readFileSync(`${p.cpu!.dir}/${p.cpu!.file}`, 'latin1').trim(), p.cpu!.value);
    const inside = readFileSync(`${p.cpu!.dir}/cgroup.procs`, 'latin1').split('\n').filter(Boolean).map(Number);
    for (const w of p.workers) assert.ok(inside.includes(w.pid), `worker ${w.pid} of ${p.name} is in ${p.cpu!.dir}`);
  }
  assert.equal((await httpRequest(`http://127.0.0.1:${port}/hello.php`)).status, 200);

  const workers = (await d.ctl(['workers'])).stdout;
  for (const w of noisy.workers) assert.match(workers, new RegExp(`^noisy\\s+${w.pid}\\s+idle\\s+\\S+\\s+\\S+\\s+\\S+\\s+300\\s`, 'm'), workers);
  const listed = JSON.parse((await d.ctl(['workers', '--json'])).stdout) as Array<{ pool: string; cpuCgroup?: string; cpuWeight?: number }>;
  assert.ok(listed.filter((w) => w.pool === 'quiet').every((w) => w.cpuCgroup === quiet.cpu!.dir && w.cpuWeight === 100), JSON.stringify(listed));
  const text = (await d.ctl(['status', '--pool', 'quiet'])).stdout;
  assert.match(text, /CPU cgroup \S+: cpu_weight 100/, text);
  const prom = (await d.ctl(['status', '--prometheus'])).stdout;
  assert.match(prom, /^fcgipm_pool_cpu_weight\{pool="noisy"\} 300$/m);

  const dirs = [quiet.cpu.dir, noisy.cpu.dir];
  await d.ctl(['stop']);
  await waitFor(() => (d.daemon.running ? undefined : true), { timeout: 15_000, what: 'the daemon stopped' });
  for (const dir of dirs) assert.equal(existsSync(dir), false, `${dir} removed at stop`);
});

// daemon_cpu_weight under cgroup v1 with autogroups: the daemon's session is one entity
// beside the pools' cgroups; a daemon that leads its session (a service) raises its
// autogroup's weight, one in a terminal's session leaves it (it would raise the shell's).
const autogroups = ((): string | undefined => {
  if (!host.ok) return `no CPU cgroups: ${host.why}`;
  if (host.version !== 1) return 'cgroup v2: the daemon leaf carries the weight';
  try {
    if (readFileSync('/proc/sys/kernel/sched_autogroup_enabled', 'latin1').trim() !== '1') return 'autogroups are off';
    return /^\d+:([^:]*,)?cpu(,[^:]*)?:\/$/m.test(readFileSync('/proc/self/cgroup', 'latin1')) ? undefined : 'not in the root CPU cgroup';
  } catch {
    return 'no autogroups on this kernel';
  }
})();

test('a daemon that leads its session raises its autogroup to daemon_cpu_weight; one in a shared session leaves it', { timeout: 60_000, skip: autogroups ?? false }, async (t) => {
  const dir = makeTempDir(t);
  const config = (port: number): Record<string, unknown> => ({
    listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'app', document_root: PHP_FIXTURES }],
    pools: { app: { command: phpCommand(dir, 'cpu-own'), pm: 'static', max_children: 1 } },
    log: { level: 'info' },
  });
  const service = await opsDaemon(t, config(await freePort()), { prefix: ['setsid'] });
  const line = await service.daemon.waitForLog((l) => l.kind === 'cpu' && typeof l.cpuCgroups === 'string', { timeout: 5000, what: 'the start-up line on CPU cgroups' });
  assert.equal(line.daemonCpuWeight, 300, JSON.stringify(line));
  assert.match(readFileSync(`/proc/${service.daemon.pid}/autogroup`, 'latin1'), / nice -5$/m, 'weight 300 ≈ nice −5');
  const shared = await opsDaemon(t, config(await freePort()));
  const line2 = await shared.daemon.waitForLog((l) => l.kind === 'cpu' && typeof l.cpuCgroups === 'string', { timeout: 5000, what: 'the start-up line on CPU cgroups' });
  assert.equal(line2.daemonCpuWeight, undefined);
  assert.match(String(line2.msg), /shares its session's autogroup/);
  // Unchanged: nice 0, or an empty file where the test runs in init's session (the root autogroup, no nice).
  assert.match(readFileSync(`/proc/${shared.daemon.pid}/autogroup`, 'latin1'), /^$| nice 0$/m);
});
