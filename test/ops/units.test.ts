// Pure parts of issue 5: status_allow rules, the access-log format, the renderers over a
// hand-made snapshot (fields defined once, every format), the reload plan, /proc address
// parsing for socket activation, counters folded across pool generations.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compileAllow, parseAllowRule } from '../../src/config/cidr.js';
import { parseAccessFormat } from '../../src/config/access-format.js';
import { configFromObject } from '../../src/config/schema.js';
import { ConfigError } from '../../src/errors.js';
import { compileAccessFormat } from '../../src/log/access-format.js';
import { formatTime } from '../../src/log/time-format.js';
import { POOL_FIELDS, WORKER_FIELDS } from '../../src/control/fields.js';
import { countersOf, foldCounters, zeroCounters, type PoolCounters } from '../../src/pool/counters.js';
import { LATENCY_BOUNDS_MS, OutcomeCounter } from '../../src/control/outcomes.js';
import { renderCompact } from '../../src/control/render-compact.js';
import { renderFpm } from '../../src/control/render-fpm.js';
import { renderPrometheus } from '../../src/control/render-prometheus.js';
import { renderText } from '../../src/control/render-text.js';
import { renderWorkers } from '../../src/control/render-workers.js';
import { SNAPSHOT_FORMAT, type PoolStatus, type StatusSnapshot } from '../../src/control/types.js';
import { planReload } from '../../src/daemon/reload.js';
import { matchInherited } from '../../src/daemon/socket-activation.js';
import { parseProcAddress } from '../../src/util/proc-sockets.js';
import type { Listener } from '../../src/frontend/index.js';
import type { PoolSnapshot } from '../../src/pool/types.js';
import { Exchange, type ResponseSink } from '../../src/protocol/exchange.js';
import { CgiParams } from '../../src/protocol/params.js';
import { checkExposition, promtool, sampleValue } from './prom-check.js';

test('status_allow: CIDR blocks, addresses, IPv4-mapped IPv6, unix, local', () => {
  const m = compileAllow(['127.0.0.0/8', '::1', '10.1.0.0/16', 'fd00::/8', 'unix']);
  for (const ok of ['127.0.0.1', '127.255.0.9', '::1', '::ffff:127.0.0.1', '10.1.200.3', 'fd12::1', 'unix:', 'unix:/run/x.sock']) assert.equal(m(ok), true, ok);
  for (const no of ['128.0.0.1', '10.2.0.1', '::2', 'fe80::1', '1.2.3.4', undefined, '']) assert.equal(m(no), false, String(no));
  assert.equal(compileAllow(['local'])(undefined), true, 'local: no REMOTE_ADDR at all');
  assert.equal(compileAllow(['all'])('203.0.113.9'), true);
  for (const bad of ['10.0.0.0/33', 'example.com', '1.2.3', '::1/129', 'everyone']) assert.equal(typeof parseAllowRule(bad), 'string', bad);
});

test('config: operations keys validate with file and key in the message', () => {
  const base = { pools: { p: { backends: ['127.0.0.1:9001'] } } };
  const problems = (extra: Record<string, unknown>, listen: Record<string, unknown> = {}): string[] => {
    try {
      configFromObject({ ...base, listen: [{ protocol: 'fastcgi', address: '127.0.0.1:9000', ...listen }], ...extra }, '<t>');
      return [];
    } catch (err) {
      return (err as ConfigError).problems;
    }
  };
  assert.deepEqual(problems({}, { status_path: 'status' }), ['<t>: listen[0].status_path: must be a URL path starting with "/", e.g. "/status", got "status"']);
  assert.match(problems({}, { status_allow: ['10.0.0.0/99'] })[0]!, /status_allow: "10.0.0.0\/99": the prefix length must be 0..32/);
  assert.match(problems({ log: { access_format: '%R %Z' } })[0]!, /log.access_format: unknown letter %Z/);
  assert.match(problems({ control_socket: 'ctl.sock' })[0]!, /control_socket: must be an absolute path, a path starting with .\/ /);
  const cfg = configFromObject({ ...base, listen: [{ protocol: 'fastcgi', address: '127.0.0.1:9000', status_path: '/status' }], control_socket: 'off', log: { access_format: 'FPM' } }, '/etc/x/fcgi-pm.yaml');
  assert.equal(cfg.controlSocket, false);
  assert.equal(cfg.controlSocketMode, 0o600);
  assert.equal(cfg.log.accessFormat, 'fpm');
  assert.deepEqual(cfg.listen[0]!.statusAllow, ['127.0.0.0/8', '::1', 'unix', 'local']);
  assert.equal(cfg.listen[0]!.pingResponse, 'pong');
  assert.equal(configFromObject({ ...base, listen: [{ protocol: 'fastcgi', address: '127.0.0.1:9000' }], control_socket: './run/ctl.sock' }, '/etc/x/fcgi-pm.yaml').controlSocket, '/etc/x/run/ctl.sock');
});

