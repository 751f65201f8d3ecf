// Issue 5 acceptance, status: the CLI as a real process against a real daemon (spawned
// php-cgi workers): status in every format after known traffic, workers with real pids,
// status/ping pages on the listeners (also while every worker is busy, and refused by
// status_allow), a clear error when no daemon runs, and a graceful `fcgi-pm stop`.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as http from 'node:http';
import { join } from 'node:path';
import { FcgiClient, parseCgiOutput, phpParams } from '../helpers/fcgi-client.js';
import { httpRequest } from '../helpers/http-client.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { Cleanup } from '../helpers/scope.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor, withTimeout } from '../helpers/wait.js';
import { opsDaemon, runBin, type OpsDaemon } from './helpers.js';
import { checkExposition, sampleValue } from './prom-check.js';

const FPM_FIELDS = ['pool', 'process manager', 'start time', 'start since', 'accepted conn', 'listen queue', 'max listen queue', 'listen queue len', 'idle processes', 'active processes', 'total processes', 'max active processes', 'max children reached', 'slow requests'];
const FPM_PROCESS_FIELDS = ['pid', 'state', 'start time', 'start since', 'requests', 'request duration', 'request method', 'request uri', 'content length', 'user', 'script', 'last request cpu', 'last request memory'];
const SENT = 7;
/** Source-tree PHP pages of these tests (not compiled). */
const OPS_FIXTURES = fileURLToPath(new URL('../../../test/ops/fixtures', import.meta.url));

/** GET that resolves at the response head; `body` settles later. */
function startGet(url: string): Promise<{ status: number; body: Promise<string> }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent: false }, (res) => {
      const body = new Promise<string>((ok, fail) => {
        let s = '';
        res.setEncoding('utf8').on('data', (c: string) => (s += c));
        res.on('end', () => ok(s));
        res.on('error', fail);
      });
      body.catch(() => {});
      resolve({ status: res.statusCode ?? 0, body });
    });
    req.on('error', reject);
  });
}

async function fcgiGet(port: number, params: Record<string, string>): Promise<{ status: number; body: string; headers: Record<string, string> }> {
  const c = await FcgiClient.connect({ port });
  try {
    c.request(1, params, undefined, { keepConn: false });
    const r = await c.response(1);
    const out = parseCgiOutput(r.stdout);
    return { status: out.status, body: out.body.toString('utf8'), headers: Object.fromEntries(out.headers.map(([k, v]) => [k.toLowerCase(), v])) };
  } finally {
    c.socket.destroy();
  }
}

