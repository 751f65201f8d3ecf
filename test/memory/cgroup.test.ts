// Memory cgroups as text (src/memory/cgroup.ts), the budget taken from the tightest
// limit (budget.ts), and the two spawn rules that keep a guess from starving a pool
// and the box's measured memory out of its headroom (governor.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  ancestors,
  cgroupDir,
  DAEMON_LEAF,
  oomKillsFrom,
  parseLimit,
  cpuWeightFile,
  parseMountinfo,
  parseProcCgroup,
  tightest,
  unreclaimable,
} from '../../src/memory/cgroup.js';
import { parseMeminfo, resolveBudget } from '../../src/memory/budget.js';
import { decideSpawn, type HostView, type SpawnAsk } from '../../src/memory/governor.js';
import { locateCpuCgroup, locateMemoryCgroup, settleInLeaf } from '../../src/memory/cgroup-files.js';
import { makeTempDir } from '../helpers/tmp.js';

const MiB = 1024 * 1024;

test('/proc/PID/cgroup: the v1 memory hierarchy (alone or with other controllers) and the unified one', () => {
  const cases: Array<[string, { v1Memory: string | undefined; v1Cpu: string | undefined; v2: string | undefined }]> = [
    ['9:name=systemd:/\n4:memory:/process_api/abc\n3:cpuset:/\n1:cpu:/\n0::/\n', { v1Memory: '/process_api/abc', v1Cpu: '/', v2: '/' }],
    ['0::/system.slice/fcgi-pm.service\n', { v1Memory: undefined, v1Cpu: undefined, v2: '/system.slice/fcgi-pm.service' }],
    ['5:cpu,memory,cpuacct:/docker/1f2e\n', { v1Memory: '/docker/1f2e', v1Cpu: '/docker/1f2e', v2: undefined }],
    ['4:memory:/odd:name\n2:cpuacct,cpu:/a\n', { v1Memory: '/odd:name', v1Cpu: '/a', v2: undefined }],
    ['', { v1Memory: undefined, v1Cpu: undefined, v2: undefined }],
    ['garbage\n', { v1Memory: undefined, v1Cpu: undefined, v2: undefined }],
  ];
  for (const [text, want] of cases) assert.deepEqual(parseProcCgroup(text), want, JSON.stringify(text));
});

test('mountinfo: the v1 memory and cpu mounts and the cgroup2 mount, with their roots; escaped spaces undone', () => {
  const text = [
    '31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755',
    '32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu',
    '35 31 0:32 /box /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory',
    '41 31 0:38 / /sys/fs/cgroup/uni\\040fied rw,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate',
  ].join('\n');
  assert.deepEqual(parseMountinfo(text), {
    v1Memory: { root: '/box', mount: '/sys/fs/cgroup/memory' },
    v1Cpu: { root: '/', mount: '/sys/fs/cgroup/cpu' },
    v2: { root: '/', mount: '/sys/fs/cgroup/uni fied' },
  });
  // cpuacct alone is not the cpu controller.
  assert.equal(parseMountinfo('33 31 0:30 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n').v1Cpu, undefined);
  assert.deepEqual(parseMountinfo('22 1 0:20 / /proc rw - proc proc rw\n'), { v1Memory: undefined, v1Cpu: undefined, v2: undefined });
});

test('cgroupDir maps a cgroup path under a mount (a container sees its own subtree as /); ancestors walk up to the mount', () => {
  const m = { root: '/', mount: '/sys/fs/cgroup/memory' };
  assert.equal(cgroupDir(m, '/a/b'), '/sys/fs/cgroup/memory/a/b');
  assert.equal(cgroupDir(m, '/'), '/sys/fs/cgroup/memory');
  const c = { root: '/docker/1f', mount: '/sys/fs/cgroup' };
  assert.equal(cgroupDir(c, '/docker/1f'), '/sys/fs/cgroup');
  assert.equal(cgroupDir(c, '/docker/1f/sub'), '/sys/fs/cgroup/sub');
  assert.equal(cgroupDir(c, '/other'), undefined, 'not visible from this mount');
  assert.deepEqual(ancestors('/sys/fs/cgroup/memory/a/b', '/sys/fs/cgroup/memory'), ['/sys/fs/cgroup/memory/a/b', '/sys/fs/cgroup/memory/a', '/sys/fs/cgroup/memory']);
  assert.deepEqual(ancestors('/sys/fs/cgroup', '/sys/fs/cgroup'), ['/sys/fs/cgroup']);
});