const sink: ResponseSink = { head() {}, body: () => true, stderr() {}, end() {}, fail: () => 0 };

test('access format: PHP-FPM letters and ours, one line per request', () => {
  assert.equal(typeof parseAccessFormat('%{bogus}d'), 'string');
  assert.equal(typeof parseAccessFormat('%{HTTP_HOST}e %'), 'string');
  const ex = new Exchange(
    CgiParams.fromObject({ REQUEST_METHOD: 'POST', REQUEST_URI: '/a.php?x=1', REMOTE_ADDR: '192.0.2.7', REMOTE_USER: 'ann', CONTENT_LENGTH: '12', SCRIPT_FILENAME: '/srv/a.php', HTTP_HOST: 'h.example' }),
    sink,
    'fastcgi',
    0,
  );
  ex.pool = 'php';
  ex.workerPid = 4321;
  ex.backend = 'unix:/w.sock';
  ex.respondHead({ status: 201, reason: 'Created', headers: [], raw: Buffer.alloc(0) });
  ex.respondBody(Buffer.alloc(5));
  ex.respondEnd();
  const line = compileAccessFormat('%R %u "%m %r%Q%q" %U %s %{milli}d %{micro}d %d %l %f %n %p %P %{HTTP_HOST}e %b %E %S %k %{kilo}M %C %% %{sec}t', {
    daemonPid: 99,
    workerFigures: (pid) => (pid === 4321 ? { memory: 2048 * 1024, cpu: 12.5 } : undefined),
  });
  const out = line({ ex, startEpoch: 1_700_000_000_000, endEpoch: 1_700_000_000_250, durationMs: 250.5, status: 201, slow: true });
  assert.equal(out, '192.0.2.7 ann "POST /a.php?x=1" /a.php?x=1 201 250.500 250500 0.251 12 /srv/a.php php 4321 99 h.example 5 - slow unix:/w.sock 2048 12.50 % 1700000000');
  assert.match(formatTime(Date.UTC(2025, 10, 30, 6, 8, 0)), /^\d\d\/Nov\/2025:\d\d:08:00 [+-]\d{4}$/);
});

function poolStatus(over: Partial<PoolStatus> = {}): PoolStatus {
  return {
    name: 'php',
    kind: 'spawned',
    pm: 'dynamic',
    state: 'running',
    startedAt: 1_700_000_000_000,
    generations: 1,
    maxChildren: 4,
    accepted: 10,
    completed: 9,
    aborted: 1,
    active: 1,
    maxActive: 3,
    queue: { length: 0, max: 2, limit: 1024, oldestWaitMs: 0, waits: { count: 4, totalMs: 40, maxMs: 25 } },
    processes: { spawning: 0, idle: 1, busy: 1, draining: 0, stopping: 0, total: 2 },
    rejected: { queueFull: 2, queueTimeout: 0, failing: 0, shuttingDown: 0 },
    errors: { unreachable: 0, timeout: 1, crashed: 0, other: 0 },
    maxChildrenReached: 1,
    crashes: 0,
    recycles: { max_requests: 3, idle_timeout: 1 },
    slowRequests: 2,
    spawns: { count: 3, totalMs: 150, maxMs: 70 },
    capacity: 4,
    outcomes: {
      status: { '1xx': 0, '2xx': 6, '3xx': 0, '4xx': 2, '5xx': 1 },
      refusals: { ERR_SCRIPT_FORBIDDEN: 1, ERR_SCRIPT_NOT_FOUND: 1, ERR_QUEUE_FULL: 1 },
      // 2 ≤ 1 ms, 3 ≤ 5 ms, 1 ≤ 50 ms, 3 over 30 s.
      latency: { boundsMs: [...LATENCY_BOUNDS_MS], counts: [2, 0, 3, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 3], sumMs: 95_123.5 },
      queueWait: { boundsMs: [...LATENCY_BOUNDS_MS], counts: [5, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0], sumMs: 40 },
    },
    backends: [],
    workers: [
      { pid: 101, state: 'busy', requests: 5, startedAt: 1_700_000_000_000, lastUsedAt: 1_700_000_090_000, cpu: 50, memory: 30_000_000, request: { method: 'GET', uri: '/slow.php?x="1"', script: '/srv/slow.php', contentLength: 0, user: '', remote: '127.0.0.1', startedAt: 1_700_000_099_000, durationMs: 1000 } },
      { pid: 102, state: 'idle', requests: 4, startedAt: 1_700_000_000_000, lastUsedAt: 1_700_000_080_000, retiring: 'reload' },
    ],
    ...over,
  };
}

