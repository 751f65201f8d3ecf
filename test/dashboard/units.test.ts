// Dashboard units: merging peers' snapshots, the sample ring's bound, chart points from
// cumulative counters, the config writer keeping comments (and refusing what the schema
// refuses), the line diff, password hashes, the warnings ring, the rows a page is sent.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EditConflict, hashText, writeIfUnchanged } from '../../src/dashboard/atomic-write.js';
import { editPoolText, editSettingsText, settingsAt, SITE_POOL_PATH } from '../../src/dashboard/config-edit.js';
import { lineDiff } from '../../src/dashboard/diff.js';
import { mergeCluster } from '../../src/dashboard/merge.js';
import { percentile } from '../../src/control/histogram.js';
import { waitFor } from '../helpers/wait.js';
import { poolPoint } from '../../src/dashboard/points.js';
import { SampleRing } from '../../src/dashboard/ring.js';
import { rowKey, SentRows, type PoolRow } from '../../src/dashboard/rows.js';
import { hashPassword, verifyPassword } from '../../src/dashboard/auth.js';
import { WarningRing } from '../../src/log/warning-ring.js';
import { configFromObject } from '../../src/config/schema.js';
import { problemsOf } from '../config/helpers.js';
import { parseRequest, type ControlRequest } from '../../src/control/protocol.js';
import { ClusterSampler, ringKey } from '../../src/dashboard/sampler.js';
import { OutcomeCounter } from '../../src/control/outcomes.js';
import { renderPrometheus } from '../../src/control/render-prometheus.js';
import { renderText } from '../../src/control/render-text.js';
import type { Exchange } from '../../src/protocol/exchange.js';
import { SNAPSHOT_FORMAT, type PoolStatus, type StatusSnapshot } from '../../src/control/types.js';

function pool(name: string, over: Partial<PoolStatus> = {}): PoolStatus {
  return {
    name, kind: 'spawned', pm: 'ondemand', state: 'running', startedAt: 0, generations: 1, maxChildren: 4,
    accepted: 0, completed: 0, aborted: 0, active: 0, maxActive: 0,
    queue: { length: 0, max: 0, limit: 10, oldestWaitMs: 0 },
    processes: { spawning: 0, idle: 0, busy: 0, draining: 0, stopping: 0, total: 0 },
    rejected: { queueFull: 0, queueTimeout: 0, failing: 0, shuttingDown: 0 },
    errors: { unreachable: 0, timeout: 0, crashed: 0, other: 0 },
    maxChildrenReached: 0, crashes: 0, recycles: {}, slowRequests: 0, backends: [], workers: [], ...over,
  };
}

function snap(pid: number, config: string, pools: PoolStatus[]): StatusSnapshot {
  return {
    format: SNAPSHOT_FORMAT,
    daemon: { version: '1', pid, state: 'running', startedAt: 0, now: 1000, config, controlSocket: undefined, reloads: { ok: 0, failed: 0 }, rss: 0 },
    listeners: [], pools,
  };
}

test('merge: ourselves first, a down peer kept with its reason, a daemon listed twice shown once, pools indexed by daemon', () => {
  const a = snap(10, '/etc/a.yaml', [pool('www'), pool('api')]);
  const b = snap(20, '/etc/b.yaml', [pool('www')]);
  const c = mergeCluster([
    { id: 'self', kind: 'self', up: true, snapshot: a },
    { id: '/run/b.sock', kind: 'socket', up: true, snapshot: b },
    { id: '/run/c.sock', kind: 'socket', up: false, reason: 'connection refused: a stale socket' },
    { id: 'http://127.0.0.1:9910', kind: 'http', up: true, snapshot: a },
  ], 5);
  assert.deepEqual(c.daemons.map((d) => [d.id, d.up]), [['self', true], ['/run/b.sock', true], ['/run/c.sock', false]]);
  assert.equal(c.daemons[2]!.reason, 'connection refused: a stale socket');
  assert.equal(c.daemons[0]!.label, '/etc/a.yaml (pid 10)');
  assert.deepEqual(c.pools, { www: ['self', '/run/b.sock'], api: ['self'] });
});

test('ring: never more than its capacity, oldest dropped first', () => {
  const r = new SampleRing<number>(3);
  for (let i = 1; i <= 10; i++) r.push(i);
  assert.equal(r.length, 3);
  assert.deepEqual(r.toArray(), [8, 9, 10]);
  assert.equal(r.last(), 10);
  assert.throws(() => new SampleRing(0), RangeError);
});

