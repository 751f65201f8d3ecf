// Measuring: /proc parsers on exact texts, the /proc sampler on a real child process
// that grows on command, the pidusage fallback agreeing with it, and the budget setting
// (config syntax, /proc/meminfo, auto and percentages).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { once } from 'node:events';
import { parseSmapsRollup, parseStat, parseStatus, ProcHandle } from '../../src/memory/proc.js';
import { LATER, PidusageSampler, ProcSampler, PSS_QUIET_REFRESH_SAMPLES, PSS_REFRESH_SAMPLES } from '../../src/memory/sampler.js';
import { AUTO_SHARE, parseMeminfo, resolveBudget } from '../../src/memory/budget.js';
import { killChildNow } from '../../src/pool/workers/hard-kill.js';
import { configFromObject, poolConfigFromObject } from '../../src/config/schema.js';
import { ConfigError } from '../../src/errors.js';
import { withTimeout } from '../helpers/wait.js';

const MiB = 1024 * 1024;

test('parseStat: comm with spaces and parentheses; utime+stime and rss pages', () => {
  const text = '4759 (we(i)rd name) S 4756 4756 30670 0 -1 4194304 15202 0 0 0 150 25 0 0 20 0 11 0 212272 832249856 23617 18446744073709551615 1 2 3\n';
  const bytes = (t: string): Buffer => Buffer.from(t, 'latin1');
  assert.deepEqual(parseStat(bytes(text)), { cpuTicks: 175, rssPages: 23617, faults: 15202 });
  // Read into a larger buffer: only `length` bytes count (what lies past them is an older, longer read).
  const buf = Buffer.alloc(4096, '9');
  const n = buf.write(text, 'latin1');
  assert.deepEqual(parseStat(buf, n), { cpuTicks: 175, rssPages: 23617, faults: 15202 });
  assert.deepEqual(parseStat(bytes(text.trimEnd())), { cpuTicks: 175, rssPages: 23617, faults: 15202 }, 'no newline at the end');
  assert.equal(parseStat(bytes('garbage')), undefined);
  assert.equal(parseStat(bytes(text.replace(' 150 25 ', ' 15x 25 '))), undefined, 'utime not a count');
  assert.equal(parseStat(bytes(text.slice(0, 60))), undefined, 'cut before rss');
});

test('parseSmapsRollup / parseStatus: kB lines to bytes', () => {
  const rollup = '00400000-7ffe474e4000 ---p 00000000 00:00 0  [rollup]\nRss:               20416 kB\nPss:               17757 kB\nPss_Anon:           4108 kB\nPss_File:          11253 kB\nAnonymous:          4108 kB\nSwap:                  0 kB\n';
  assert.deepEqual(parseSmapsRollup(rollup), { rss: 20416 * 1024, pss: 17757 * 1024, anon: 4108 * 1024, pssAnon: 4108 * 1024, pssFile: 11253 * 1024, swap: 0 });
  assert.equal(parseSmapsRollup('Rss: 5 kB\n'), undefined, 'no Pss line');
  const status = 'Name:\tnode\nVmSize:\t 1028960 kB\nVmRSS:\t   55832 kB\nRssAnon:\t   12824 kB\nRssFile:\t   43008 kB\nRssShmem:\t       0 kB\n';
  assert.deepEqual(parseStatus(status), { vmRss: 55832 * 1024, rssAnon: 12824 * 1024, rssFile: 43008 * 1024, rssShmem: 0, vmSize: 1028960 * 1024, vmHwm: undefined });
});