function snapshot(pools: PoolStatus[]): StatusSnapshot {
  return {
    format: SNAPSHOT_FORMAT,
    daemon: { version: '0.1.0', pid: 7, state: 'running', startedAt: 1_700_000_000_000, now: 1_700_000_100_000, config: '/etc/fcgi-pm.yaml', controlSocket: '/run/c.sock', reloads: { ok: 2, failed: 1 }, rss: 50_000_000 },
    listeners: [
      { address: '127.0.0.1:9000', protocol: 'fastcgi', pool: 'php', connections: 3, accepted: 40, refused: 0, overflowed: 2, outcomes: { status: { '1xx': 0, '2xx': 6, '3xx': 0, '4xx': 5, '5xx': 1 }, refusals: { ERR_VHOST_UNKNOWN: 3, ERR_SCRIPT_FORBIDDEN: 1 } } },
    ],
    pools,
  };
}

test('Prometheus and OpenMetrics renderings pass the strict format check', () => {
  const s = snapshot([poolStatus(), poolStatus({ name: 'we"ird\\pool', kind: 'external', pm: 'external', queue: { length: 1, max: 1, limit: 5, oldestWaitMs: 1500 }, spawns: undefined, capacity: undefined, outcomes: undefined, backends: [{ address: '127.0.0.1:9001', active: 1, down: true }], workers: [] })]);
  for (const openMetrics of [false, true]) {
    const c = checkExposition(renderPrometheus(s, { openMetrics }), { openMetrics });
    assert.deepEqual(c.problems, [], `openMetrics=${openMetrics}`);
    assert.equal(sampleValue(c, 'fcgipm_requests_accepted_total', { pool: 'php' }), 10);
    assert.equal(sampleValue(c, 'fcgipm_requests_rejected_total', { pool: 'php', cause: 'queue_full' }), 2);
    assert.equal(sampleValue(c, 'fcgipm_worker_recycles_total', { pool: 'php', reason: 'max_requests' }), 3);
    assert.equal(sampleValue(c, 'fcgipm_queue_wait_seconds_sum', { pool: 'php' }), 0.04);
    assert.equal(sampleValue(c, 'fcgipm_queue_oldest_wait_seconds', { pool: 'we"ird\\pool' }), 1.5);
    assert.equal(sampleValue(c, 'fcgipm_backend_up', { pool: 'we"ird\\pool', backend: '127.0.0.1:9001' }), 0);
    assert.equal(sampleValue(c, 'fcgipm_workers', { pool: 'php', state: 'busy' }), 1);
    assert.equal(sampleValue(c, 'fcgipm_reloads_total', { result: 'failed' }), 1);
    assert.equal(c.types.has('fcgipm_pool_memory_bytes'), false, 'no memory family without memory figures');
    // Histograms: cumulative buckets in seconds, +Inf equal to _count.
    assert.equal(c.types.get('fcgipm_request_duration_seconds'), 'histogram');
    assert.equal(sampleValue(c, 'fcgipm_request_duration_seconds_bucket', { pool: 'php', le: '0.001' }), 2);
    assert.equal(sampleValue(c, 'fcgipm_request_duration_seconds_bucket', { pool: 'php', le: '0.005' }), 5);
    assert.equal(sampleValue(c, 'fcgipm_request_duration_seconds_bucket', { pool: 'php', le: '30' }), 6);
    assert.equal(sampleValue(c, 'fcgipm_request_duration_seconds_bucket', { pool: 'php', le: '+Inf' }), 9);
    assert.equal(sampleValue(c, 'fcgipm_request_duration_seconds_count', { pool: 'php' }), 9);
    assert.equal(sampleValue(c, 'fcgipm_request_duration_seconds_sum', { pool: 'php' }), 95.1235);
    assert.equal(sampleValue(c, 'fcgipm_queue_wait_seconds_bucket', { pool: 'php', le: '1' }), 6);
    assert.equal(sampleValue(c, 'fcgipm_queue_wait_seconds_sum', { pool: 'php' }), 0.04);
    assert.equal(sampleValue(c, 'fcgipm_request_duration_seconds_count', { pool: 'we"ird\\pool' }), undefined, 'no histogram before a request finished');
    // Utilization (busy ÷ max_children × seats), none for an external pool; refusals by code.
    assert.equal(sampleValue(c, 'fcgipm_pool_utilization_ratio', { pool: 'php' }), 0.25);
    assert.equal(sampleValue(c, 'fcgipm_pool_utilization_ratio', { pool: 'we"ird\\pool' }), undefined);
    assert.equal(sampleValue(c, 'fcgipm_refusals_total', { pool: 'php', code: 'ERR_SCRIPT_NOT_FOUND' }), 1);
    assert.equal(sampleValue(c, 'fcgipm_listener_refusals_total', { listener: '127.0.0.1:9000', code: 'ERR_VHOST_UNKNOWN' }), 3);
    assert.equal(sampleValue(c, 'fcgipm_listener_refusals_total', { listener: '127.0.0.1:9000', code: 'ERR_TOO_MANY_CONNECTIONS' }), 2);
    assert.equal(sampleValue(c, 'fcgipm_listener_responses_total', { listener: '127.0.0.1:9000', class: '4xx' }), 5);
  }
  assert.equal(promtool(renderPrometheus(s)), '', 'promtool check metrics');
  // The checker itself catches what it should.
  assert.ok(checkExposition('# TYPE x_total counter\nx_total 1\n', { prefix: 'x' }).problems.some((p) => p.includes('no HELP')));
  assert.ok(checkExposition('# HELP fcgipm_a a\n# TYPE fcgipm_a counter\nfcgipm_a 1\n').problems.some((p) => p.includes('_total')));
  assert.ok(checkExposition('# HELP fcgipm_a a\n# TYPE fcgipm_a gauge\nfcgipm_a{x="1} 1\n').problems.length > 0);
});