describe('status, workers and stop through the control socket and status pages', { timeout: 90_000 }, () => {
  const scope = new Cleanup();
  let d: OpsDaemon;
  let url: string;
  let fcgiOpen: number;
  let fcgiLocked: number;
  before(async () => {
    const port = await freePort();
    fcgiOpen = await freePort();
    fcgiLocked = await freePort();
    url = `http://127.0.0.1:${port}`;
    const dir = makeTempDir(scope, 'fpm-ops-');
    d = await opsDaemon(scope, {
      listen: [
        { protocol: 'http', address: `127.0.0.1:${port}`, pool: 'php', document_root: PHP_FIXTURES, status_path: '/status', ping_path: '/ping', ping_response: 'pong!' },
        { protocol: 'fastcgi', address: `127.0.0.1:${fcgiOpen}`, pool: 'php', status_path: '/status' },
        { protocol: 'fastcgi', address: `127.0.0.1:${fcgiLocked}`, pool: 'php', status_path: '/status', status_allow: ['10.0.0.0/8'] },
      ],
      // static: no worker (and its request count) goes away while the test looks.
      pools: { php: { command: phpCommand(dir, 'ops-status-marker'), pm: 'static', max_children: 2 } },
    }, { dir });
  });
  after(() => scope.run());

  it('says clearly when no daemon runs: exit 3 and the socket path', async () => {
    const missing = join(d.dir, 'nobody.sock');
    for (const cmd of [['status'], ['workers'], ['reload'], ['stop']]) {
      const r = await runBin([...cmd, '--control', missing]);
      assert.equal(r.code, 3, `${cmd[0]}: ${r.stderr}`);
      assert.match(r.stderr, new RegExp(`no fcgi-pm daemon is running at ${missing.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
    }
  });

  it(`status --json after ${SENT} requests: accepted and completed equal what was sent`, async () => {
    for (let i = 0; i < SENT; i++) assert.equal((await httpRequest(`${url}/hello.php`)).status, 200);
    const r = await d.ctl(['status', '--json']);
    assert.equal(r.code, 0, r.stderr);
    const s = JSON.parse(r.stdout);
    assert.equal(s.format, 'fcgi-pm-status/1');
    assert.equal(s.daemon.pid, d.daemon.pid);
    assert.equal(s.daemon.controlSocket, d.control);
    assert.equal(statSync(d.control).mode & 0o777, 0o600, 'control socket mode 0600 by default');
    assert.equal(statSync(d.control).uid, process.getuid!(), "owned by the daemon's user");
    const php = s.pools.find((p: { name: string }) => p.name === 'php');
    assert.equal(php.accepted, SENT);
    assert.equal(php.completed, SENT);
    assert.equal(php.kind, 'spawned');
    assert.equal(php.maxChildren, 2);
    assert.ok(php.spawns.count >= 1, 'spawn latency is reported');
    assert.equal(s.listeners.length, 3);
    const text = await d.ctl(['status', '--pool', 'php']);
    assert.match(text.stdout, new RegExp(`^  accepted conn: ${SENT}$`, 'm'));
    // The compact view: a header row, then one line for the pool.
    const compact = (await d.ctl(['status'])).stdout.split('\n');
    const head = compact.findIndex((l) => l.startsWith('POOL '));
    assert.match(compact[head]!, /^POOL +STATE +PM +BUSY +IDLE +MAX +QUEUE +REQ\/S +P99 +MEM +4XX +5XX$/);
    assert.match(compact[head + 1]!, /^php +running +static +\d+ +\d+ +2 +0\/\d+ +\d+\.\d +≤\d+m?s +\S+ +\d+ +\d+$/);
    // -c FILE finds the socket through the config, also when the file has become invalid.
    const byConfig = await runBin(['status', '--json', '-c', d.daemon.configPath]);
    assert.equal(JSON.parse(byConfig.stdout).daemon.pid, d.daemon.pid, byConfig.stderr);
    const original = readFileSync(d.daemon.configPath, 'utf8');
    writeFileSync(d.daemon.configPath, `control_socket: ${d.control}\nlisten: []\npools: { php: { max_children: -1 } }\n`);
    const byBroken = await runBin(['status', '--json', '-c', d.daemon.configPath]);
    writeFileSync(d.daemon.configPath, original);
    assert.equal(byBroken.code, 0, byBroken.stderr);
  });

  it('status --prometheus and --openmetrics pass the strict exposition check', async () => {
    for (const [flag, openMetrics] of [['--prometheus', false], ['--openmetrics', true]] as const) {
      const r = await d.ctl(['status', flag]);
      assert.equal(r.code, 0, r.stderr);
      const c = checkExposition(r.stdout, { openMetrics });
      assert.deepEqual(c.problems, [], r.stdout);
      assert.equal(sampleValue(c, 'fcgipm_requests_accepted_total', { pool: 'php' }), SENT);
      assert.equal(sampleValue(c, 'fcgipm_requests_completed_total', { pool: 'php' }), SENT);
      assert.equal(sampleValue(c, 'fcgipm_max_children', { pool: 'php' }), 2);
      assert.ok((sampleValue(c, 'fcgipm_worker_spawn_seconds_count', { pool: 'php' }) ?? 0) >= 1);
      assert.equal(sampleValue(c, 'fcgipm_listener_connections', { listener: `127.0.0.1:${fcgiOpen}`, protocol: 'fastcgi', pool: 'php' }), 0);
    }
  });

  it('status --fpm: the PHP-FPM page with its field names and plausible values', async () => {
    const r = await d.ctl(['status', '--fpm']);
    assert.equal(r.code, 0, r.stderr);
    const fields = new Map(r.stdout.split('\n').filter((l) => l.includes(':')).map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]));
    for (const f of FPM_FIELDS) assert.ok(fields.has(f), `${f} in\n${r.stdout}`);
    assert.equal(fields.get('pool'), 'php');
    assert.equal(fields.get('process manager'), 'static');
    assert.equal(fields.get('accepted conn'), String(SENT));
    assert.equal(fields.get('listen queue'), '0');
    assert.equal(fields.get('listen queue len'), '1024');
    assert.equal(fields.get('total processes'), '2');
    assert.equal(fields.get('idle processes'), '2');
    assert.equal(fields.get('active processes'), '0');
    assert.ok(Number(fields.get('max active processes')) >= 1);

    const full = await d.ctl(['status', '--fpm', '--json', '--full']);
    const j = JSON.parse(full.stdout);
    for (const f of FPM_FIELDS) assert.ok(f in j, f);
    assert.equal(j['accepted conn'], SENT);
    assert.ok(Math.abs(j['start time'] * 1000 - Date.now()) < 600_000, 'start time is a Unix timestamp');
    assert.equal(j.processes.length, 2);
    for (const p of j.processes) {
      assert.deepEqual(Object.keys(p).slice(0, FPM_PROCESS_FIELDS.length), FPM_PROCESS_FIELDS);
      assert.ok(existsSync(`/proc/${p.pid}`), `pid ${p.pid} exists`);
    }
    assert.ok(j.processes.some((p: Record<string, unknown>) => p['request uri'] === '/hello.php' && p['request method'] === 'GET' && String(p.script).endsWith('/hello.php')), full.stdout);
  });

  it('workers: one line per worker, with pids that exist in /proc and are the daemon\'s children', async () => {
    const r = await d.ctl(['workers']);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trim().split('\n');
    assert.match(lines[0]!, /^POOL\s+PID\s+STATE\s+REQS\s+MEMORY\s+CPU\s+WEIGHT\s+UPTIME\s+REQUEST$/);
    const pids = lines.slice(1).map((l) => Number(l.split(/\s+/)[1]));
    assert.equal(pids.length, 2);
    for (const pid of pids) assert.ok(existsSync(`/proc/${pid}`), `${pid} exists`);
    assert.deepEqual([...pids].sort((a, b) => a - b), d.daemon.descendants('ops-status-marker'));
    assert.equal(lines.slice(1).reduce((n, l) => n + Number(l.split(/\s+/)[3]), 0), SENT, 'requests served add up');
    const j = JSON.parse((await d.ctl(['workers', '--json'])).stdout);
    assert.deepEqual(j.map((w: { pid: number }) => w.pid).sort(), [...pids].sort());
    assert.ok(j.every((w: { memory?: number }) => typeof w.memory === 'number' && w.memory > 0), 'memory measured');
  });

  it('status and ping pages on the listeners, in the format the query asks; they do not count as requests', async () => {
    const ping = await httpRequest(`${url}/ping`);
    assert.equal(ping.status, 200);
    assert.equal(ping.text, 'pong!');
    const text = await httpRequest(`${url}/status`);
    assert.equal(text.status, 200);
    assert.match(String(text.headers['content-type']), /^text\/plain/);
    assert.match(text.text, new RegExp(`^accepted conn: {8}${SENT}$`, 'm'));
    const j = await httpRequest(`${url}/status?json&full`);
    assert.equal(j.headers['content-type'], 'application/json');
    const page = JSON.parse(j.text);
    assert.equal(page.pool, 'php');
    assert.equal(page['accepted conn'], SENT, 'status and ping requests are not counted');
    assert.ok(Array.isArray(page.processes));
    const html = await httpRequest(`${url}/status?html`);
    assert.match(html.text, /<tr><th>accepted conn<\/th><td>7<\/td><\/tr>/);
    const om = await httpRequest(`${url}/status?openmetrics`);
    assert.match(String(om.headers['content-type']), /^application\/openmetrics-text/);
    assert.deepEqual(checkExposition(om.text, { openMetrics: true }).problems, []);
    const prom = await httpRequest(`${url}/status?prometheus`);
    assert.deepEqual(checkExposition(prom.text).problems, []);
    // Over FastCGI, as php-fpm exporters ask: SCRIPT_NAME /status, no REMOTE_ADDR (a direct client).
    const direct = await fcgiGet(fcgiOpen, { SCRIPT_NAME: '/status', SCRIPT_FILENAME: '/status', QUERY_STRING: 'json', REQUEST_METHOD: 'GET' });
    assert.equal(direct.status, 200);
    assert.equal(JSON.parse(direct.body)['accepted conn'], SENT);
  });

  it('status_allow: clients outside it get 403, inside it the page', async () => {
    const params = (remote: string): Record<string, string> => ({ ...phpParams(PHP_FIXTURES, '/status?json'), REMOTE_ADDR: remote });
    const denied = await fcgiGet(fcgiLocked, params('127.0.0.1'));
    assert.equal(denied.status, 403);
    assert.match(denied.body, /127\.0\.0\.1 is not in status_allow/);
    assert.equal((await fcgiGet(fcgiLocked, { SCRIPT_NAME: '/status', REQUEST_METHOD: 'GET' })).status, 403, 'no REMOTE_ADDR is not "local" here');
    const allowed = await fcgiGet(fcgiLocked, params('10.9.8.7'));
    assert.equal(allowed.status, 200);
    assert.equal(JSON.parse(allowed.body).pool, 'php');
  });

  it('the status page answers while every worker is busy, and shows what they run', async () => {
    // Two requests hold both workers until a file appears.
    const release = join(d.dir, 'release');
    const uri = `/wait.php?until=${release}`;
    const held = await Promise.all([1, 2].map(async () => {
      const c = await FcgiClient.connect({ port: fcgiOpen });
      c.request(1, phpParams(OPS_FIXTURES, uri), undefined, { keepConn: false });
      return c;
    }));
    try {
      const page = await waitFor(async () => {
        const p = JSON.parse((await httpRequest(`${url}/status?json&full`)).text);
        return p['active processes'] === 2 ? p : undefined;
      }, { timeout: 15_000, what: 'both workers busy, seen on the status page' });
      assert.equal(page['idle processes'], 0);
      const running = page.processes.filter((p: Record<string, unknown>) => p.state === 'Running');
      assert.equal(running.length, 2);
      for (const p of running) {
        assert.equal(p['request uri'], uri);
        assert.equal(p.script, `${OPS_FIXTURES}/wait.php`);
        assert.ok(p['request duration'] > 0);
      }
      const w = await d.ctl(['workers']);
      assert.equal(w.stdout.split('\n').filter((l) => l.includes(' busy ') && l.includes(`GET ${uri} (`)).length, 2, w.stdout);
      assert.equal(held.filter((c) => c.records.length > 0).length, 0, 'neither request had an answer yet');
    } finally {
      writeFileSync(release, '');
    }
    for (const c of held) {
      const out = parseCgiOutput((await c.response(1, 15_000)).stdout);
      assert.equal(out.body.toString(), 'released\n');
      c.socket.destroy();
    }
  });

  it('stop --graceful-timeout: running requests finish, then the daemon exits 0 and the CLI says so', async () => {
    const running = await startGet(`${url}/sleep.php?ms=1500&flush=1`);
    assert.equal(running.status, 200);
    const stop = runBin(['stop', '--graceful-timeout', '20s', '--control', d.control], { timeoutMs: 40_000 });
    assert.match(await withTimeout(running.body, 20_000, 'the running request'), /slept 1500/);
    const r = await stop;
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`fcgi-pm \\(pid ${d.daemon.pid}, config ${d.daemon.configPath}\\) stopped`));
    const exit = await withTimeout(d.daemon.child.exited, 10_000, 'daemon exit');
    assert.deepEqual(exit, { code: 0, signal: null });
    assert.ok(d.daemon.findLog((l) => l.kind === 'shutdown' && l.via === 'control' && l.timeout_ms === 20_000));
    await waitFor(() => !existsSync(d.control), { what: 'control socket removed' });
  });
});