/** A Node child that allocates N MiB (touched) for each line "N" on stdin and answers "ok". */
async function grower(t: import('node:test').TestContext) {
  const code = `const keep=[];process.stdin.on('data',d=>{for(const n of String(d).trim().split(/\\s+/)){keep.push(Buffer.alloc(Number(n)*1048576,1));}process.stdout.write('ok\\n');});process.stdout.write('ready\\n');`;
  const child = spawn(process.execPath, ['-e', code], { stdio: ['pipe', 'pipe', 'inherit'] });
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  child.stdout.setEncoding('utf8');
  const lines: string[] = [];
  let waiting: (() => void) | undefined;
  child.stdout.on('data', (s: string) => {
    lines.push(...s.trim().split('\n'));
    waiting?.();
  });
  const next = async (): Promise<string> => {
    while (lines.length === 0) await new Promise<void>((r) => (waiting = r));
    return lines.shift()!;
  };
  assert.equal(await withTimeout(next(), 10_000, 'grower ready'), 'ready');
  return {
    pid: child.pid!,
    grow: async (mb: number) => {
      child.stdin.write(`${mb}\n`);
      assert.equal(await withTimeout(next(), 10_000, 'grower ok'), 'ok');
    },
    kill: async () => {
      child.kill('SIGKILL');
      await once(child, 'exit');
    },
    exited: new Promise<void>((resolve) => child.once('exit', () => resolve())),
  };
}