test('PHP-FPM pages: the documented names in text and JSON, per-process blocks with ?full', () => {
  const s = snapshot([poolStatus()]);
  const text = renderFpm(s, { format: 'text', full: true });
  const standard = POOL_FIELDS.filter((f) => f.fpmStandard).map((f) => f.fpm!);
  assert.deepEqual(standard, ['pool', 'process manager', 'start time', 'start since', 'accepted conn', 'listen queue', 'max listen queue', 'listen queue len', 'idle processes', 'active processes', 'total processes', 'max active processes', 'max children reached', 'slow requests']);
  const lines = text.split('\n');
  assert.deepEqual(lines.slice(0, standard.length).map((l) => l.slice(0, l.indexOf(':'))), standard, 'PHP-FPM fields first, in its order');
  assert.match(text, /^pool: {17}php$/m);
  assert.match(text, /^start since: {10}100$/m);
  assert.match(text, /^accepted conn: {8}10$/m);
  assert.match(text, /^start time: {11}\d\d\/[A-Z][a-z]{2}\/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}$/m);
  assert.equal(text.split('************************').length - 1, 2, 'one block per process');
  assert.match(text, /^request duration: {5}1000000$/m, 'microseconds');
  assert.match(text, /^state: {16}Running$/m);
  const j = JSON.parse(renderFpm(s, { format: 'json', full: true }));
  for (const k of standard) assert.ok(k in j, k);
  assert.equal(j['start time'], 1_700_000_000);
  assert.equal(j['accepted conn'], 10);
  const procKeys = WORKER_FIELDS.filter((f) => f.fpmStandard).map((f) => f.fpm!.toLowerCase());
  assert.deepEqual(Object.keys(j.processes[0]).slice(0, procKeys.length), procKeys);
  assert.equal(j.processes[0]['request uri'], '/slow.php?x="1"');
  assert.equal(j.processes[1].state, 'Idle');
  // Text and worker tables say the same things.
  assert.match(renderText(s, { full: true }), /pool php: spawned \(pm dynamic\), running/);
  const table = renderWorkers(s);
  assert.match(table, /^POOL\s+PID\s+STATE\s+REQS\s+MEMORY\s+CPU\s+WEIGHT\s+UPTIME\s+REQUEST$/m);
  assert.match(table, /^php\s+101\s+busy\s+5\s+\S+\s+50\.0%\s+-\s+1m40s\s+GET \/slow\.php\?x="1" \(1s\)$/m);
  assert.match(table, /^php\s+102\s+idle\(reload\)/m);
});

