/** A steady load of GET /pid.php through a front end, and a pool's worker pids by `fcgi-pm workers`, for tests that change pools under load. */
import assert from 'node:assert/strict';
import * as http from 'node:http';
import type { TestContext } from 'node:test';
import { startNginxKeptAlive, type Nginx } from '../helpers/nginx.js';
import type { OpsDaemon } from './helpers.js';

export interface Load {
  ok: number;
  failures: string[];
  /** Each answer that passed, with the time (Date.now()) its request was sent. */
  answers: Array<{ sentAt: number; body: string }>;
  /** Resolves once `n` more requests succeeded than when called. */
  more(n: number): Promise<void>;
  stop(): Promise<void>;
}

/** What each request asks for and what its body must be (default /pid.php, a pid). */
export interface LoadPage {
  path: string;
  expect: RegExp;
}

const PID_PAGE: LoadPage = { path: '/pid.php', expect: /^\d+$/ };

/** `clients` loops of GET `page` on kept-alive connections until stopped; every non-200, unexpected body or error is a failure. */
export function startLoad(base: string, clients: number, page: LoadPage = PID_PAGE): Load {
  const agent = new http.Agent({ keepAlive: true, maxSockets: clients });
  let running = true;
  const waiters: Array<{ at: number; resolve: () => void }> = [];
  const load: Load = {
    ok: 0,
    failures: [],
    answers: [],
    more(n) {
      const at = load.ok + n;
      return new Promise((resolve) => waiters.push({ at, resolve }));
    },
    async stop() {
      running = false;
      await Promise.all(loops);
      agent.destroy();
    },
  };
  const one = (): Promise<void> =>
    new Promise((resolve) => {
      const sentAt = Date.now();
      const req = http.get(`${base}${page.path}`, { agent, timeout: 20_000 }, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (c: string) => (body += c));
        res.on('end', () => {
          if (res.statusCode === 200 && page.expect.test(body)) {
            load.ok++;
            load.answers.push({ sentAt, body });
          }
          else load.failures.push(`HTTP ${res.statusCode}: ${body.slice(0, 200)}`);
          for (const w of waiters.filter((x) => load.ok >= x.at)) {
            waiters.splice(waiters.indexOf(w), 1);
            w.resolve();
          }
          resolve();
        });
        res.on('error', (err) => {
          load.failures.push(`response error: ${err.message}`);
          resolve();
        });
      });
      req.on('timeout', () => req.destroy(new Error('no response within 20 s')));
      req.on('error', (err) => {
        load.failures.push(`request error: ${err.message}`);
        resolve();
      });
    });
  const loops = Array.from({ length: clients }, async () => {
    while (running) await one();
  });
  return load;
}

export async function poolPids(d: OpsDaemon, pool: string): Promise<number[]> {
  const r = await d.ctl(['workers', '--json', '--pool', pool]);
  assert.equal(r.code, 0, r.stderr);
  return (JSON.parse(r.stdout) as Array<{ pid: number }>).map((w) => w.pid);
}

/** nginx in front of the FastCGI listener on `port` (kept-alive upstream connections), and `clients` loops of load through it. */
export async function loadThroughNginx(t: TestContext, port: number, clients: number, page?: LoadPage): Promise<{ ngx: Nginx; load: Load }> {
  const ngx = await startNginxKeptAlive(t, port, { keepalive: 8 });
  const load = startLoad(ngx.url, clients, page);
  t.after(() => load.stop());
  return { ngx, load };
}