/** Descriptors this process holds on /proc/PID/ files. */
function procFds(pid: number): number {
  let n = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`).startsWith(`/proc/${pid}/`)) n++;
    } catch {
      // closed meanwhile
    }
  }
  return n;
}

test('ProcSampler: PSS and RSS of a real process follow its growth; CPU since the last sample; gone is undefined', async (t) => {
  const g = await grower(t);
  const s = new ProcSampler();
  t.after(() => s.close());
  assert.equal(s.measure, 'pss');
  assert.equal(procFds(g.pid), 0);
  const a = s.readNow(g.pid, 1000)!;
  assert.ok(a.pss !== undefined && a.rss > 0 && a.pss <= a.rss, JSON.stringify(a));
  assert.equal(a.measure, 'pss');
  assert.equal(a.value, a.pss);
  assert.equal(a.cpu, 0, 'no previous sample');
  assert.equal(procFds(g.pid), 2, 'stat and smaps_rollup stay open for the next sample');
  await g.grow(40);
  const b = s.readNow(g.pid, 2000)!;
  assert.ok(b.rss - a.rss > 35 * MiB, `rss grew: ${a.rss} → ${b.rss}`);
  assert.ok(b.pss! - a.pss! > 35 * MiB, `pss grew (re-read because rss moved): ${a.pss} → ${b.pss}`);
  assert.ok(b.anon! - a.anon! > 35 * MiB, 'anonymous memory grew');
  assert.ok(b.cpu > 0, 'allocating 40 MiB took CPU');
  // A steady process: PSS is carried forward, and re-read every PSS_REFRESH_SAMPLES samples
  // while it faults pages in, every PSS_QUIET_REFRESH_SAMPLES while it does not (nor its
  // high-water mark, which is read again after a fault only). Its page faults are made
  // here to stand still or move at each sample.
  const realStat = ProcHandle.prototype.readStat;
  let faults = 0;
  let running = false;
  ProcHandle.prototype.readStat = function (this: ProcHandle) {
    const st = realStat.call(this);
    return st === undefined ? st : { ...st, faults: running ? ++faults : faults };
  };
  try {
    let at = 3000;
    s.readNow(g.pid, (at += 1000), true);
    let reads = s.rollupReads;
    const hwm = s.hwm(g.pid)!;
    assert.ok(hwm >= b.rss, `VmHWM ${hwm} at least the RSS seen`);
    await g.grow(20); // a fault the stand-still count hides: the high-water mark is not read again
    for (let i = 0; i < PSS_QUIET_REFRESH_SAMPLES * 2; i++) {
      s.readNow(g.pid, (at += 1000));
      assert.equal(s.hwm(g.pid), hwm);
    }
    assert.equal(s.rollupReads - reads, 2, 'an idle process: PSS read at once (its RSS moved by 20 MiB), then PSS_QUIET_REFRESH_SAMPLES samples later');
    running = true;
    reads = s.rollupReads;
    for (let i = 0; i < PSS_REFRESH_SAMPLES * 2; i++) s.readNow(g.pid, (at += 1000));
    assert.equal(s.rollupReads - reads, 2, 'a running one: twice in twice PSS_REFRESH_SAMPLES samples');
    assert.ok(s.hwm(g.pid)! >= hwm + 19 * MiB, 'after a fault the high-water mark is read again');
    // Rounds (read) follow the same rule, the rollup through the threadpool.
    running = false;
    s.readNow(g.pid, (at += 1000), true);
    reads = s.rollupReads;
    for (let i = 0; i < PSS_QUIET_REFRESH_SAMPLES; i++) assert.ok((await s.read([g.pid], (at += 1000))).has(g.pid));
    assert.equal(s.rollupReads - reads, 1);
  } finally {
    ProcHandle.prototype.readStat = realStat;
  }
  const forced = s.rollupReads;
  s.readNow(g.pid, 200_000, true);
  assert.equal(s.rollupReads, forced + 1, 'fresh forces a PSS read');
  await g.kill();
  assert.equal(s.readNow(g.pid, 300_000), undefined);
  assert.equal(procFds(g.pid), 0, 'descriptors of a gone process are closed');
});

test('ProcSampler: a request that allocates between the stat read and the rollup read is not counted twice (PSS never above RSS)', async (t) => {
  const g = await grower(t);
  const s = new ProcSampler();
  t.after(() => s.close());
  const before = s.readNow(g.pid, 1000, true)!;
  // The race cannot be timed on a real process: the rollup is made to answer as it would
  // after 40 MiB were allocated between the two reads.
  const realRollup = ProcHandle.prototype.readRollup;
  ProcHandle.prototype.readRollup = function (this: ProcHandle) {
    const r = realRollup.call(this);
    return r === undefined ? r : { ...r, rss: r.rss + 40 * MiB, pss: r.pss + 40 * MiB };
  };
  let during;
  try {
    during = s.readNow(g.pid, 2000, true)!;
  } finally {
    ProcHandle.prototype.readRollup = realRollup;
  }
  assert.ok(during.pss! <= during.rss, `pss ${during.pss} above rss ${during.rss}`);
  // The 40 MiB are gone again: the next samples carry PSS forward from a consistent pair.
  const after = s.readNow(g.pid, 3000)!;
  assert.ok(after.pss! <= after.rss, `carried pss ${after.pss} above rss ${after.rss}`);
  assert.ok(Math.abs(after.pss! - before.pss!) < 4 * MiB, `carried pss ${after.pss} back near ${before.pss}`);
});

test('ProcSampler.forget closes the descriptors of a live process; self() measures the daemon', async (t) => {
  const g = await grower(t);
  const s = new ProcSampler();
  s.readNow(g.pid, 1);
  assert.equal(procFds(g.pid), 2);
  s.forget(g.pid);
  assert.equal(procFds(g.pid), 0);
  const me = s.self(5);
  assert.equal(me.pid, process.pid);
  assert.ok(me.value > 5 * MiB && me.value <= me.rss);
  assert.equal(procFds(process.pid), 2);
  s.close();
  assert.equal(procFds(process.pid), 0);
});

test('ProcSampler rounds read PSS through the threadpool; a process forgotten mid-read keeps its descriptors until the read ends', async (t) => {
  const g = await grower(t);
  const s = new ProcSampler();
  t.after(() => s.close());
  const got = await s.read([g.pid, 999_999_999], 1);
  assert.ok(got.get(g.pid)!.pss! > 0);
  assert.ok(!got.has(999_999_999));
  // Grown: the next round's PSS read is due, and goes through the threadpool.
  await g.grow(40);
  const reads = s.rollupReads;
  const inFlight = s.read([g.pid], 2);
  assert.equal(s.rollupReads, reads + 1);
  s.forget(g.pid);
  // Closing now could hand the descriptor number to a new socket before the read runs.
  assert.equal(procFds(g.pid), 2, 'still open while a read is in flight');
  await inFlight;
  assert.equal(procFds(g.pid), 0, 'closed as soon as it ended');
});

test('ProcSampler.readCounters: a sample now while only counters are due; LATER when PSS is due or a read is in flight; undefined once gone', async (t) => {
  const g = await grower(t);
  const s = new ProcSampler();
  t.after(() => s.close());
  assert.equal(s.readCounters(g.pid, 1000), LATER, 'no PSS yet: the round must read it');
  const first = (await s.read([g.pid], 1000)).get(g.pid)!;
  const rollups = s.rollupReads;
  const next = s.readCounters(g.pid, 2000);
  assert.ok(next !== LATER && next !== undefined, 'counters only: a sample at once');
  assert.equal(s.rollupReads, rollups, 'no page-table walk on the event loop');
  assert.equal(next.measure, 'pss');
  assert.ok(Math.abs(next.pss! - first.pss!) < 4 * MiB, `PSS carried forward: ${first.pss} → ${next.pss}`);
  // Grown by 40 MiB: its PSS is due again, and a read of it in flight is shared.
  await g.grow(40);
  assert.equal(s.readCounters(g.pid, 3000), LATER);
  const inFlight = s.read([g.pid], 3000);
  assert.equal(s.readCounters(g.pid, 3000), LATER, 'the read in flight has it');
  const grown = (await inFlight).get(g.pid)!;
  assert.ok(grown.pss! - first.pss! > 35 * MiB, `${first.pss} → ${grown.pss}`);
  await g.kill();
  assert.equal(s.readCounters(g.pid, 4000), undefined);
  assert.equal(procFds(g.pid), 0, 'descriptors of a gone process are closed');
});

/** `sh` that exec()s `sleep` when a line comes on stdin, as setpriv exec()s a worker's program. */
async function execOnCue(t: import('node:test').TestContext) {
  const child = spawn('/bin/sh', ['-c', 'read cue; exec sleep 30'], { stdio: ['pipe', 'ignore', 'inherit'] });
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  const pid = child.pid!;
  const cmdline = (): string => readFileSync(`/proc/${pid}/cmdline`, 'latin1');
  return {
    pid,
    exec: async () => {
      child.stdin.write('go\n');
      const until = Date.now() + 10_000;
      while (!cmdline().startsWith('sleep')) {
        assert.ok(Date.now() < until, 'the shell did not exec sleep');
        await new Promise((r) => setTimeout(r, 10));
      }
    },
  };
}

test('ProcSampler: a process sampled before it exec()s keeps its PSS after (setpriv runs first in every worker)', async (t) => {
  const s = new ProcSampler();
  t.after(() => s.close());
  const direct = await execOnCue(t);
  assert.equal(s.readNow(direct.pid, 1)!.measure, 'pss');
  await direct.exec();
  const after = s.readNow(direct.pid, 2, true)!;
  assert.equal(after.measure, 'pss', 'the rollup descriptor opened before the exec still answers');
  assert.ok(after.pss! > 0 && after.pss! <= after.rss);

  const rounds = await execOnCue(t);
  assert.equal((await s.read([rounds.pid], 1)).get(rounds.pid)!.measure, 'pss');
  await rounds.exec();
  // The rollup is read again within PSS_QUIET_REFRESH_SAMPLES rounds, through the threadpool.
  const reads = s.rollupReads;
  for (let i = 2; s.rollupReads === reads; i++) assert.equal((await s.read([rounds.pid], i)).get(rounds.pid)!.measure, 'pss', `round ${i}`);
  assert.equal((await s.read([rounds.pid], 1000)).get(rounds.pid)!.measure, 'pss', 'after the re-read');
});

test('the hard-limit kill only ever signals our own child', async (t) => {
  assert.equal(killChildNow(process.pid), false, 'not our child');
  assert.equal(killChildNow(1), false);
  assert.equal(killChildNow(999_999_999), false, 'no such process');
  const g = await grower(t);
  assert.equal(killChildNow(g.pid), true);
  await withTimeout(g.exited, 5000, 'SIGKILLed child exits');
});

test('PidusageSampler (the non-Linux path) reports the same RSS as /proc, asynchronously', async (t) => {
  const g = await grower(t);
  await g.grow(20);
  const p = new PidusageSampler();
  const s = new ProcSampler();
  t.after(() => {
    p.close();
    s.close();
  });
  assert.equal(p.sync, false);
  assert.equal(p.readNow(), undefined);
  const got = await p.read([g.pid, 999_999_999], 1);
  const a = got.get(g.pid)!;
  assert.equal(a.measure, 'rss');
  assert.equal(a.pss, undefined);
  assert.ok(!got.has(999_999_999), 'a pid that does not exist is left out');
  const b = s.readNow(g.pid, 1)!;
  assert.ok(Math.abs(a.rss - b.rss) < 4 * MiB, `pidusage ${a.rss} vs /proc ${b.rss}`);
});

test('memory_budget: auto, a percentage of MemTotal or a size; resolved against /proc/meminfo', () => {
  const info = parseMeminfo('MemTotal:       1000000 kB\nMemFree:          10000 kB\nMemAvailable:    400000 kB\n')!;
  assert.deepEqual(info, { memTotal: 1_024_000_000, memAvailable: 409_600_000, source: 'meminfo' });
  assert.equal(parseMeminfo('MemTotal: 100 kB\nMemFree: 10 kB\nCached: 20 kB\nBuffers: 5 kB\n')!.memAvailable, 35 * 1024, 'old kernels: free + cache');
  assert.equal(resolveBudget({ kind: 'auto' }, info).bytes, Math.floor(409_600_000 * AUTO_SHARE));
  assert.match(resolveBudget({ kind: 'auto' }, info).derivation, /75% of MemAvailable/);
  assert.equal(resolveBudget({ kind: 'percent', percent: 50 }, info).bytes, 512_000_000);
  assert.equal(resolveBudget({ kind: 'bytes', bytes: 64 * MiB }, info).bytes, 64 * MiB);

  const base = { listen: [{ protocol: 'fastcgi', address: '127.0.0.1:0' }], pools: { p: { command: ['php-cgi'] } } };
  const load = (extra: Record<string, unknown>) => configFromObject({ ...base, ...extra }, '<test>');
  assert.deepEqual(load({ memory_budget: 'auto' }).memoryBudget, { kind: 'auto' });
  assert.deepEqual(load({ memory_budget: '50%' }).memoryBudget, { kind: 'percent', percent: 50 });
  assert.deepEqual(load({ memory_budget: '48MiB' }).memoryBudget, { kind: 'bytes', bytes: 48 * MiB });
  assert.equal(load({}).memoryBudget, undefined);
  assert.equal(load({}).memorySampleInterval, 2000);
  for (const bad of ['150%', '0%', '512KiB', 'lots', true]) {
    assert.throws(() => load({ memory_budget: bad }), (e: unknown) => e instanceof ConfigError && /memory_budget/.test(e.problems[0]!), String(bad));
  }
  assert.throws(() => load({ memory_sample_interval: '50ms' }), /memory_sample_interval: must be at least 100ms/);
});

test('pool memory keys: defaults, and caps that contradict each other are config errors', () => {
  const p = poolConfigFromObject('p', { command: ['php-cgi'] });
  assert.equal(p.maxMemory, 0);
  assert.equal(p.maxMemoryHard, 0);
  assert.equal(p.memoryLimit, 0);
  assert.equal(p.rlimitAs, 0);
  assert.equal(p.expectedWorkerMemory, 32 * MiB);
  assert.equal(p.memorySampleInterval, undefined, 'inherits the top-level interval');
  assert.equal(poolConfigFromObject('p', { command: ['x'], max_memory: '64M', max_memory_hard: '96M', memory_sample_interval: '500ms' }).memorySampleInterval, 500);
  assert.throws(() => poolConfigFromObject('p', { command: ['x'], max_memory: '96M', max_memory_hard: '64M' }), /max_memory: must be less than max_memory_hard/);
  assert.throws(() => poolConfigFromObject('p', { command: ['x'], memory_limit: '16M' }), /memory_limit: memory_limit \(16MiB\) is smaller than expected_worker_memory \(32MiB\)/);
  assert.throws(() => poolConfigFromObject('p', { backends: ['127.0.0.1:9'], max_memory: '64M' }), /only applies to pools with "command"/);
});