function cfg(obj: Record<string, unknown>) {
  return configFromObject(obj, '<t>');
}

test('reload plan: pools added/removed/changed, listeners kept, updated in place or reopened', () => {
  const cur = cfg({
    listen: [
      { protocol: 'fastcgi', address: '127.0.0.1:9000', pool: 'a' },
      { protocol: 'fastcgi', address: '127.0.0.1:9001', pool: 'b' },
      { protocol: 'scgi', address: '127.0.0.1:9002', pool: 'b' },
    ],
    pools: { a: { command: ['php-cgi'], max_children: 2 }, b: { backends: ['127.0.0.1:7000'] }, c: { backends: ['127.0.0.1:7001'] } },
  });
  const next = cfg({
    listen: [
      { protocol: 'fastcgi', address: '127.0.0.1:9000', pool: 'd', status_path: '/status', allowed_clients: ['10.0.0.0/8'] },
      { protocol: 'scgi', address: '127.0.0.1:9001', pool: 'b' },
      { protocol: 'fastcgi', address: '127.0.0.1:9003', pool: 'a' },
    ],
    pools: { a: { command: ['php-cgi'], max_children: 3 }, b: { backends: ['127.0.0.1:7000'] }, d: { backends: ['127.0.0.1:7002'] } },
  });
  const running = cur.listen.map((c) => ({ config: c, address: c.address.text, connections: 0, accepted: 0, refused: 0, overflowed: 0, fd: undefined, close: async () => {} }) as Listener);
  const plan = planReload(cur, next, running);
  assert.deepEqual(plan.pools.added.map((p) => p.name), ['d']);
  assert.deepEqual(plan.pools.changed.map((p) => p.name), ['a']);
  assert.deepEqual(plan.pools.removed, ['c']);
  assert.deepEqual(plan.pools.unchanged, ['b']);
  assert.deepEqual(plan.listeners.updated.map((u) => u.listener.address), ['127.0.0.1:9000'], 'pool, status_path and allowed_clients change in place');
  assert.deepEqual(plan.listeners.reopened.map((u) => u.listener.address), ['127.0.0.1:9001'], 'protocol change reopens');
  assert.deepEqual(plan.listeners.added.map((l) => l.address.text), ['127.0.0.1:9003']);
  assert.deepEqual(plan.listeners.removed.map((l) => l.address), ['127.0.0.1:9002']);
  assert.equal(planReload(cur, cur, running).pools.unchanged.length, 3, 'the same config changes nothing');
  const restart = planReload(cur, cur, running, new Set(['a']));
  assert.deepEqual([restart.pools.changed.map((p) => p.name), restart.pools.unchanged], [['a'], ['b', 'c']], 'a restart swaps only the named pool');
});

test('reload plan: a pool whose scaling keys alone changed is retuned when the running pool takes it, else changed', () => {
  const pools = (a: Record<string, unknown>, b: Record<string, unknown>) => cfg({ listen: [{ protocol: 'fastcgi', address: '127.0.0.1:9000', pool: 'a' }], pools: { a: { command: ['php-cgi'], max_children: 2, ...a }, b: { command: ['php-cgi'], max_children: 2, ...b } } });
  const cur = pools({}, {});
  const running = cur.listen.map((c) => ({ config: c, address: c.address.text, connections: 0, accepted: 0, refused: 0, overflowed: 0, fd: undefined, close: async () => {} }) as Listener);
  const next = pools({ max_children: 4, idle_timeout: '1m' }, { max_children: 4, env: { X: '1' } });
  const asked: string[] = [];
  const plan = planReload(cur, next, running, new Set(), (p) => {
    asked.push(p.name);
    return true;
  });
  assert.deepEqual(plan.pools.retuned.map((p) => p.name), ['a']);
  assert.deepEqual(plan.pools.changed.map((p) => p.name), ['b'], 'env changed too: a new generation');
  assert.deepEqual(asked, ['a'], 'the running pool is asked only about scaling changes');
  assert.deepEqual(planReload(cur, next, running).pools.changed.map((p) => p.name), ['a', 'b'], 'no pool takes it in place: both replaced');
  assert.deepEqual(planReload(cur, next, running, new Set(['a']), () => true).pools.retuned, [], 'a restart replaces even a retunable pool');
});