test('points: req/s from completed, percentiles from the interval histogram, no rate across a restart', () => {
  const bounds = [1, 10, 100];
  const p0 = pool('www', { completed: 100, outcomes: { status: { '1xx': 0, '2xx': 100, '3xx': 0, '4xx': 0, '5xx': 0 }, refusals: {}, latency: { boundsMs: bounds, counts: [50, 50, 0, 0], sumMs: 300 }, queueWait: { boundsMs: bounds, counts: [100, 0, 0, 0], sumMs: 0 } } });
  const p1 = pool('www', { completed: 300, processes: { spawning: 0, idle: 1, busy: 2, draining: 0, stopping: 0, total: 3 }, outcomes: { status: { '1xx': 0, '2xx': 290, '3xx': 0, '4xx': 0, '5xx': 10 }, refusals: {}, latency: { boundsMs: bounds, counts: [50, 148, 51, 1], sumMs: 3000 }, queueWait: { boundsMs: bounds, counts: [300, 0, 0, 0], sumMs: 0 } } });
  const pt = poolPoint({ t: 0, pool: p0 }, 2000, p1);
  assert.equal(pt.rps, 100);
  assert.equal(pt.errors, 5);
  assert.equal(pt.busy, 2);
  // This interval: 98 ≤ 10 ms, 51 ≤ 100 ms, 1 above: the median is in the 10 ms bucket, p99 in the 100 ms one.
  assert.equal(pt.p50, 10);
  assert.equal(pt.p99, 100);
  assert.equal(percentile(undefined, { boundsMs: bounds, counts: [0, 0, 0, 5], sumMs: 0 }, 0.5), 100, 'above every bound: the highest bound');
  assert.equal(poolPoint({ t: 0, pool: p1 }, 2000, p0).rps, 0, 'counters went down: the daemon restarted');
  assert.equal(poolPoint(undefined, 2000, p1).p50, undefined);
});

const CONFIG = `# The web pools.
listen:
  - { protocol: fastcgi, address: "127.0.0.1:9000", pool: www }   # nginx talks here
pools:
  www:
    command: [php-cgi]
    # Sized for the small VM.
    pm: dynamic
    max_children: 6   # keep ≤ 8
    max_spare: 3
    queue_timeout: 10s
`;

