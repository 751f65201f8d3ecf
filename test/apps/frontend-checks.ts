/**
 * What every front-end config in examples/frontends/ must do with the PHP example behind
 * fcgi-pm: registered as one describe() block around a setup that starts fcgi-pm (from
 * examples/frontends/fcgi-pm.yaml) and the front-end server.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { join } from 'node:path';
import { startDaemon, LogLevel, type Daemon } from '../helpers/daemon.js';
import { httpRequest, httpUpload } from '../helpers/http-client.js';
import { seededBytes, sha256 } from '../helpers/payload.js';
import { freePort } from '../helpers/ports.js';
import { Cleanup, type Scope } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { exampleConfig, PHP_PUBLIC, WORKLOAD_COUNTS } from './examples.js';
import type { FrontEnd } from './servers.js';

export interface FcgiPmForFrontEnd {
  daemon: Daemon;
  fastcgiPort: number;
  scgiPort: number;
}

/** fcgi-pm from examples/frontends/fcgi-pm.yaml on free ports, its database in `dir`. */
export async function startExampleDaemon(scope: Scope, dir: string, name = 'app'): Promise<FcgiPmForFrontEnd> {
  const fastcgiPort = await freePort();
  const scgiPort = await freePort();
  const daemon = await startDaemon(
    scope,
    exampleConfig('frontends/fcgi-pm.yaml', {
      listen: { '127.0.0.1:9000': `127.0.0.1:${fastcgiPort}`, '127.0.0.1:9100': `127.0.0.1:${scgiPort}` },
      pools: { php: { env: { APP_DB_PATH: join(dir, `${name}.sqlite3`) } } },
    }),
  );
  return { daemon, fastcgiPort, scgiPort };
}

export interface FrontEndTarget {
  front: FrontEnd;
  /** Every fcgi-pm daemon behind the front end (requests must show in their access logs). */
  daemons: Daemon[];
  /** Where the PHP pages are served from (default: examples/php/public). */
  docRoot?: string;
}

export interface CheckOptions {
  /** The front end passes PATH_INFO for /script.php/extra (default true). */
  pathInfo?: boolean;
  /** Extra tests run after the common ones, with the target. */
  extra?: (get: () => FrontEndTarget) => void;
}

export function frontEndSuite(name: string, setup: (scope: Scope, dir: string) => Promise<FrontEndTarget>, opts: CheckOptions = {}): void {
  describe(name, { timeout: 90_000 }, () => {
    const scope = new Cleanup();
    let target: FrontEndTarget;
    const url = (path: string): string => `${target.front.url}${path}`;
    before(async () => {
      target = await setup(scope, makeTempDir(scope, 'fpm-fe-'));
    });
    after(() => scope.run());

    it('serves the 8,750-byte page', async () => {
      const r = await httpRequest(url('/page.php'));
      assert.equal(r.status, 200, `${r.text.slice(0, 300)}\n${target.front.log().slice(-2000)}`);
      assert.equal(r.body.length, 8750);
      assert.match(String(r.headers['content-type']), /^text\/html/);
      assert.match(r.text, /<h1>A page of 8,750 bytes<\/h1>/);
    });

    it('serves the SQLite workload page with the right counts', async () => {
      const r = await httpRequest(url('/db.php'));
      assert.equal(r.status, 200, r.text.slice(0, 300));
      assert.deepEqual(JSON.parse(r.text), WORKLOAD_COUNTS);
    });

    it('passes the script, query string and method', async () => {
      const r = await httpRequest(url('/echo.php?x=%E2%9C%93&y=1'));
      assert.equal(r.status, 200, r.text.slice(0, 300));
      const j = JSON.parse(r.text);
      assert.equal(j.cgi.REQUEST_METHOD, 'GET');
      assert.equal(j.cgi.SCRIPT_NAME, '/echo.php');
      assert.equal(j.cgi.SCRIPT_FILENAME, join(target.docRoot ?? PHP_PUBLIC, 'echo.php'));
      assert.equal(j.cgi.QUERY_STRING, 'x=%E2%9C%93&y=1');
      assert.deepEqual(j.get, { x: '✓', y: '1' });
    });

    if (opts.pathInfo !== false) {
      it('passes PATH_INFO after the script name', async () => {
        const r = await httpRequest(url('/echo.php/extra/path'));
        assert.equal(r.status, 200, r.text.slice(0, 300));
        const j = JSON.parse(r.text);
        assert.equal(j.cgi.SCRIPT_NAME, '/echo.php');
        assert.equal(j.cgi.PATH_INFO, '/extra/path');
      });
    }

    it('delivers a 2 MB POST body intact', async () => {
      const body = seededBytes(2 * 1048576, 3);
      const r = await httpUpload(url('/echo.php'), body, body.length);
      assert.equal(r.status, 200, r.text.slice(0, 300));
      const j = JSON.parse(r.text);
      assert.equal(j.cgi.REQUEST_METHOD, 'POST');
      assert.equal(j.cgi.CONTENT_LENGTH, String(body.length));
      assert.equal(j.body_bytes, body.length);
      assert.equal(j.body_sha256, sha256(body));
    });

    it('answers 404 for a missing script', async () => {
      const r = await httpRequest(url('/missing.php'));
      assert.equal(r.status, 404);
    });

    it('answers 40 concurrent requests correctly', async () => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 40 });
      try {
        const rs = await Promise.all(Array.from({ length: 40 }, (_, i) => httpRequest(url(`/echo.php?i=${i}`), { agent, timeout: 30_000 })));
        const bad = rs.map((r, i) => [i, r] as const).filter(([i, r]) => r.status !== 200 || JSON.parse(r.text).get.i !== String(i));
        // On a refusal, the daemon's lines about it say which rule refused (queue length, bound, growth).
        const refusals = (): string => target.daemons.flatMap((d) => d.logs.filter((l) => l.status === 503 || /QUEUE|queue/.test(String(l.code ?? l.msg ?? '')))).slice(-8).map((l) => JSON.stringify(l)).join('\n');
        assert.deepEqual(bad.map(([i, r]) => `${i}: ${r.status} ${r.text.slice(0, 80)}`), [], bad.length > 0 ? refusals() : undefined);
      } finally {
        agent.destroy();
      }
    });

    it('the requests went through fcgi-pm (access log)', async () => {
      // Access lines are written after the response left, so the last ones may still be
      // on their way through the daemon's stdout: wait for them rather than count at once.
      const seen = (): number[] => target.daemons.map((d) => d.logs.filter((l) => l.status === 200 && JSON.stringify(l).includes('.php')).length);
      const total = (): number => seen().reduce((a, b) => a + b, 0);
      await waitFor(() => total() >= 40, { timeout: 5000, what: 'access lines' }).catch(() => undefined);
      assert.ok(total() >= 40, `access lines per daemon: ${seen().join(', ')}`);
    });

    opts.extra?.(() => target);

    it('fcgi-pm logged no errors', () => {
      for (const d of target.daemons) {
        const errors = d.logs.filter((l) => typeof l.level === 'number' && l.level >= LogLevel.error);
        assert.equal(errors.length, 0, JSON.stringify(errors.slice(0, 5)));
      }
    });
  });
}