test('socket activation: /proc addresses and matching by name, then address', () => {
  assert.deepEqual(parseProcAddress('0100007F:2328'), { host: '127.0.0.1', port: 9000 });
  assert.deepEqual(parseProcAddress('00000000000000000000000001000000:0050'), { host: '::1', port: 80 });
  assert.deepEqual(parseProcAddress('00000000000000000000000000000000:1F90'), { host: '::', port: 8080 });
  assert.deepEqual(parseProcAddress('0000000000000000FFFF00000100007F:1F90'), { host: '127.0.0.1', port: 8080 });
  const c = cfg({
    listen: [
      { protocol: 'fastcgi', address: '127.0.0.1:9000', pool: 'p' },
      { protocol: 'fastcgi', address: 'unix:/run/a.sock', pool: 'p', name: 'web' },
      { protocol: 'http', address: '127.0.0.1:8080', pool: 'p' },
    ],
    pools: { p: { backends: ['127.0.0.1:7000'] } },
  });
  const m = matchInherited(
    [
      { fd: 3, name: undefined, tcp: { host: '127.0.0.1', port: 9000 }, unixPath: undefined },
      { fd: 4, name: 'web', tcp: undefined, unixPath: '/elsewhere.sock' },
      { fd: 5, name: undefined, tcp: { host: '127.0.0.1', port: 9999 }, unixPath: undefined },
    ],
    c.listen,
  );
  assert.equal(m.byListener.get(c.listen[0]!)?.fd, 3);
  assert.equal(m.byListener.get(c.listen[1]!)?.fd, 4, 'by FileDescriptorName');
  assert.equal(m.byListener.has(c.listen[2]!), false);
  assert.deepEqual(m.unmatched.map((s) => s.fd), [5]);
});

test('counters of a drained pool generation carry over; high-water marks take the max; gauges stay behind', () => {
  const snap = (n: number): PoolSnapshot => ({
    name: 'p', kind: 'spawned', pm: 'ondemand', queued: 3, maxQueued: n, queueLimit: 8, active: 2, maxActive: n, accepted: n, completed: n, aborted: 1,
    rejected: { queueFull: n, queueTimeout: 0, failing: 0, shuttingDown: 0 }, errors: { unreachable: 0, timeout: n, crashed: 0, other: 0 },
    workers: [], backends: [], maxChildrenReached: 1, crashes: 2, recycles: { reload: n }, slowRequests: 0, queueWait: { count: n, totalMs: 10 * n, maxMs: n },
  });
  const f = foldCounters(countersOf(snap(5)), snap(7));
  assert.equal(f.accepted, 12);
  assert.equal(f.maxActive, 7);
  assert.equal(f.maxQueued, 7);
  assert.equal(f.maxChildrenReached, 2, 'a count, though its name starts with max');
  assert.equal(f.rejected.queueFull, 12);
  assert.equal(f.recycles.reload, 12);
  assert.deepEqual(f.queueWait, { count: 12, totalMs: 120, maxMs: 7 });
  assert.equal(f.spawnLatency, undefined, 'a summary neither side has stays undefined');
  assert.equal(f.crashes, 4);
  assert.deepEqual(Object.keys(f).sort(), Object.keys(zeroCounters()).sort(), 'gauges and lists are not carried');
});

test('folding counters: every counter of the record folds (a record that is all ones folds to twos, high-water marks to one)', () => {
  const ones = (v: unknown): unknown => (typeof v === 'number' ? 1 : v === undefined ? { count: 1, totalMs: 1, maxMs: 1 } : Object.fromEntries(Object.entries(v as object).map(([k, x]) => [k, ones(x)])));
  const one = Object.fromEntries(Object.entries({ ...zeroCounters(), recycles: { idle: 0 } }).map(([k, v]) => [k, ones(v)])) as unknown as PoolCounters;
  const two = foldCounters(one, one);
  const flat = (v: unknown, path: string, out: Array<[string, number]>): Array<[string, number]> => {
    if (typeof v === 'number') out.push([path, v]);
    else for (const [k, x] of Object.entries(v as object)) flat(x, path === '' ? k : `${path}.${k}`, out);
    return out;
  };
  const folded = flat(two, '', []);
  assert.ok(folded.length >= 20, `${folded.length} counters`);
  for (const [path, v] of folded) assert.equal(v, /(^|\.)(maxActive|maxQueued|maxMs)$/.test(path) ? 1 : 2, path);
  assert.deepEqual(one.rejected, { queueFull: 1, queueTimeout: 1, failing: 1, shuttingDown: 1 }, 'the inputs are left alone');
});