test('limits: v2 "max" and v1 "unlimited" (PAGE_COUNTER_MAX pages) are no limit; the tightest finite one wins', () => {
  const cases: Array<[string, number | undefined]> = [
    ['max\n', Infinity],
    ['9223372036854771712\n', Infinity],
    ['67108864\n', 64 * MiB],
    ['0\n', 0],
    ['-1\n', undefined],
    ['', undefined],
  ];
  for (const [text, want] of cases) assert.equal(parseLimit(text), want, JSON.stringify(text));
  assert.deepEqual(tightest([{ dir: '/a/b', limit: Infinity }, { dir: '/a', limit: 128 * MiB }, { dir: '/', limit: 64 * MiB }]), { dir: '/', limit: 64 * MiB });
  assert.equal(tightest([{ dir: '/a', limit: Infinity }]), undefined);
});

test('what the kernel cannot reclaim: usage minus file pages (v1 total_ figures, v2 plain); OOM kill counters', () => {
  const v1 = 'cache 1000\nrss 5\ntotal_active_file 3145728\ntotal_inactive_file 1048576\nactive_file 1\ninactive_file 1\n';
  assert.equal(unreclaimable('20971520\n', v1, 1), 20 * MiB - 4 * MiB);
  const v2 = 'anon 8388608\nfile 4194304\nactive_file 2097152\ninactive_file 2097152\n';
  assert.equal(unreclaimable('16777216\n', v2, 2), 12 * MiB);
  assert.equal(unreclaimable('garbage', v2, 2), undefined);
  assert.equal(oomKillsFrom('oom_kill_disable 0\nunder_oom 0\noom_kill 3\n'), 3, 'v1 memory.oom_control');
  assert.equal(oomKillsFrom('low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n'), 2, 'v2 memory.events');
  assert.equal(oomKillsFrom('oom_kill_disable 0\n'), undefined, 'kernels before 4.13 have no counter');
});

test('memory_budget: percentages and auto from the cgroup limit when it is below the host; the derivation says which', () => {
  const host = parseMeminfo('MemTotal:       24683652 kB\nMemAvailable:   20000000 kB\n')!;
  const box = { limit: 64 * MiB, dir: '/sys/fs/cgroup/memory/box' };
  const pct = resolveBudget({ kind: 'percent', percent: 80 }, host, box);
  assert.equal(pct.bytes, Math.floor(64 * MiB * 0.8));
  assert.equal(pct.derivation, '80% of cgroup limit 64.0MiB (/sys/fs/cgroup/memory/box)');
  assert.equal(resolveBudget({ kind: 'auto' }, host, box).bytes, 48 * MiB);
  assert.match(resolveBudget({ kind: 'auto' }, host, box).derivation, /75% of cgroup limit 64.0MiB/);
  assert.equal(resolveBudget({ kind: 'bytes', bytes: 56 * MiB }, host, box).bytes, 56 * MiB);
  // A limit above the host's memory changes nothing.
  const wide = { limit: 64 * 1024 * MiB, dir: '/big' };
  assert.match(resolveBudget({ kind: 'percent', percent: 50 }, host, wide).derivation, /of MemTotal/);
  assert.match(resolveBudget({ kind: 'auto' }, host, wide).derivation, /of MemAvailable/);
  assert.match(resolveBudget({ kind: 'percent', percent: 50 }, host).derivation, /of MemTotal/);
});

