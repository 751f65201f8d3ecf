/**
 * A response delivered in full is complete, whatever the client does next. nginx closes
 * (SCGI) or reuses (FastCGI with fastcgi_keep_conn) its connection as soon as it has the
 * Content-Length bytes of Django's page, which can be before fcgi-pm has the worker's
 * end; such a request is counted completed, not aborted, and nginx's kept-alive
 * FastCGI connections stay open for the next request.
 *
 * Every pairing of front-end and worker protocol: FastCGI and SCGI from nginx, each to a
 * pool of FastCGI workers and a pool of SCGI workers (examples/django/fcgi-pm.yaml).
 * The example's application is wrapped so that its response's close() takes a while, as
 * a request_finished handler may (closing a database connection, flushing a log): the
 * adapter calls it after the last body byte and before the request's end, so every
 * request lands in the window where nginx has the whole page and the worker's end has
 * not come yet.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { StatusSnapshot } from '../../src/control/types.js';
import { statusOf } from '../helpers/control-status.js';
import { startDaemon, type Daemon } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { freePort } from '../helpers/ports.js';
import { Cleanup } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { exampleConfig, migrateDjango } from './examples.js';
import { startNginxSite, type FrontEnd } from './servers.js';

/** Requests per route, from CLIENTS kept-alive clients. */
const REQUESTS = Number(process.env.NREQ ?? 120);
const CLIENTS = Number(process.env.NCLI ?? 3);
/** nginx's kept-alive connections per FastCGI upstream. */
const KEEPALIVE = 4;

/** The example's application, its responses' close() taking 30 ms. */
const SLOW_CLOSE_APP = `import time
from mysite.wsgi import application as django_application


class SlowClose:
    def __init__(self, result):
        self.result = result

    def __iter__(self):
        return iter(self.result)

    def close(self):
        try:
            self.result.close()
        finally:
            time.sleep(0.03)


def application(environ, start_response):
    return SlowClose(django_application(environ, start_response))
`;

interface Route {
  prefix: string;
  protocol: 'fastcgi' | 'scgi';
  pool: 'django' | 'django-scgi';
  /** fcgi-pm's listener: a Unix socket (no TCP port to race other tests for while the pools start). */
  address: string;
}