test('docs/operations.md names every metric, status field and access-log letter; the systemd example config is valid', async () => {
  const { readFileSync } = await import('node:fs');
  const { ACCESS_LETTERS } = await import('../../src/config/access-format.js');
  const { DAEMON_METRICS } = await import('../../src/control/fields.js');
  const { loadConfig } = await import('../../src/config/load.js');
  const doc = readFileSync(new URL('../../../docs/operations.md', import.meta.url), 'utf8');
  const metrics = [...DAEMON_METRICS.map((m) => m.metric), ...POOL_FIELDS.flatMap((f) => (f.metric ? [f.metric] : [])), ...WORKER_FIELDS.flatMap((f) => (f.metric ? [f.metric] : []))];
  assert.deepEqual(metrics.filter((m) => !doc.includes(m)), [], 'metrics missing from docs/operations.md');
  const fpm = [...POOL_FIELDS, ...WORKER_FIELDS].filter((f) => f.fpm !== undefined && f.labelled === undefined && f.summary === undefined).map((f) => f.fpm!);
  assert.deepEqual(fpm.filter((n) => !doc.includes(`\`${n}\``)), [], 'status page names missing from docs/operations.md');
  assert.deepEqual(ACCESS_LETTERS.filter((l) => !new RegExp(`\`%(\\{[^}]*\\})?${l.letter}\``).test(doc)).map((l) => l.letter), [], 'access letters missing');
  const example = loadConfig(new URL('../../../examples/systemd/fcgi-pm.yaml', import.meta.url).pathname);
  assert.equal(example.listen[0]!.statusPath, '/fpm-status');
  const unit = readFileSync(new URL('../../../examples/systemd/fcgi-pm.service', import.meta.url), 'utf8');
  for (const line of ['Type=notify', 'NotifyAccess=all', 'KillMode=mixed', 'ExecReload=/usr/bin/fcgi-pm reload']) assert.ok(unit.includes(line), line);
});

test('access log: JSON lines into access_file, a slow request at warn with slow: true; a %-format as plain lines', async () => {
  const { createAccessLog } = await import('../../src/log/access.js');
  const { silentLogger } = await import('../../src/log/log.js');
  const written: string[] = [];
  const file = { write: (s: string) => void written.push(s) };
  const finish = (log: (ex: Exchange) => void, uri: string, startedAt: number): void => {
    const ex = new Exchange(CgiParams.fromObject({ REQUEST_METHOD: 'GET', REQUEST_URI: uri }), sink, 'fastcgi', startedAt);
    ex.pool = 'php';
    ex.respondHead({ status: 200, reason: 'OK', headers: [], raw: Buffer.alloc(0) });
    ex.onFinish = log;
    ex.respondEnd();
  };
  const json = createAccessLog({ logger: silentLogger(), enabled: true, format: 'json', file, slowMs: (p) => (p === 'php' ? 500 : 0) })!;
  finish(json, '/fast', performance.now());
  finish(json, '/slow', performance.now() - 800);
  await new Promise((r) => setImmediate(r));
  const lines = written.join('').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.deepEqual(lines.map((l) => [l.uri, l.level, l.slow, l.kind]), [['/fast', 30, undefined, 'access'], ['/slow', 40, true, 'access']]);
  written.length = 0;
  const text = createAccessLog({ logger: silentLogger(), enabled: true, format: '%m %U %S', file, slowMs: () => 500 })!;
  finish(text, '/slow', performance.now() - 800);
  assert.deepEqual(written, ['GET /slow slow\n']);
  assert.equal(createAccessLog({ logger: silentLogger(), enabled: false, file }), undefined);
});

test('compact status: one line per pool, busiest first; 200 active sites of 1,000 fit in 220 lines', () => {
  const pools = Array.from({ length: 200 }, (_, i) => poolStatus({ name: `site${i}`, rps: i === 517 % 200 ? 40 : i % 3, active: i % 2, workers: [] }));
  const s: StatusSnapshot = { ...snapshot(pools), sites: { source: 'directory /etc/fcgi-pm/sites', defined: 1000, active: 200, broken: 12, brokenSites: Array.from({ length: 12 }, (_, i) => ({ id: `bad${i}`, error: `bad${i}.yaml:2: names: must be a list` })) } };
  const lines = renderCompact(s).trimEnd().split('\n');
  assert.ok(lines.length <= 220, `${lines.length} lines`);
  const head = lines.findIndex((l) => l.startsWith('POOL '));
  const rows = lines.slice(head + 1);
  assert.equal(rows.length, 200);
  assert.match(rows[0]!, /^site117 +running +dynamic +1 +1 +4 +0\/1024 +40\.0 +≤30s +- +2 +1$/, 'the busiest first, p99 from its histogram');
  // Then by req/s (2 before 1 before 0), then by requests running.
  const rps = rows.map((r) => Number(r.split(/ +/)[7]));
  assert.deepEqual(rps, [...rps].sort((a, b) => b - a));
  assert.match(lines.join('\n'), /^ {2}broken bad0: bad0\.yaml:2: names: must be a list$/m);
  assert.match(lines.join('\n'), /^ {2}… 2 more broken \(status --all-sites\)$/m);
});

