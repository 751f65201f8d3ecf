/**
 * The Django example as an `accept: direct` preload pool behind real nginx, over FastCGI
 * and over SCGI: nginx connects to the pool's socket and the forks of one parent accept
 * on it themselves (the daemon's overflow listener is nginx's backup). Managed as any
 * pool: scale from zero, recycling after max_requests (no crash counted), a worker over
 * max_memory_hard killed, kill -9 of a worker failing only its request, idle stop, and
 * the overflow's 503 once its queue is full.
 *
 * The application is the example's, wrapped (direct_app.py) with three test routes:
 * /app/pid/ (the worker's pid), /app/sleep/?ms=N[&mark=FILE] (FILE gets the pid first),
 * /app/grow/?mb=N (holds N MiB a while). The requests a worker is killed under are POSTs:
 * nginx replays a GET whose upstream closed before a response on the next server (here
 * the overflow), as proxy_next_upstream does, but never a POST.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { httpRequest } from '../helpers/http-client.js';
import { freePort } from '../helpers/ports.js';
import { isAlive, listProcesses } from '../helpers/proc.js';
import { Cleanup } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { opsDaemon, runBin, type OpsDaemon } from '../ops/helpers.js';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { directSocketSupport } from '../../src/worker/shared-socket.js';
import { migrateDjango } from './examples.js';
import { startNginxSite, type FrontEnd } from './servers.js';
import { EXAMPLES } from './templates.js';

const DIRECT_APP = `import os, time
from urllib.parse import parse_qs
from mysite.wsgi import application as django


def application(environ, start_response):
    path = environ.get('PATH_INFO', '')
    q = {k: v[0] for k, v in parse_qs(environ.get('QUERY_STRING', '')).items()}
    if path == '/pid/':
        body = str(os.getpid()).encode()
    elif path == '/sleep/':
        if 'mark' in q:  # where the test finds the worker running it
            with open(os.path.join(os.path.dirname(__file__), q['mark']), 'w') as f:
                f.write(str(os.getpid()))
        if 'until' in q:  # held until the test writes that file (at most ms)
            release = os.path.join(os.path.dirname(__file__), q['until'])
            for _ in range(int(q.get('ms', '0')) // 10):
                if os.path.exists(release):
                    break
                time.sleep(0.01)
        else:
            time.sleep(int(q.get('ms', '0')) / 1000)
        body = str(os.getpid()).encode()
    elif path == '/grow/':
        held = bytearray(int(q['mb']) << 20)
        for i in range(0, len(held), 4096):
            held[i] = 1
        time.sleep(5)
        body = b'grew'
    else:
        return django(environ, start_response)
    start_response('200 OK', [('Content-Type', 'text/plain'), ('Content-Length', str(len(body)))])
    return [body]
`;

const PROTOCOLS = ['fastcgi', 'scgi'] as const;
type Proto = (typeof PROTOCOLS)[number];

describe('the Django example as an accept: direct preload pool behind nginx, FastCGI and SCGI', { timeout: 240_000, skip: directSocketSupport() }, () => {
  const scope = new Cleanup();
  let d: OpsDaemon;
  let web: FrontEnd;
  let dir: string;

  const pool = async (proto: Proto): Promise<any> => {
    const r = await d.ctl(['status', '--json']);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout).pools.find((p: { name: string }) => p.name === `dj_${proto}`);
  };
  const get = (proto: Proto, path: string): Promise<{ status: number; text: string; body: Buffer }> => httpRequest(`${web.url}/${proto}/app${path}`, { timeout: 30_000 });
  const post = (proto: Proto, path: string): Promise<{ status: number; text: string; body: Buffer }> =>
    httpRequest(`${web.url}/${proto}/app${path}`, { method: 'POST', body: 'x=1', headers: { 'content-type': 'application/x-www-form-urlencoded' }, timeout: 30_000 });
  const overflowAccepted = async (proto: Proto): Promise<number> => {
    const all = JSON.parse((await d.ctl(['status', '--json'])).stdout);
    return all.listeners.find((l: { address: string }) => l.address.includes(`${proto}-overflow.sock`)).accepted as number;
  };

  before(async () => {
    dir = makeTempDir(scope, 'fpm-djd-');
    const db = join(dir, 'db.sqlite3');
    migrateDjango(db);
    writeFileSync(join(dir, 'direct_app.py'), DIRECT_APP);
    const adapter = join(EXAMPLES, '..', 'bin', 'fcgi-pm-wsgi');
    const pools: Record<string, unknown> = {};
    const listen: unknown[] = [];
    for (const proto of PROTOCOLS) {
      pools[`dj_${proto}`] = {
        backend: proto,
        command: ['/usr/bin/python3', adapter, '--preload', `--${proto}`, 'direct_app:application'],
        cwd: join(EXAMPLES, 'django'),
        env: { DJANGO_SETTINGS_MODULE: 'mysite.settings', DJANGO_DB_PATH: db, PYTHONPATH: dir, PYTHONDONTWRITEBYTECODE: '1' },
        preload: true,
        accept: 'direct',
        direct_listen: `unix:${dir}/${proto}.sock`,
        direct_socket_mode: '0666',
        direct_backlog: 1,
        pm: 'ondemand',
        max_children: 2,
        idle_timeout: '2s',
        max_requests: 5,
        max_requests_jitter: 0,
        max_memory_hard: '150MiB',
        memory_sample_interval: '100ms',
        queue_limit: 1,
        queue_timeout: '20s',
      };
      listen.push({ protocol: proto, address: `unix:${dir}/${proto}-overflow.sock`, pool: `dj_${proto}` });
    }
    d = await opsDaemon(scope, { listen, pools, log: { level: 'info', access: true } });
    const port = await freePort();
    // nginx tries the pool's socket first; when its backlog is full, the overflow.
    const site = `
upstream dj_fastcgi { server unix:${dir}/fastcgi.sock max_fails=0; server unix:${dir}/fastcgi-overflow.sock backup; }
upstream dj_scgi { server unix:${dir}/scgi.sock max_fails=0; server unix:${dir}/scgi-overflow.sock backup; }
server {
    listen 127.0.0.1:${port};
    location /fastcgi/app/ {
        fastcgi_split_path_info ^(/fastcgi/app)(/.*)$;
        include fastcgi_params;
        fastcgi_param PATH_INFO $fastcgi_path_info;
        fastcgi_read_timeout 30s;
        fastcgi_pass dj_fastcgi;
    }
    location ~ ^(?<p>/scgi/app)(?<rest>/.*)$ {
        include scgi_params;
        scgi_param SCRIPT_NAME $p;
        scgi_param PATH_INFO $rest;
        scgi_read_timeout 30s;
        scgi_pass dj_scgi;
    }
}
`;
    web = await startNginxSite(scope, site, port);
  });
  after(() => scope.run());

  it('check accepts the direct preload pools, and refuses what cannot hold on the direct path with its reason', async () => {
    const ok = await runBin(['check', '-c', d.daemon.configPath, '--allow-root']);
    assert.equal(ok.code, 0, ok.stdout + ok.stderr);
    const cfg = parseYaml(readFileSync(d.daemon.configPath, 'utf8')) as { pools: Record<string, Record<string, unknown>> };
    const p = cfg.pools['dj_scgi']!;
    p['socket'] = 'argv';
    p['command'] = [...(p['command'] as string[]).slice(0, -1), '--socket', '{socket}', 'direct_app:application'];
    p['authorizer'] = 'dj_fastcgi';
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, stringifyYaml(cfg));
    const r = await runBin(['check', '-c', bad, '--allow-root']);
    assert.notEqual(r.code, 0);
    assert.match(r.stdout + r.stderr, /socket: accept: direct: the workers get the shared socket/);
    assert.match(r.stdout + r.stderr, /authorizer: accept: direct: requests reach the workers without fcgi-pm/);
  });

  for (const proto of PROTOCOLS) {
    it(`${proto}: from zero, the page is served by a fork of the pool's parent that accepted nginx's connection itself`, async () => {
      const mark = d.daemon.mark();
      const before = await pool(proto);
      assert.equal(before.kind, 'direct');
      assert.equal(before.workers.length, 0, 'no worker before the first request');
      const proxied = await overflowAccepted(proto);
      const page = await get(proto, '/page/');
      assert.equal(page.status, 200, page.text.slice(0, 300));
      assert.equal(page.body.length, 8750);
      // Looked at from /proc at once (a status call on a loaded machine can outlast idle_timeout).
      const worker = Number((await get(proto, '/pid/')).text);
      const ppid = listProcesses().find((x) => x.pid === worker)?.ppid;
      const p = await pool(proto);
      const parent = p.preload?.pid as number;
      assert.ok(parent > 0, JSON.stringify(p.preload));
      assert.equal(ppid, parent, `worker ${worker} is a fork of the pool's parent${ppid === undefined ? ` (gone already):\n${d.daemon.dump(mark, 40, (l) => l.kind !== 'access')}` : ''}`);
      // The request went to the pool's socket, not through the daemon's overflow listener.
      assert.equal(await overflowAccepted(proto), proxied, 'the daemon proxied nothing');
    });

    it(`${proto}: recycling after max_requests: every request answered, no crash counted`, async () => {
      const mark = d.daemon.mark();
      const pids = new Set<number>();
      for (let i = 0; i < 14; i++) {
        const r = await get(proto, '/pid/');
        assert.equal(r.status, 200, r.text);
        pids.add(Number(r.text));
      }
      assert.ok(pids.size >= 3, `14 requests at max_requests 5 were served by ${pids.size} workers`);
      const p = await waitFor(async () => {
        const s = await pool(proto);
        return (s.recycles?.max_requests ?? 0) >= 2 ? s : undefined;
      }, { timeout: 10_000, what: 'recycles counted' });
      assert.equal(p.crashes ?? 0, 0);
      assert.deepEqual(d.daemon.logsSince(mark).filter((l) => l['code'] === 'ERR_WORKER_CRASHED'), []);
    });

    it(`${proto}: kill -9 of a busy worker fails its request only`, async () => {
      const mark = join(dir, `${proto}-sleeping`);
      rmSync(mark, { force: true });
      const slow = post(proto, `/sleep/?ms=4000&mark=${proto}-sleeping`);
      const busy = await waitFor(() => (existsSync(mark) ? Number(readFileSync(mark, 'utf8')) || undefined : undefined), { timeout: 10_000, what: 'the worker running the slow request' });
      const other = await get(proto, '/page/');
      assert.equal(other.status, 200, 'another request is served meanwhile');
      process.kill(busy, 'SIGKILL');
      const r = await slow;
      assert.equal(r.status, 502, `the killed worker's request: ${r.status}`);
      for (let i = 0; i < 3; i++) assert.equal((await get(proto, '/page/')).status, 200, 'the pool serves on');
    });

    it(`${proto}: a worker over max_memory_hard is killed; the pool serves on`, async () => {
      const mark = d.daemon.mark();
      const r = await post(proto, '/grow/?mb=300');
      assert.equal(r.status, 502, `the request of the killed worker: ${r.status} ${r.text.slice(0, 200)}`);
      const line = await d.daemon.waitForLog((l) => typeof l['code'] === 'string' && /MEMORY/.test(l['code'] as string) && l['pool'] === `dj_${proto}`, { since: mark, what: 'the memory kill line' });
      assert.ok(line);
      assert.equal((await get(proto, '/page/')).status, 200);
      // A GET nginx replays on its backup: the overflow sends it to the direct socket again,
      // where the next worker is killed too; that failure is the request's answer (502),
      // not a reason to queue it once more (the overflow re-queues only a failed connect).
      const replayed = await get(proto, '/grow/?mb=300');
      assert.equal(replayed.status, 502, `${replayed.status} ${replayed.text.slice(0, 200)}`);
      assert.equal((await get(proto, '/page/')).status, 200);
    });

    it(`${proto}: the overflow answers 503 once its queue is full; the rest is served`, async () => {
      // Both workers busy, one connection in the pool socket's backlog (direct_backlog 1),
      // one in the overflow's queue (queue_limit 1): what comes next is refused.
      // The two are held until the test releases them: both stay busy however slowly the
      // second fork starts and status answers on a busy machine.
      const release = `release-${proto}`;
      const slow = [get(proto, `/sleep/?ms=25000&until=${release}`), get(proto, `/sleep/?ms=25000&until=${release}`)];
      await waitFor(async () => (await pool(proto)).workers.filter((w: { state: string }) => w.state === 'busy').length === 2, { timeout: 20_000, what: 'both workers busy' });
      const answered: number[] = [];
      const more = Array.from({ length: 6 }, () => get(proto, '/pid/').then((x) => (answered.push(x.status), x)));
      // The refused ones are answered while the two run; those queued wait for them.
      await waitFor(() => answered.includes(503) || answered.length === 6, { timeout: 20_000, what: 'a 503 while both workers are busy' });
      writeFileSync(join(dir, release), '');
      const statuses = (await Promise.all(more)).map((x) => x.status);
      assert.ok(statuses.includes(503), `statuses: ${statuses.join(',')}`);
      assert.deepEqual(statuses.filter((s) => s !== 200 && s !== 503), [], `statuses: ${statuses.join(',')}`);
      for (const s of await Promise.all(slow)) assert.equal(s.status, 200);
    });

    it(`${proto}: idle workers stop; the parent stays for the next request`, async () => {
      const p = await waitFor(async () => {
        const s = await pool(proto);
        return s.workers.length === 0 ? s : undefined;
      }, { timeout: 20_000, what: 'every worker stopped for idleness' });
      assert.ok(isAlive(p.preload.pid), 'the parent is still there');
      assert.equal((await get(proto, '/page/')).status, 200);
    });
  }
});