test('config writer: changes the key in place, keeps comments and layout, and the file still parses', () => {
  const r = editPoolText(CONFIG, 'a.yaml', '/tmp/a.yaml', 'www', { max_children: '4', idle_timeout: '30s' });
  assert.deepEqual(r.problems, []);
  assert.match(r.text, /^# The web pools\.$/m);
  assert.match(r.text, /# nginx talks here/);
  assert.match(r.text, /# Sized for the small VM\./);
  assert.match(r.text, /^    max_children: 4   # keep ≤ 8$/m);
  assert.match(r.text, /idle_timeout: 30s/);
  assert.deepEqual(r.diff.filter((d) => d.op !== ' ').map((d) => `${d.op}${d.text.trim()}`), ['-max_children: 6   # keep ≤ 8', '+max_children: 4   # keep ≤ 8', '+idle_timeout: 30s']);
  assert.equal(r.text, CONFIG.replace('max_children: 6', 'max_children: 4').replace('queue_timeout: 10s', 'queue_timeout: 10s\n    idle_timeout: 30s'), 'every other byte as it was');
  const removed = editPoolText(CONFIG, 'a.yaml', '/tmp/a.yaml', 'www', { queue_timeout: null });
  assert.equal(removed.text, CONFIG.replace('    queue_timeout: 10s\n', ''));
});

test('config writer: the schema of fcgi-pm check refuses, with the file, line and key; unknown pools and keys are refused', () => {
  const r = editPoolText(CONFIG, 'a.yaml', '/tmp/a.yaml', 'www', { max_children: 2 });
  assert.equal(r.problems.length, 1);
  assert.match(r.problems[0]!, /^a\.yaml:10: pools\.www\.max_spare: must be ≤ max_children \(2\), got 3$/);
  assert.match(editPoolText(CONFIG, 'a.yaml', '/tmp/a.yaml', 'www', { max_children: 'many' }).problems[0]!, /^a\.yaml:9: pools\.www\.max_children: /);
  assert.match(editPoolText(CONFIG, 'a.yaml', '/tmp/a.yaml', 'nope', { max_children: 2 }).problems[0]!, /pools\.nope: no such pool/);
  assert.match(editPoolText(CONFIG, 'a.yaml', '/tmp/a.yaml', 'www', { command: 'sh' }).problems[0]!, /pools\.www\.command: not editable/);
});

test('diff: context around changes, gaps marked', () => {
  const a = Array.from({ length: 20 }, (_, i) => `line ${i + 1}`).join('\n');
  const b = a.replace('line 10', 'line ten');
  const d = lineDiff(a, b, 1);
  assert.deepEqual(d.map((x) => `${x.op}${x.text}`), [' …', ' line 9', '-line 10', '+line ten', ' line 11', ' …']);
  assert.deepEqual(d.filter((x) => x.op !== ' ').map((x) => x.line), [10, 10]);
});

test('passwords: scrypt hashes verify the right password only', async () => {
  const h = hashPassword('correct horse');
  assert.match(h, /^scrypt\$16384\$8\$1\$/);
  assert.equal(await verifyPassword('correct horse', h), true);
  assert.equal(await verifyPassword('correct horsf', h), false);
  assert.equal(await verifyPassword('x', 'plain'), false);
});

test('warnings ring: only warn and above, repeats counted on one entry, bounded', () => {
  let now = 0;
  const r = new WarningRing(3, () => now);
  r.line('{"level":30,"msg":"ready"}');
  r.line('{"level":40,"code":"ERR_A","msg":"a"}');
  now = 1000;
  r.line('{"level":40,"code":"ERR_A","msg":"a"}');
  assert.deepEqual(r.list().map((e) => [e.code, e.count]), [['ERR_A', 2]]);
  for (const c of ['B', 'C', 'D']) r.line(`{"level":50,"code":"ERR_${c}","msg":"${c}","pool":"www"}`);
  assert.deepEqual(r.list().map((e) => e.code), ['ERR_B', 'ERR_C', 'ERR_D']);
  assert.equal(r.list()[0]!.pool, 'www');
});

test('config: a dashboard section needs a way to log in, a TCP address, hashes not passwords, a token for http peers', () => {
  const base = { listen: [{ protocol: 'fastcgi', address: '127.0.0.1:9000' }], pools: { www: { backends: ['127.0.0.1:9001'] } } };
  const problems = (dashboard: unknown): string[] => problemsOf(() => configFromObject({ ...base, dashboard }, '/etc/f.yaml'));
  assert.match(problems({}).join('\n'), /dashboard: needs "token" or "users"/);
  assert.match(problems({ token: 'short' }).join('\n'), /dashboard\.token: must be at least 16 characters/);
  assert.match(problems({ token: 'x'.repeat(16), address: 'unix:/run/d.sock' }).join('\n'), /dashboard\.address: must be a TCP address/);
  assert.match(problems({ users: { ops: 'hunter2' } }).join('\n'), /dashboard\.users\.ops: must be a hash from "fcgi-pm dashboard --hash-password"/);
  assert.match(problems({ token: 'x'.repeat(16), peers: ['http://10.0.0.2:9910'] }).join('\n'), /dashboard\.peers\[0\]: an http:\/\/ peer is read with peer_token/);
  assert.match(problems({ token: 'x'.repeat(16), peers: ['web.sock'] }).join('\n'), /dashboard\.peers\[0\]: must be a control socket path/);
  const cfg = configFromObject({ ...base, dashboard: { token: 'x'.repeat(16), users: { ops: hashPassword('pw') }, peers: ['unix:/run/a.sock'] } }, '/etc/f.yaml');
  assert.equal(cfg.dashboard?.address.text, '127.0.0.1:9910');
  assert.deepEqual(cfg.dashboard?.peers, ['/run/a.sock']);
  assert.equal(cfg.dashboard?.history, 15 * 60_000);
  assert.equal(configFromObject(base, '/etc/f.yaml').dashboard, undefined, 'off unless present');
});

test('control protocol: restart and drain name a pool', () => {
  assert.equal(parseRequest('{"cmd":"restart"}'), 'restart needs "pool": the name of a pool');
  assert.deepEqual(parseRequest('{"cmd":"restart","pool":"www"}'), { cmd: 'restart', processes: false, all_sites: false, timeout_ms: undefined, pool: 'www', rolling: false });
  assert.equal((parseRequest('{"cmd":"restart","pool":"www","rolling":true}') as ControlRequest).rolling, true);
  assert.equal(parseRequest('{"cmd":"drain"}'), 'drain needs "pool": the name of a pool');
  assert.deepEqual(parseRequest('{"cmd":"drain","pool":"www"}'), { cmd: 'drain', processes: false, all_sites: false, timeout_ms: undefined, pool: 'www', rolling: false });
});

test('sampler: fast while someone watches, the idle rate otherwise; rings bounded by history / interval; a gone pool loses its ring', async () => {
  let pools = [pool('www', { completed: 0 }), pool('api')];
  let reads = 0;
  let idle = 0;
  const sampler = new ClusterSampler({
    ids: () => ['self'],
    peerToken: () => undefined,
    self: async () => {
      reads++;
      return { ...snap(1, '/etc/a.yaml', pools), daemon: { ...snap(1, '/etc/a.yaml', pools).daemon, now: reads * 1000 } };
    },
    history: () => 3000,
    interval: () => 1000,
    idleInterval: () => idle,
  });
  sampler.start();
  assert.equal(sampler.rate, 0, 'idle_sample_interval 0: no sampling while nobody watches');
  assert.equal(sampler.watching, false);
  for (let i = 0; i < 5; i++) await sampler.tick();
  assert.equal(sampler.history()[ringKey('self', 'www')]!.length, 3, 'history 3 s at 1 s: three points');
  const ticks: number[] = [];
  idle = 20;
  const stop = sampler.subscribe((t) => ticks.push(t.cluster.daemons.length));
  assert.deepEqual(ticks, [1], 'a new page gets the last sample at once, before any read');
  assert.equal(sampler.watching, true);
  assert.equal(sampler.rate, 1000);
  const n = reads;
  await sampler.tick(); // joins the read subscribe() started rather than doubling it
  assert.equal(reads, n);
  assert.deepEqual(ticks, [1, 1], 'then the fresh read');
  stop();
  assert.equal(sampler.watching, false, 'the last page gone');
  assert.equal(sampler.rate, 20, 'back to the idle rate');
  // Samples go on with no page open: history before the next visit.
  const idleFrom = reads;
  await waitFor(() => reads >= idleFrom + 2, { timeout: 10_000, interval: 5, what: 'samples at the idle rate' });
  sampler.stop();
  assert.equal(sampler.rate, 0);
  await sampler.tick(); // settles a read the idle timer may have started
  const before = reads;
  pools = [pool('www', { completed: 10 })];
  await sampler.tick();
  assert.equal(reads, before + 1);
  assert.deepEqual(Object.keys(sampler.history()), [ringKey('self', 'www')], 'api removed from an answering daemon');
  assert.equal(sampler.history()[ringKey('self', 'www')]!.at(-1)!.rps, 10);
  sampler.stop();
});

test('outcomes: counted per pool as exchanges finish, in the snapshot once, so text and Prometheus show responses by class', () => {
  const c = new OutcomeCounter();
  const ex = (status: number, ms: number): Exchange => ({ pool: 'www', status, startedAt: 1000 - ms }) as unknown as Exchange;
  c.finished(ex(200, 3), 1000);
  c.finished(ex(200, 40), 1000);
  c.finished(ex(503, 0.5), 1000);
  c.finished({ pool: undefined, status: 200, startedAt: 0 } as unknown as Exchange, 1000);
  const o = c.of('www')!;
  assert.deepEqual(o.status, { '1xx': 0, '2xx': 2, '3xx': 0, '4xx': 0, '5xx': 1 });
  assert.deepEqual(o.latency.counts.slice(0, 6), [1, 0, 1, 0, 0, 1], '≤1 ms, ≤5 ms, ≤50 ms');
  const s = snap(1, '/etc/a.yaml', [pool('www', { outcomes: o })]);
  assert.match(renderPrometheus(s), /^fcgipm_responses_total\{pool="www",class="2xx"\} 2$/m);
  assert.match(renderText(s), /responses.*2xx.*2/);
  c.forget(new Set());
  assert.equal(c.of('www'), undefined);
});

test('writeIfUnchanged: renamed over the file with its mode, the old text kept as .bak; a file changed since it was read is not written', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fpm-atomic-'));
  try {
    const file = join(dir, 'site1.yaml');
    writeFileSync(file, 'names: [a.test]\n', { mode: 0o640 });
    const read = readFileSync(file, 'utf8');
    const ino = statSync(file).ino;
    assert.equal(writeIfUnchanged(file, hashText(read), 'names: [b.test]\n'), `${file}.bak`);
    assert.equal(readFileSync(file, 'utf8'), 'names: [b.test]\n');
    assert.equal(readFileSync(`${file}.bak`, 'utf8'), read);
    assert.notEqual(statSync(file).ino, ino, 'a new file renamed over the old one');
    assert.equal(statSync(file).mode & 0o777, 0o640);
    assert.deepEqual(readdirSync(dir).sort(), ['site1.yaml', 'site1.yaml.bak'], 'no temp file left');
    // The hash the edit was made from no longer matches: refused, nothing touched.
    writeFileSync(file, 'names: [hand.test]\n');
    assert.throws(() => writeIfUnchanged(file, hashText(read), 'names: [c.test]\n'), EditConflict);
    assert.equal(readFileSync(file, 'utf8'), 'names: [hand.test]\n');
    assert.equal(readFileSync(`${file}.bak`, 'utf8'), read);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('site files: current values read from pool:, edited there (made when missing), judged by the given checks', () => {
  const text = '# a site\nnames: [a.test]\ndocument_root: /srv/a\npool:\n  max_children: 2  # keep\n  user: nobody\n';
  assert.deepEqual(settingsAt(text, SITE_POOL_PATH), { max_children: '2' }, 'only editable keys');
  const r = editSettingsText(text, 'a.yaml', SITE_POOL_PATH, { max_children: '3', queue_limit: '10' }, () => []);
  assert.equal(r.text, '# a site\nnames: [a.test]\ndocument_root: /srv/a\npool:\n  max_children: 3  # keep\n  user: nobody\n  queue_limit: 10\n');
  const bare = editSettingsText('names: [b.test]\ndocument_root: /srv/b\n', 'b.yaml', SITE_POOL_PATH, { max_children: '4' }, () => []);
  assert.deepEqual(settingsAt(bare.text, SITE_POOL_PATH), { max_children: '4' }, 'a site without pool: gets one');
  const judged = editSettingsText(text, 'a.yaml', SITE_POOL_PATH, { max_children: '-1' }, (next) => (next.includes('-1') ? ['a.yaml:5: pool.max_children: must be a whole number ≥ 1'] : []));
  assert.deepEqual(judged.problems, ['a.yaml:5: pool.max_children: must be a whole number ≥ 1']);
  assert.deepEqual(settingsAt('pools: {}\n', ['pools', 'x']), {});
});

test('a page is sent only the rows that changed since its last tick, and the keys of rows gone', () => {
  const row = (d: string, p: string, rps: number): PoolRow => ({ d, pool: p, state: 'running', pm: 'ondemand', busy: 0, idle: 1, max: 2, queue: 0, limit: 10, rps, p99: 5, mem: 1024, e4: 0, e5: 0, refused: 0 });
  const sent = new SentRows();
  const first = sent.next([row('self', 'a', 0), row('self', 'b', 1), row('peer', 'a', 0)]);
  assert.equal(first.changed.length, 3, 'a new page gets every row');
  assert.deepEqual(first.gone, []);
  assert.deepEqual(sent.next([row('self', 'a', 0), row('self', 'b', 1), row('peer', 'a', 0)]), { changed: [], gone: [] });
  const third = sent.next([row('self', 'a', 0), row('self', 'b', 2.5)]);
  assert.deepEqual(third.changed.map((j) => JSON.parse(j)), [row('self', 'b', 2.5)]);
  assert.deepEqual(third.gone, [rowKey({ d: 'peer', pool: 'a' })]);
  // A row that comes back is sent again whole.
  assert.equal(sent.next([row('self', 'a', 0), row('self', 'b', 2.5), row('peer', 'a', 0)]).changed.length, 1);
  // A field that goes to undefined (no latency yet) is a change too.
  const noP99 = { ...row('self', 'a', 0), p99: undefined };
  assert.deepEqual(sent.next([noP99, row('self', 'b', 2.5), row('peer', 'a', 0)]).changed, [JSON.stringify(noP99)]);
});