describe('Django page through nginx: full responses are complete, kept-alive FastCGI connections reused', { timeout: 150_000 }, () => {
  const scope = new Cleanup();
  let daemon: Daemon;
  let web: FrontEnd;
  let control: string;
  const routes: Route[] = [];

  const snapshot = (): Promise<StatusSnapshot> => statusOf(control, 5000);

  before(async () => {
    const dir = makeTempDir(scope, 'fpm-djc-');
    const db = join(dir, 'db.sqlite3');
    migrateDjango(db);
    control = join(dir, 'control.sock');
    for (const [prefix, protocol, pool] of [
      ['/ff', 'fastcgi', 'django'],
      ['/fs', 'fastcgi', 'django-scgi'],
      ['/ss', 'scgi', 'django-scgi'],
      ['/sf', 'scgi', 'django'],
    ] as const) {
      routes.push({ prefix, protocol, pool, address: `unix:${join(dir, `${prefix.slice(1)}.sock`)}` });
    }
    const [ff, , ss] = routes;
    writeFileSync(join(dir, 'slow_close.py'), SLOW_CLOSE_APP);
    const pool = { env: { DJANGO_DB_PATH: db, PYTHONPATH: dir }, pm: 'static', max_children: 2 };
    const cfg = exampleConfig('django/fcgi-pm.yaml', {
      listen: { '127.0.0.1:9001': ff!.address, '127.0.0.1:9002': ss!.address },
      pools: { django: pool, 'django-scgi': pool },
    });
    for (const p of Object.values(cfg.pools as Record<string, { command: string[] }>)) {
      assert.equal(p.command.at(-1), 'mysite.wsgi:application');
      p.command[p.command.length - 1] = 'slow_close:application';
    }
    for (const r of routes) if (r !== ff && r !== ss) cfg.listen.push({ protocol: r.protocol, address: r.address, pool: r.pool });
    cfg.control_socket = control;
    daemon = await startDaemon(scope, cfg);

    const webPort = await freePort();
    const upstreams = routes
      .filter((r) => r.protocol === 'fastcgi')
      .map((r) => `upstream up${r.prefix.slice(1)} { server ${r.address}; keepalive ${KEEPALIVE}; }`)
      .join('\n');
    const locations = routes
      .map((r) =>
        r.protocol === 'fastcgi'
          ? `location ${r.prefix}/ {
      fastcgi_split_path_info ^(${r.prefix})(/.*)$;
      include fastcgi_params;
      fastcgi_param PATH_INFO $fastcgi_path_info;
      fastcgi_keep_conn on;
      fastcgi_pass up${r.prefix.slice(1)};
    }`
          : `location ~ ^(?<p>${r.prefix})(?<rest>/.*)$ {
      include scgi_params;
      scgi_param SCRIPT_NAME $p;
      scgi_param PATH_INFO $rest;
      scgi_pass ${r.address};
    }`,
      )
      .join('\n    ');
    web = await startNginxSite(scope, `${upstreams}\nserver {\n    listen 127.0.0.1:${webPort};\n    keepalive_requests 100000;\n    ${locations}\n}\n`, webPort);
  });
  after(() => scope.run());

  it(`${REQUESTS} requests for /page/ per route, each answered in full`, async () => {
    for (const r of routes) {
      let left = REQUESTS;
      const client = async (): Promise<void> => {
        const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
        try {
          while (left-- > 0) {
            const res = await httpRequest(`${web.url}${r.prefix}/page/`, { agent });
            assert.equal(res.status, 200, `${r.prefix}: ${res.text.slice(0, 300)}\n${web.log().slice(-2000)}`);
            assert.equal(res.body.length, 8750, r.prefix);
          }
        } finally {
          agent.destroy();
        }
      };
      await Promise.all(Array.from({ length: CLIENTS }, client));
    }
  });

  it('status counts every request completed and none aborted', async () => {
    const expected = (REQUESTS * routes.length) / 2; // two routes per pool
    const pools = async (): Promise<StatusSnapshot['pools']> => (await snapshot()).pools;
    // The access line (and the count) follows the response: wait until every request is counted.
    let last: StatusSnapshot['pools'] = [];
    await waitFor(
      async () => {
        last = await pools();
        return last.every((p) => p.completed + p.aborted >= expected);
      },
      { timeout: 10_000, what: 'every request counted' },
    ).catch(() => undefined);
    const aborted = daemon.logs.filter((l) => l.aborted === true);
    assert.equal(aborted.length, 0, JSON.stringify(aborted.slice(0, 3)));
    for (const name of ['django', 'django-scgi']) {
      const p = last.find((x) => x.name === name)!;
      assert.deepEqual({ pool: name, completed: p.completed, aborted: p.aborted }, { pool: name, completed: expected, aborted: 0 });
    }
  });

  it(`nginx reuses its kept-alive FastCGI connections (at most ${KEEPALIVE} accepted per listener)`, async () => {
    const s = await snapshot();
    for (const r of routes.filter((x) => x.protocol === 'fastcgi')) {
      const l = s.listeners.find((x) => x.address === r.address)!;
      assert.ok(l.accepted >= 1 && l.accepted <= KEEPALIVE, `${r.prefix}: ${l.accepted} connections accepted for ${REQUESTS} requests`);
    }
    // SCGI has no keep-alive: one connection per request, and the count says so.
    for (const r of routes.filter((x) => x.protocol === 'scgi')) {
      const l = s.listeners.find((x) => x.address === r.address)!;
      assert.ok(l.accepted >= REQUESTS, `${r.prefix}: ${l.accepted}`);
    }
  });

  it('fcgi-pm keeps its FastCGI connections to the Python workers open between requests (FCGI_KEEP_CONN), from either front end', async () => {
    const sockets = (pid: number): string[] =>
      readdirSync(`/proc/${pid}/fd`)
        .filter((fd) => Number(fd) > 2) // 1 and 2 are the daemon's socketpairs for the output
        .map((fd) => {
          try {
            return readlinkSync(`/proc/${pid}/fd/${fd}`);
          } catch {
            return '';
          }
        })
        .filter((l) => l.startsWith('socket:'))
        .sort();
    const workers = (await snapshot()).pools.find((p) => p.name === 'django')!.workers.map((w) => w.pid!);
    assert.equal(workers.length, 2);
    const before = new Map(workers.map((pid) => [pid, sockets(pid)]));
    // More requests through both front ends (FastCGI and SCGI) to the FastCGI pool.
    for (const r of routes.filter((x) => x.pool === 'django')) {
      for (let i = 0; i < 10; i++) assert.equal((await httpRequest(`${web.url}${r.prefix}/page/`)).status, 200);
    }
    for (const pid of workers) {
      // Its listening socket and the one connection fcgi-pm keeps to it: the same ones.
      assert.equal(before.get(pid)!.length, 2, `worker ${pid}: ${before.get(pid)!.join(' ')}`);
      assert.deepEqual(sockets(pid), before.get(pid), `worker ${pid} kept its connection`);
    }
  });
});