test('compact status: a direct pool says so beside its pm, and its queue is the socket\'s accept queue', () => {
  const direct = { address: 'unix:/run/fcgi-pm/app.sock', waiting: 3, backlog: 511, arrivals: 9, overflowActive: 0, guard: false, since: 0 };
  const s = snapshot([poolStatus({ name: 'app', pm: 'ondemand', direct, workers: [] }), poolStatus({ name: 'proxied', pm: 'ondemand', workers: [] })]);
  const rows = renderCompact(s).split('\n').filter((l) => /^(app|proxied) /.test(l));
  assert.match(rows.find((r) => r.startsWith('app '))!, /^app +running +ondemand direct +1 +1 +4 +3\/511 /);
  assert.match(rows.find((r) => r.startsWith('proxied '))!, /^proxied +running +ondemand +1 +1 +4 +0\/1024 /);
});

test('recent request rate: the last 10 whole seconds, the current one left out, old seconds forgotten', () => {
  const c = new OutcomeCounter();
  const ex = (): Exchange => {
    const e = new Exchange(new CgiParams(), sink, 'fastcgi', 0);
    e.pool = 'p';
    e.status = 200;
    return e;
  };
  for (let i = 0; i < 30; i++) c.finished(ex(), 100_000 + i * 100); // 3 s of 10/s
  assert.equal(c.rate('p', 103_000), 3, '30 requests over the last 10 s');
  c.finished(ex(), 103_500);
  assert.equal(c.rate('p', 103_900), 3, 'the current second is not counted yet');
  assert.equal(c.rate('p', 112_100), 1.1, 'seconds 100 and 101 dropped out; 102 and 103 in');
  assert.equal(c.rate('p', 113_100), 0.1, 'only 103 left');
  assert.equal(c.rate('p', 200_000), 0);
  assert.equal(c.rate('nope', 200_000), 0);
});

test("a pool's outcomes: the same view while nothing was answered, a new one with the new counts after an answer", () => {
  const c = new OutcomeCounter();
  const ex = (status: number): Exchange => {
    const e = new Exchange(new CgiParams(), sink, 'fastcgi', 0);
    e.pool = 'p';
    e.status = status;
    return e;
  };
  c.finished(ex(200), 1000);
  const first = c.of('p')!;
  assert.equal(c.of('p'), first, 'nothing answered since: the view is kept, not copied');
  c.finished(ex(503), 1005);
  const second = c.of('p')!;
  assert.notEqual(second, first);
  assert.deepEqual([second.status['2xx'], second.status['5xx']], [1, 1], 'the new answer is in the new view');
  assert.equal(second.latency.counts.reduce((a, b) => a + b, 0), 2);
  assert.deepEqual([first.status['2xx'], first.status['5xx']], [1, 0], 'a view given out is never changed');
  assert.equal(c.of('p'), second);
});

test('outcomes of a pool and a listener that were forgotten (a reload removed them) and came back start again, every answer counted', () => {
  const c = new OutcomeCounter();
  const ex = (pool: string, listener: string): Exchange => {
    const e = new Exchange(new CgiParams(), sink, 'fastcgi', 0);
    e.pool = pool;
    e.listener = listener;
    e.status = 200;
    return e;
  };
  c.finished(ex('p', 'l'), 1000);
  c.finished(ex('q', 'm'), 1000);
  c.finished(ex('p', 'l'), 1000);
  assert.equal(c.of('p')!.status['2xx'], 2);
  assert.equal(c.ofListener('l')!.status['2xx'], 2);
  c.forget(new Set(['q']), new Set(['m']));
  assert.equal(c.of('p'), undefined);
  c.finished(ex('p', 'l'), 1001);
  assert.equal(c.of('p')!.status['2xx'], 1, 'counted in the new record');
  assert.equal(c.ofListener('l')!.status['2xx'], 1);
  assert.equal(c.of('q')!.status['2xx'], 1);
});