function hostView(over: Partial<HostView> = {}): HostView {
  return { budget: 56 * MiB, committed: 38 * MiB, freeing: 0, othersWaiting: false, idle: [], busy: [], starving: true, ...over };
}

function ask(over: Partial<SpawnAsk> = {}): SpawnAsk {
  return { want: 8, demand: 8, estimate: 32 * MiB, poolCommitted: 0, poolLimit: 0, host: hostView(), ...over };
}

test('a pool with no worker measured starts one when the smallest plausible worker fits, though its guess does not', () => {
  // The 56 MiB case: 18 MiB uncommitted, a 32 MiB guess; another pool's busy worker holds memory it could give back.
  const other = { pool: 'other', id: 1, pid: 1001, charge: 20 * MiB, value: 20 * MiB, since: 0 };
  assert.equal(decideSpawn(ask({ host: hostView({ busy: [other] }) })).admit, 0, 'without a probe: waits for the other pool (the old behaviour)');
  const d = decideSpawn(ask({ probe: 4 * MiB }));
  assert.equal(d.admit, 1);
  assert.equal(d.limitedBy, 'memory_budget');
  assert.equal(decideSpawn(ask({ probe: 4 * MiB, host: hostView({ committed: 53 * MiB, busy: [other] }) })).admit, 0, 'not even the probe fits');
  assert.equal(decideSpawn(ask({ probe: 4 * MiB, host: hostView({ starving: false }) })).admit, 0, 'a pool with a worker waits for it');
  // memory_limit below the guess, above the probe.
  assert.equal(decideSpawn(ask({ probe: 4 * MiB, poolLimit: 16 * MiB, host: undefined })).admit, 1);
  assert.equal(decideSpawn(ask({ probe: 4 * MiB, poolLimit: 16 * MiB, poolCommitted: 32 * MiB, host: undefined })).admit, 0);
});

test('a pool with no worker, whose memory nothing can give back (the daemon holds it), starts one past the budget where the box has room', () => {
  // The 64 MiB board: a 51 MiB budget, 37 MiB of it the daemon's, a measured 22 MiB worker.
  const board = (over: Partial<HostView>): SpawnAsk => ask({ want: 8, demand: 8, estimate: 22 * MiB, host: hostView({ budget: 51 * MiB, committed: 37 * MiB, ...over }) });
  const d = decideSpawn(board({ room: 26 * MiB }));
  assert.equal(d.admit, 1, 'one, not eight');
  assert.equal(decideSpawn(board({})).admit, 1, 'outside a memory cgroup too');
  assert.equal(decideSpawn(board({ room: 10 * MiB })).admit, 0, 'not into the box\'s headroom');
  assert.equal(decideSpawn(board({ starving: false, room: 26 * MiB })).admit, 0, 'a pool with a worker waits for it');
  assert.equal(decideSpawn(board({ freeing: 30 * MiB, room: 26 * MiB })).admit, 0, 'memory on its way back: wait for it');
  assert.equal(decideSpawn(ask({ want: 1, demand: 0, estimate: 22 * MiB, host: hostView({ budget: 51 * MiB, committed: 37 * MiB, room: 26 * MiB }) })).admit, 0, 'a spare spawn never');
});

test('the box: no spawn takes measured memory into the cgroup headroom, whatever the budget says', () => {
  const free = hostView({ budget: Infinity, committed: 10 * MiB, starving: false });
  assert.equal(decideSpawn(ask({ estimate: 8 * MiB, host: { ...free, room: 20 * MiB } })).admit, 2);
  const d = decideSpawn(ask({ estimate: 8 * MiB, host: { ...free, room: 20 * MiB } }));
  assert.equal(d.limitedBy, 'cgroup_limit');
  assert.equal(decideSpawn(ask({ estimate: 8 * MiB, host: { ...free, room: -1 } })).admit, 0);
  assert.equal(decideSpawn(ask({ estimate: 8 * MiB, host: { ...free, room: undefined } })).admit, 8, 'no cgroup limit');
  const budgetTighter = decideSpawn(ask({ estimate: 8 * MiB, host: { ...free, budget: 26 * MiB, room: 100 * MiB } }));
  assert.equal(budgetTighter.admit, 2);
  assert.equal(budgetTighter.limitedBy, 'memory_budget');
});

test('cpu_weight in each version: v2 cpu.weight as given; v1 cpu.shares scaled so 100 is the default 1024', () => {
  assert.deepEqual(cpuWeightFile(2, 100), { file: 'cpu.weight', value: '100' });
  assert.deepEqual(cpuWeightFile(2, 10000), { file: 'cpu.weight', value: '10000' });
  assert.deepEqual(cpuWeightFile(1, 100), { file: 'cpu.shares', value: '1024' });
  assert.deepEqual(cpuWeightFile(1, 50), { file: 'cpu.shares', value: '512' });
  assert.deepEqual(cpuWeightFile(1, 1), { file: 'cpu.shares', value: '10' });
});

/** A fake /proc/self and cgroup2 mount in `base`: the daemon (`pid`) in /system.slice/x.service with `procs`. */
function fakeV2(base: string, pid: number, procs: number[], controllers: string): { proc: string; svc: string } {
  const mount = join(base, 'cg');
  const svc = join(mount, 'system.slice', 'x.service');
  mkdirSync(svc, { recursive: true });
  writeFileSync(join(svc, 'cgroup.controllers'), controllers);
  writeFileSync(join(svc, 'cgroup.procs'), procs.map((p) => `${p}\n`).join(''));
  const proc = join(base, 'proc');
  mkdirSync(proc);
  writeFileSync(join(proc, 'cgroup'), '0::/system.slice/x.service\n');
  writeFileSync(join(proc, 'mountinfo'), `41 31 0:38 / ${mount} rw,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n`);
  return { proc, svc };
}

// The kernel's cgroupfs cannot run with the cpu and memory controllers on v2 on this
// machine (its v1 hierarchies hold them), so the directory is a plain one standing in.
test('cgroup v2 delegated (Delegate=yes): the daemon alone in its cgroup moves into a leaf, and the pools\' cgroups go beside it', (t) => {
  const base = makeTempDir(t, 'fpm-leaf-');
  const { proc, svc } = fakeV2(base, 4242, [4242], 'cpu memory pids\n');
  assert.deepEqual(settleInLeaf(proc, 4242), { moved: join(svc, DAEMON_LEAF) });
  assert.equal(readFileSync(join(svc, DAEMON_LEAF, 'cgroup.procs'), 'latin1'), '4242');
  // Where the daemon now is (and where an upgrade in place finds itself): the cgroup above the leaf is fcgi-pm's.
  writeFileSync(join(proc, 'cgroup'), `0::/system.slice/x.service/${DAEMON_LEAF}\n`);
  assert.equal(settleInLeaf(proc, 4242), undefined, 'already settled');
  const cpu = locateCpuCgroup(proc);
  assert.deepEqual(cpu, { root: { version: 2, dir: svc } });
  assert.equal(locateMemoryCgroup(proc)?.dir, svc);
});

test('cgroup v2: a cgroup shared with other processes, or without the controllers, is left as it is', (t) => {
  const shared = fakeV2(makeTempDir(t, 'fpm-leaf-'), 4242, [4242, 4243], 'cpu memory\n');
  assert.match(JSON.stringify(settleInLeaf(shared.proc, 4242)), /holds other processes \(2\)/);
  assert.equal(existsSync(join(shared.svc, DAEMON_LEAF)), false);
  const bare = fakeV2(makeTempDir(t, 'fpm-leaf-'), 4242, [4242], 'pids\n');
  assert.equal(settleInLeaf(bare.proc, 4242), undefined);
  assert.equal(existsSync(join(bare.svc, DAEMON_LEAF)), false);
});
